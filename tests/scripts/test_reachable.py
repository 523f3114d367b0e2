from __future__ import annotations

import socket

from scripts.reachable import reachable
from tests.conftest import free_port


def test_a_listening_port_is_reachable_and_a_closed_one_is_not():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        assert reachable(f"postgresql://postgres@127.0.0.1:{port}/postgres") is True
    assert reachable(f"redis://127.0.0.1:{free_port()}/0") is False


def test_a_url_without_a_known_port_is_not_reachable():
    assert reachable("unix:///run/redis.sock") is False
    assert reachable("ftp://127.0.0.1/") is False
