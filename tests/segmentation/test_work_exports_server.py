"""The streamed exports of a session's stored work against the real server: a client that hangs
up mid-download has the export's process killed, and the server goes idle."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import requests

from segmentation.rle import rle_encode
from tests.conftest import free_port, running_server, server_pid
from tests.segmentation.test_annotation_work_limits import (
    HEIGHT,
    VIDEO,
    WIDTH,
    children,
    cpu_seconds,
    wait_stopped,
)

START = f'mutation {{ startSession(input: {{path: "{VIDEO}"}}) {{ sessionId }} }}'


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    with running_server(
        default_video_var, port=free_port(), log_name="work-exports.log", RATE_LIMIT_COST="0"
    ) as base_url:
        yield base_url


def kept_session(server: str, var_dir: Path) -> str:
    """A session that keeps its work (opened by a browser's cookie session), whose work is 144
    frames of masks of isolated pixels (a quarter of a second each to trace for YOLO), written
    into the server's database directly."""
    browser = requests.Session()
    browser.get(f"{server}/annotate/", timeout=30)
    answer = browser.post(
        f"{server}/graphql", json={"query": START}, headers={"X-Keep-Work": "1"}, timeout=60
    )
    session_id = answer.json()["data"]["startSession"]["sessionId"]
    assert requests.get(f"{server}/sessions/{session_id}/engine", timeout=10).json()["keeps_work"]
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[::2, ::2] = True
    counts = rle_encode(mask)["counts"]
    with sqlite3.connect(var_dir / "db.sqlite3") as database:
        (work_id,) = database.execute("SELECT max(id) FROM segmentation_work").fetchone()
        database.executemany(
            "INSERT INTO segmentation_workmask (work_id, frame_index, object_id, counts) "
            "VALUES (?, ?, 1, ?)",
            [(work_id, index, counts) for index in range(144)],
        )
    return session_id


def test_a_client_that_hangs_up_mid_download_stops_the_export_and_its_process(
    server, default_video_var: Path
):
    # given a session's stored work of 36 s of YOLO tracing
    session_id = kept_session(server, default_video_var)
    path = f"/annotations/{session_id}/yolo.zip"
    pid = server_pid(server)
    idle = {child: cpu_seconds(child) for child in children(pid)}
    address = urlsplit(server)

    with socket.create_connection((address.hostname, address.port)) as connection:
        connection.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        # when the download has begun, in an export process of its own
        head = connection.recv(4096)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
        deadline = time.monotonic() + 20
        while not (busy := [c for c in children(pid) if cpu_seconds(c) - idle.get(c, 0) > 0.2]):
            assert time.monotonic() < deadline, "no child of the server took up the export"
            time.sleep(0.05)
        (worker,) = busy
        # and the client hangs up mid-download

    # then the server says the export stopped, its process is killed and reaped
    wait_stopped(default_video_var / "work-exports.log", path, within=10)
    deadline = time.monotonic() + 10
    while worker in children(pid):
        assert time.monotonic() < deadline, "the export's process outlived its client"
        time.sleep(0.05)
    # and nothing of the server works on
    before = cpu_seconds(pid)
    time.sleep(2)
    assert cpu_seconds(pid) - before < 0.5
