"""Start Django for a benchmark script on a throwaway VAR_DIR (SQLite unless DATABASE_URL)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_start() -> Path:
    """Configure settings on a fresh temporary folder, migrate, and return that folder."""
    sys.path.insert(0, str(ROOT))
    var_dir = Path(tempfile.mkdtemp(prefix="bench-var-"))
    os.environ.setdefault("VAR_DIR", str(var_dir))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    return var_dir
