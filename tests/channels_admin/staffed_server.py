"""The real server with a staff login made on it, for the tests that drive the admin page."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import free_port, manage, project_env, running_server

STAFF_USER = "admin"
STAFF_PASSWORD = "a-long-test-password"


@contextmanager
def staffed_server(var_dir: Path, **env: str) -> Iterator[str]:
    """:func:`running_server` on a free port (its ``SERVER_URL`` set), with the superuser
    ``STAFF_USER`` made; yields its base URL."""
    port = free_port()
    env = {"SERVER_URL": f"http://127.0.0.1:{port}", **env}
    with running_server(var_dir, port=port, **env) as base_url:
        created = manage(
            "createsuperuser",
            "--noinput",
            f"--username={STAFF_USER}",
            "--email=admin@example.org",
            env=project_env(var_dir, DJANGO_SUPERUSER_PASSWORD=STAFF_PASSWORD, **env),
        )
        assert created.returncode == 0, created.stderr
        yield base_url
