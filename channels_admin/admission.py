"""Who may join ``/ts`` in this process: once it carries ``CHANNELS_MAX_VIEWERS`` viewers, the
next ones are refused at once (503 with ``Retry-After``) and the viewers it has keep their full
rate, as Icecast's ``<clients>`` and nginx's ``limit_conn`` do. With several processes, a proxy
in front tries the next one on a 503 (docs/deploy.md)."""

from __future__ import annotations

from dataclasses import dataclass

RETRY_AFTER_SEC = 10


@dataclass
class Admission:
    max_viewers: int | None  # None: no fixed cap
    refused: int = 0  # viewers refused since the process started

    def refusal(self, viewers: int) -> str | None:
        """None when one more viewer may join ``viewers``; else why not (counted)."""
        if self.max_viewers is not None and viewers >= self.max_viewers:
            self.refused += 1
            return f"this server carries its most viewers ({self.max_viewers}): try again shortly"
        return None

    def refusing(self, viewers: int) -> bool:
        """Whether the next viewer would be refused."""
        return self.max_viewers is not None and viewers >= self.max_viewers
