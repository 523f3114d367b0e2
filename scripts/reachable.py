"""Whether a service URL's host and port accept a TCP connection: exit status 0 if so, 1 if not.

    python scripts/reachable.py postgresql://postgres@127.0.0.1:5432/postgres

Used by `make test` (and the tests) to run the PostgreSQL and Redis tests only where those
servers are running.
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlsplit

DEFAULT_PORTS = {"postgres": 5432, "postgresql": 5432, "redis": 6379, "rediss": 6379}


def reachable(url: str, timeout: float = 1.0) -> bool:
    parts = urlsplit(url)
    port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    if not parts.hostname or port is None:
        return False
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(0 if reachable(sys.argv[1]) else 1)
