"""The scale-out services: PostgreSQL through DATABASE_URL and Redis through REDIS_URL.

These tests use the real services when they are reachable on loopback and skip otherwise.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
import requests

from edge import __version__
from scripts.reachable import reachable
from tests.conftest import ROOT, project_env, running_server

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


needs_postgres = pytest.mark.skipif(
    not reachable(POSTGRES_URL), reason=f"PostgreSQL is not reachable at {POSTGRES_URL}"
)
needs_redis = pytest.mark.skipif(
    not reachable(REDIS_URL), reason=f"Redis is not reachable at {REDIS_URL}"
)


@pytest.fixture
def postgres_database():
    """A new, empty PostgreSQL database; its URL is yielded and the database dropped after."""
    import psycopg

    name = f"test_scale_out_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@needs_postgres
def test_server_runs_on_postgresql_from_database_url(tmp_path, postgres_database):
    import psycopg

    with running_server(tmp_path, DATABASE_URL=postgres_database) as base_url:
        health = requests.get(f"{base_url}/healthz", timeout=5)

    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "version": __version__,
        "engine": "classic",
        "engine_model": "classic: no weights, CPU",
        "engine_chosen_because": f"no learned checkpoint in {tmp_path / 'models'}",
    }
    with psycopg.connect(postgres_database) as connection:
        (applied,) = connection.execute(
            "SELECT count(*) FROM django_migrations WHERE app = 'auth'"
        ).fetchone()
    assert applied > 0
    assert not (tmp_path / "db.sqlite3").exists()


LAYER_ROUND_TRIP = """
import asyncio
import django
django.setup()
from channels.layers import get_channel_layer

async def main():
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "probe", "n": 1})
    print(type(layer).__name__, await asyncio.wait_for(layer.receive(channel), 5))
    named = f"segmentation.probe.{channel.rpartition('!')[2]}"
    for n in range(3):
        await layer.send(named, {"type": "probe", "n": n})
    print([(await layer.receive(named))["n"] for _ in range(3)])

asyncio.run(main())
"""


@needs_redis
def test_channel_layer_uses_redis_from_redis_url(tmp_path):
    env = project_env(tmp_path, REDIS_URL=REDIS_URL)

    result = subprocess.run(
        [sys.executable, "-c", LAYER_ROUND_TRIP],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "OneTripRedisChannelLayer {'type': 'probe', 'n': 1}\n[0, 1, 2]\n"


@needs_redis
def test_a_full_channel_refuses_a_send_and_keeps_what_it_holds():
    from channels.exceptions import ChannelFull

    from edge.channel_layer import OneTripRedisChannelLayer

    async def fill() -> list[int]:
        layer = OneTripRedisChannelLayer(hosts=[REDIS_URL], capacity=2, prefix="test-full")
        channel = f"full.{uuid.uuid4().hex}"
        await layer.send(channel, {"type": "probe", "n": 0})
        await layer.send(channel, {"type": "probe", "n": 1})
        with pytest.raises(ChannelFull):
            await layer.send(channel, {"type": "probe", "n": 2})
        return [(await layer.receive(channel))["n"] for _ in range(2)]

    assert asyncio.run(fill()) == [0, 1]
