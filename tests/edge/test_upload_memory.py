"""Parallel junk uploads cost the server about their pieces in flight, and give it back.

Before, Twisted parsed every multipart body whole, in memory and in the event loop, for request
arguments daphne never reads, and daphne queued each whole body for the application in 8 KB
pieces: six parallel 69 MB uploads took the server to 2.0 GB and left 1.1 GB behind. Here three
of 15 MB are sent to the real server at once, its peak RSS reset just before them.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, running_server, server_pid

UPLOADS = 3
UPLOAD_MB = 15
# Bounds, with room for the allocator: the bodies together are 45 MB, and before the fix the
# same attack took the server about 12 times the body's size while it lasted.
PEAK_MARGIN_MB = 40
LEFT_MARGIN_MB = 16
UPLOAD = "mutation($file: Upload!) { uploadVideo(file: $file) { path } }"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    var_dir = tmp_path_factory.mktemp("upload-memory")
    with running_server(
        var_dir, port=free_port(), MAX_UPLOAD_MB="16", RATE_LIMIT_UPLOADS="1000/h"
    ) as url:
        yield url


def memory_mb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) // 1024
    raise AssertionError(f"no {field} for {pid}")


def upload(server: str, body: bytes) -> requests.Response:
    operations = json.dumps({"query": UPLOAD, "variables": {"file": None}})
    return requests.post(
        f"{server}/graphql",
        files={
            "operations": (None, operations),
            "map": (None, '{"0": ["variables.file"]}'),
            "0": ("junk.mp4", body, "video/mp4"),
        },
        timeout=60,
    )


def test_parallel_junk_uploads_cost_little_memory_and_leave_none(server: str) -> None:
    # given a server that has answered an upload once (its code and caches warm)
    pid = server_pid(server)
    junk = os.urandom(1024 * 1024) * UPLOAD_MB
    assert upload(server, b"not a video").status_code == 200
    before = memory_mb(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak (VmHWM) starts again from now

    # when junk uploads arrive at once
    with concurrent.futures.ThreadPoolExecutor(UPLOADS) as pool:
        answers = list(pool.map(lambda _: upload(server, junk), range(UPLOADS)))
    peak = memory_mb(pid, "VmHWM")
    after = memory_mb(pid, "VmRSS")

    # then each is refused as the junk it is, the server grew by less than the bodies' size
    # while they came, and went back to within a few MB of where it was
    assert [
        (answer.status_code, answer.json()["errors"][0]["extensions"]) for answer in answers
    ] == [(200, {"code": "UNSUPPORTED_MEDIA"})] * UPLOADS
    assert peak - before < PEAK_MARGIN_MB, (before, peak, after)
    assert after - before < LEFT_MARGIN_MB, (before, peak, after)
