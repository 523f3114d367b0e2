"""What the stream tests do as a client of the real server: pick a channel, read the status."""

from __future__ import annotations

import time

import requests


def select(server: str, channel_id: str) -> None:
    response = requests.post(
        f"{server}/api/admin/channel", json={"channel_id": channel_id}, timeout=10
    )
    assert response.status_code == 200, response.text


def status(server: str) -> dict:
    return requests.get(f"{server}/api/admin/status", timeout=5).json()


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not met within {timeout}s")
