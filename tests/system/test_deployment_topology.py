"""The layout of docs/deploy.md, for real: nginx in front of two web processes and a
segmentation process that share a database and Redis. Every segmentation operation reaches the
process that holds the session; the channel pages, API and /ts reach the web processes, in turn
(a /ts viewer that one refuses goes to the next), and the upstream sees ONE connection between
them. The channel admin API answers through the front only to its token: every request nginx
forwards carries its proxy headers, so none passes for one made on the server's own machine."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
import requests

from loopback_fakes.ts_upstream import PACKET, TsUpstream
from tests.channels_admin.test_stream_server import Viewer, playlist_for, wait_until
from tests.conftest import free_port, running_server
from tests.system.test_scale_out import REDIS_URL, needs_redis

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
ADD = """mutation($s: String!) {
  addPoints(input: {sessionId: $s, frameIndex: 0, objectId: 1, clearOldPoints: true,
                    labels: [1], points: [[0.3, 0.45]]}) { frameIndex }
}"""
PING = "query($s: String!) { ping(input: {sessionId: $s}) { success } }"
TOKEN = "layout-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}

CONFIG = """
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log;
worker_processes 1;
events {{}}
http {{
    access_log off;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    upstream web {{ server 127.0.0.1:{web}; server 127.0.0.1:{web_2}; }}
    upstream segmentation {{ server 127.0.0.1:{segmentation}; }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 71m;
        proxy_set_header Host $host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-Proto $scheme;
        location = /ts {{
            proxy_pass http://web; proxy_http_version 1.1; proxy_buffering off;
            proxy_next_upstream error timeout http_503;
        }}
        location ~ ^/(tv|api|admin)/ {{ proxy_pass http://web; }}
        location = /propagate_in_video {{
            proxy_pass http://segmentation; proxy_http_version 1.1; proxy_buffering off;
        }}
        location / {{ proxy_pass http://segmentation; proxy_request_buffering off; }}
    }}
}}
"""


@pytest.fixture
def nginx_binary() -> str:
    if not Path(NGINX).exists():
        pytest.skip(f"nginx is not installed at {NGINX} (.ci/run installs it with apt)")
    return NGINX


def nginx_started(stack: contextlib.ExitStack, binary: str, work: Path, port: int) -> str:
    """Run nginx with ``work/nginx.conf`` until ``stack`` closes; the front's base URL."""
    proxy = subprocess.Popen([binary, "-c", str(work / "nginx.conf"), "-p", str(work)])
    stack.callback(proxy.wait, timeout=10)
    stack.callback(proxy.terminate)
    front = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            requests.get(f"{front}/healthz", timeout=1)
            return front
        except requests.ConnectionError:
            assert time.monotonic() < deadline, (work / "error.log").read_text()
            time.sleep(0.1)


def gql(server: str, query: str, **variables: object) -> dict:
    payload = {"query": query, "variables": variables}
    return requests.post(f"{server}/graphql", json=payload, timeout=30).json()


@needs_redis
def test_the_documented_layout_routes_each_request_to_its_process(
    nginx_binary, default_video_var, tmp_path
):
    # the processes share a var folder holding the default video (drawn once for the run)
    var = default_video_var
    upstream = TsUpstream(bitrate_bps=2_000_000)
    playlist = tmp_path / "channels.m3u"
    playlist.write_text(playlist_for(upstream), encoding="utf-8")
    env = {
        "CHANNELS_PLAYLIST_PATH": str(playlist),
        "REDIS_URL": REDIS_URL,
        "CHANNELS_RELAY_PREFIX": f"test-layout-{uuid.uuid4().hex[:8]}",
        "CHANNELS_ADMIN_TOKEN": TOKEN,
    }
    ports = {name: free_port() for name in ("web", "web_2", "segmentation", "port")}
    work = tmp_path / "nginx"
    work.mkdir()
    config = work / "nginx.conf"
    config.write_text(CONFIG.format(work=work, **ports))
    with contextlib.ExitStack() as stack:
        stack.callback(upstream.close)
        # one web process carries one viewer at most: nginx takes the next its 503 refuses
        caps = {"web": {"CHANNELS_MAX_VIEWERS": "1"}}
        web, web_2, segmentation = (
            stack.enter_context(
                running_server(
                    var,
                    port=ports[name],
                    log_name=f"{name}.log",
                    **env,
                    **caps.get(name, {}),
                )
            )
            for name in ("web", "web_2", "segmentation")
        )
        front = nginx_started(stack, nginx_binary, work, ports["port"])

        # segmentation, through the front
        path = gql(front, "{ defaultVideo { path } }")["data"]["defaultVideo"]["path"]
        session_id = gql(front, START, p=path)["data"]["startSession"]["sessionId"]
        clicked = gql(front, ADD, s=session_id)
        with requests.post(
            f"{front}/propagate_in_video",
            json={"session_id": session_id},
            stream=True,
            timeout=60,
        ) as stream:
            parts = b"".join(stream.iter_content(chunk_size=None)).count(b"--frame\r\n")

        # channels, through the front: the web processes take the requests in turn
        # the admin API, through the front: the token, and nothing else, lets a request in
        refused = requests.post(
            f"{front}/api/admin/channel",
            json={"channel_id": "a"},
            headers={"X-Forwarded-For": "127.0.0.1"},
            timeout=10,
        )
        selected = requests.post(
            f"{front}/api/admin/channel", json={"channel_id": "a"}, headers=ADMIN, timeout=10
        )
        viewers = [Viewer(front, want=10**9) for _ in range(4)]
        stack.callback(lambda: [viewer.close() for viewer in viewers])
        wait_until(
            lambda: all(len(viewer.data) > 100 * PACKET for viewer in viewers),
            what="bytes for every viewer",
        )
        per_process = _viewers_per_process(env["CHANNELS_RELAY_PREFIX"])
        statuses = [
            requests.get(f"{server}/api/admin/status", headers=ADMIN, timeout=10).json()
            for server in (front, front, web, web_2, segmentation)
        ]

        assert clicked == {"data": {"addPoints": {"frameIndex": 0}}}
        assert parts == 144
        assert (refused.status_code, refused.text) == (401, "authentication required")
        assert selected.status_code == 200
        assert all(viewer.data[0] == 0x47 for viewer in viewers)
        # both web processes serve viewers, the capped one one of them: the viewer it refused
        # went to the other and never saw the refusal; the upstream saw one connection
        assert sorted(per_process.values()) == [1, 3]
        assert statuses[2]["viewers_refused"] == 1
        assert len(upstream.connections) == 1
        # the session lives in the segmentation process only: the routing is what finds it
        assert gql(segmentation, PING, s=session_id) == {"data": {"ping": {"success": True}}}
        assert gql(web, PING, s=session_id) == {"data": {"ping": {"success": False}}}
        # every process gives the same status: the channel from the database, the viewers
        # from Redis
        assert {(status["channel_name"], status["viewers"]) for status in statuses} == {
            ("Channel A", 4)
        }


def test_without_a_token_the_admin_api_answers_no_request_through_the_front(nginx_binary, tmp_path):
    # given one server on loopback with no admin token, behind nginx on the same machine
    ports = {name: free_port() for name in ("web", "port")}
    work = tmp_path / "nginx"
    work.mkdir()
    (work / "nginx.conf").write_text(
        CONFIG.format(work=work, web_2=ports["web"], segmentation=ports["web"], **ports)
    )
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(running_server(tmp_path, port=ports["web"]))
        front = nginx_started(stack, nginx_binary, work, ports["port"])

        # when a client sends what a curl through the front would, with and without a forged
        # address
        answers = [
            requests.post(
                f"{front}/api/admin/channel",
                json={"channel_id": "demo.1"},
                headers=headers,
                timeout=10,
            )
            for headers in ({}, {"X-Forwarded-For": "203.0.113.9"}, {"X-Forwarded-For": ""})
        ]
        listed = requests.get(f"{front}/api/admin/channels", timeout=10)
        reload = requests.post(f"{front}/api/admin/playlist/reload", timeout=10)
        status = requests.get(f"{server}/api/admin/status", timeout=10).json()

    # then every one is refused, and the channel is the one it was
    refusal = (401, "authentication required")
    assert [(answer.status_code, answer.text) for answer in answers] == [refusal] * 3
    assert (listed.status_code, listed.text) == refusal
    assert (reload.status_code, reload.text) == refusal
    # the same machine, not through the proxy, is still admitted
    assert status["channel_name"] == ""


def _viewers_per_process(prefix: str) -> dict[str, int]:
    """The viewer counts the processes reported to Redis, by process."""
    keys = redis.Redis.from_url(REDIS_URL)
    identities = [identity.decode() for identity in keys.smembers(f"{prefix}:viewers")]
    return {identity: int(keys.get(f"{prefix}:viewers:{identity}")) for identity in identities}
