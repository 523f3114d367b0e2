"""The hub on two server processes through a real Redis: ONE upstream connection between them,
viewers on both, counted together, and a take-over when the owner of the upstream dies."""

from __future__ import annotations

import os
import signal
import uuid

import pytest
import redis

from loopback_fakes.hls_origin import FRAMES_PER_SEGMENT, HlsOrigin
from loopback_fakes.ts_upstream import PACKET, TsUpstream
from tests.channels_admin.stream_client import frames_of, runs, select, status, wait_until, watch
from tests.channels_admin.test_stream_server import Viewer, playlist_for, sequences
from tests.conftest import free_port, running_server, server_pid
from tests.system.test_scale_out import REDIS_URL, needs_redis

LOCK_SEC = 1


@pytest.fixture
def upstream():
    server = TsUpstream(bitrate_bps=2_000_000)
    yield server
    server.close()


@pytest.fixture
def origin(tmp_path):
    server = HlsOrigin(tmp_path / "origin")
    yield server
    server.close()


@needs_redis
def test_two_processes_share_one_upstream_and_one_takes_over_when_the_owner_dies(
    tmp_path, upstream, origin
):
    playlist = tmp_path / "channels.m3u"
    hls = f'#EXTINF:-1 tvg-id="h",HLS\n{origin.url("/ts/live.m3u8")}\n'
    playlist.write_text(playlist_for(upstream) + hls, encoding="utf-8")
    prefix = f"test-hub-{uuid.uuid4().hex[:8]}"
    env = {
        "CHANNELS_PLAYLIST_PATH": str(playlist),
        "REDIS_URL": REDIS_URL,
        "CHANNELS_RELAY_PREFIX": prefix,
        "CHANNELS_RELAY_LOCK_SEC": str(LOCK_SEC),
    }
    keys = redis.Redis.from_url(REDIS_URL)
    with (
        running_server(tmp_path, port=free_port(), log_name="one.log", **env) as one,
        running_server(tmp_path, port=free_port(), log_name="two.log", **env) as two,
    ):
        status(two)  # its hub exists and listens for switches

        # an HLS channel: read by the owner alone, and each process starts its viewers at a
        # key frame from its own GOP cache
        origin.restart()
        select(one, "h")
        wait_until(lambda: status(two)["upstream_info"], what="HLS playing")
        for server in (one, two, two):
            data = watch(server, 1.0)  # joins mid-segment
            assert (data[1] & 0x1F) << 8 | data[2] == 0  # the PAT first
            (first, last), *rest = runs(frames_of(data))
            assert rest == []
            assert first % FRAMES_PER_SEGMENT == 0
            assert last - first >= FRAMES_PER_SEGMENT
        segments = origin.fetched(".ts")
        assert len(segments) == len(set(segments))  # none twice
        assert origin.max_open_connections == 1
        assert origin.max_in_flight == 1

        select(one, "a")
        viewers = {one: Viewer(one, want=10**9), two: Viewer(two, want=10**9)}
        second_on_two = Viewer(two, want=10**9)
        wait_until(
            lambda: all(len(v.data) > 300 * PACKET for v in viewers.values()), what="bytes on both"
        )

        # one upstream connection for both processes, the same packets on both
        assert len(upstream.connections) == 1
        assert len(upstream.open_connections) == 1
        packet_runs = {server: sequences(bytes(v.data)) for server, v in viewers.items()}
        for run in packet_runs.values():
            assert run == list(range(run[0], run[0] + len(run)))
        assert status(one)["channel_name"] == status(two)["channel_name"] == "Channel A"
        assert status(one)["viewers"] == status(two)["viewers"] == 3

        # the owner dies; the other process takes the upstream over
        owner_pid = int(keys.get(f"{prefix}:owner").decode().split(":")[1])
        survivor = next(s for s in (one, two) if server_pid(s) != owner_pid)
        os.kill(owner_pid, signal.SIGKILL)
        fed = len(viewers[survivor].data)
        wait_until(
            lambda: len(viewers[survivor].data) > fed + 300 * PACKET,
            timeout=LOCK_SEC * 10,
            what="bytes after the take-over",
        )

        assert len(upstream.connections) == 2
        assert len(upstream.open_connections) == 1
        assert max(c.overlapping for c in upstream.connections) == 0
        assert viewers[survivor].ended is False
        assert int(keys.get(f"{prefix}:owner").decode().split(":")[1]) == server_pid(survivor)
        # the dead process's viewers are no longer counted once its report runs out
        survivors_viewers = 1 if survivor == one else 2
        wait_until(
            lambda: status(survivor)["viewers"] == survivors_viewers,
            timeout=LOCK_SEC * 5,
            what="the dead process's viewers forgotten",
        )
        viewers[survivor].close()
        second_on_two.close()
    # the survivor stopped cleanly, giving its key and its count back; the dead one's count was
    # forgotten; the stream of chunks runs out with nobody appending to it
    assert keys.smembers(f"{prefix}:viewers") == set()
    assert keys.keys(f"{prefix}:*") in ([], [f"{prefix}:ts".encode()])
    wait_until(lambda: keys.keys(f"{prefix}:*") == [], timeout=LOCK_SEC * 3, what="keys gone")
