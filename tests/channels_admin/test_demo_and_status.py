"""A newcomer's first run: the default playlist's demo channel, played through the hub, with
the status feed pushing each change. Real server, real WebSocket, real decoding."""

from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import av
import pytest
import websockets

from tests.conftest import free_port, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    port = free_port()
    with running_server(
        tmp_path_factory.mktemp("demo-var"), port=port, SERVER_URL=f"http://127.0.0.1:{port}"
    ) as base_url:
        yield base_url


def status_feed(server: str):
    """The WebSocket a page served by ``server`` opens (browsers always send their Origin)."""
    return websockets.connect(server.replace("http", "ws") + "/ws/tv/status", origin=server)


async def read_bytes(
    client: aiohttp.ClientSession, url: str, size: int
) -> tuple[aiohttp.ClientResponse, bytes]:
    data = bytearray()
    async with client.get(url) as response:
        async for chunk in response.content.iter_any():
            data += chunk
            if len(data) >= size:
                break
    return response, bytes(data)


def session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20))


def decode_video(data: bytes) -> list[av.VideoFrame]:
    frames = []
    with av.open(io.BytesIO(data), format="mpegts") as container:
        try:
            for packet in container.demux(video=0):
                frames.extend(packet.decode())
        except av.error.InvalidDataError:
            pass  # the capture ends mid-packet
    return frames


async def test_demo_channel_is_live_h264(server):
    async with session() as client:
        response, data = await read_bytes(client, f"{server}/tv/demo/1.ts", 120_000)

    assert response.status == 200
    assert response.headers["content-type"] == "video/mp2t"
    frames = decode_video(data)
    assert len(frames) >= 10
    assert (frames[0].width, frames[0].height) == (640, 360)


async def test_default_playlist_plays_the_demo_channel_through_the_hub(server):
    async with status_feed(server) as feed:
        first = json.loads(await asyncio.wait_for(feed.recv(), 5))
        async with session() as client:
            async with client.get(f"{server}/api/admin/channels") as listed:
                channels = await listed.json()
            async with client.post(
                f"{server}/api/admin/channel", json={"channel_id": "demo.2"}
            ) as answer:
                selected = await answer.json()
            pushed = [json.loads(await asyncio.wait_for(feed.recv(), 5)) for _ in range(2)]
            response, data = await read_bytes(client, f"{server}/ts", 150_000)

    assert first["live"] is False
    assert [c["id"] for c in channels] == ["demo.1", "demo.2"]
    assert selected == {"status": "ok", "channel": "Test pattern 2"}
    assert pushed[0]["channel_name"] == "Test pattern 2"
    assert pushed[0]["transitioning"] is True
    assert pushed[1]["transitioning"] is False  # the first bytes arrived
    # (the switch's outcome is written at its next check, 0.2 s at the most after the bytes)
    assert pushed[1]["switch_message"] in {
        "Switching to Test pattern 2…",
        "Now playing Test pattern 2",
    }
    assert pushed[1] | {"viewers": 0, "switch_message": ""} == {
        "channel_name": "Test pattern 2",
        "channel_logo": "",
        "channel_group": "Demo",
        "channel_number": "2",
        "live": True,
        "transitioning": False,
        "upstream_down": False,
        "upstream_info": "",
        "playlist_version": 1,
        "source": "primary",
        "sources": 1,
        "reconnecting": False,
        "stream_serial": 0,
        "stream_format": "",
        "switch_message": "",
        "switch_returned": False,
        "now": None,
        "next": None,
        "viewers": 0,
        "hls_viewers": 0,
        "refusing_viewers": False,
        "viewers_refused": 0,
        "viewers_shed": 0,
    }
    assert response.status == 200
    assert len(decode_video(data)) >= 10


async def test_status_feed_is_read_only_and_answers_refresh(server):
    async with status_feed(server) as feed:
        await asyncio.wait_for(feed.recv(), 5)
        await feed.send(json.dumps({"type": "select", "channel_id": "demo.1"}))
        await feed.send(json.dumps({"type": "refresh"}))
        answer = json.loads(await asyncio.wait_for(feed.recv(), 5))

    assert set(answer) == {
        "channel_name",
        "channel_logo",
        "channel_group",
        "channel_number",
        "live",
        "transitioning",
        "upstream_down",
        "upstream_info",
        "playlist_version",
        "source",
        "sources",
        "reconnecting",
        "stream_serial",
        "stream_format",
        "switch_message",
        "switch_returned",
        "now",
        "next",
        "viewers",
        "hls_viewers",
        "refusing_viewers",
        "viewers_refused",
        "viewers_shed",
    }
    assert "current_stream_url" not in answer
