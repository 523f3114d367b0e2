"""What the stream tests do as a client of the real server: pick a channel, read the status,
watch /ts and decode what came."""

from __future__ import annotations

import contextlib
import io
import time

import av
import requests

from loopback_fakes.hls_origin import frame_index


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


def watch(server: str, seconds: float) -> bytes:
    """What a viewer of /ts receives in ``seconds`` (less when nothing comes for 2 s)."""
    data = bytearray()
    deadline = time.monotonic() + seconds
    with requests.get(f"{server}/ts", stream=True, timeout=(5, 2)) as response:
        assert response.status_code == 200
        with contextlib.suppress(requests.ConnectionError):  # a read timed out: all is here
            for chunk in response.iter_content(65536):
                data += chunk
                if time.monotonic() > deadline:
                    break
    return bytes(data)


def frames_of(data: bytes) -> list[int]:
    """The indices of the frames that the received TS decodes to, in order."""
    with av.open(io.BytesIO(data), format="mpegts") as container:
        return [frame_index(f.to_ndarray(format="gray")) for f in container.decode(video=0)]


def runs(indices: list[int]) -> list[tuple[int, int]]:
    """``indices`` as runs of consecutive numbers, (first, last) each."""
    result: list[tuple[int, int]] = []
    for index in indices:
        if result and index == result[-1][1] + 1:
            result[-1] = (result[-1][0], index)
        else:
            result.append((index, index))
    return result
