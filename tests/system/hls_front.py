"""A server behind the HLS cache docs/deploy.md configures: nginx, its configuration read from
that page, in front of a real server on a loopback port, both stopped with the caller's stack."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from loopback_fakes.nginx_config import hls_cache_configuration
from tests.conftest import free_port, running_server
from tests.system.test_deployment_topology import nginx_started


@dataclass(frozen=True)
class HlsFront:
    front: str  # nginx's base URL
    origin: str  # the server's
    work: Path  # nginx's folder: its configuration and logs


def hls_front_started(
    stack: contextlib.ExitStack, nginx: str, tmp_path: Path, *, segment_secret: str
) -> HlsFront:
    """nginx (the binary ``nginx``) in front of a server of ``tmp_path``, both signing and
    checking HLS segments with ``segment_secret``, until ``stack`` closes."""
    ports = {"port": free_port(), "origin": free_port()}
    work = tmp_path / "nginx"
    work.mkdir()
    (work / "nginx.conf").write_text(
        hls_cache_configuration(work, **ports, segment_secret=segment_secret)
    )
    origin_url = f"http://127.0.0.1:{ports['origin']}"
    origin = stack.enter_context(
        running_server(
            tmp_path,
            port=ports["origin"],
            SERVER_URL=origin_url,
            CHANNELS_SEGMENT_SECRET=segment_secret,
        )
    )
    front = nginx_started(stack, nginx, work, ports["port"])
    return HlsFront(front=front, origin=origin, work=work)
