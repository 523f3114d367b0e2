"""A request Django finds suspicious is logged in one line, without its traceback.

Django answers a suspicious request (a ``Host`` not in ``ALLOWED_HOSTS``, more form fields than
``DATA_UPLOAD_MAX_NUMBER_FIELDS``, ...) with 400, and logs it on a ``django.security.*`` logger
with the exception's traceback: 30 to 70 lines that any client can have written for a request of
50 bytes, and that say nothing the message does not. The console handler drops them.
"""

from __future__ import annotations

import logging


class SuspiciousInOneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("django.security."):
            record.exc_info = None
            record.exc_text = None
        return True
