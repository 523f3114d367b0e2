"""The layout of docs/deploy.md, for real: nginx in front of a web process and a segmentation
process that share a database. Every segmentation operation reaches the process that holds the
session; the channel pages, API and /ts reach the web process."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import free_port, running_server

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
ADD = """mutation($s: String!) {
  addPoints(input: {sessionId: $s, frameIndex: 0, objectId: 1, clearOldPoints: true,
                    labels: [1], points: [[0.3, 0.45]]}) { frameIndex }
}"""
PING = "query($s: String!) { ping(input: {sessionId: $s}) { success } }"

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
    upstream web {{ server 127.0.0.1:{web}; }}
    upstream segmentation {{ server 127.0.0.1:{segmentation}; }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 71m;
        proxy_set_header Host $host;
        location = /ts {{
            proxy_pass http://web; proxy_http_version 1.1; proxy_buffering off;
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


def gql(server: str, query: str, **variables: object) -> dict:
    payload = {"query": query, "variables": variables}
    return requests.post(f"{server}/graphql", json=payload, timeout=30).json()


def test_the_documented_layout_routes_each_request_to_its_process(nginx_binary, tmp_path):
    web_port, segmentation_port, port = free_port(), free_port(), free_port()
    env = {"SERVER_URL": f"http://127.0.0.1:{web_port}"}  # the demo channels come from web
    work = tmp_path / "nginx"
    work.mkdir()
    config = work / "nginx.conf"
    config.write_text(
        CONFIG.format(work=work, web=web_port, segmentation=segmentation_port, port=port)
    )
    with (
        running_server(tmp_path, port=web_port, log_name="web.log", **env) as web,
        running_server(tmp_path, port=segmentation_port, log_name="seg.log", **env) as segmentation,
    ):
        proxy = subprocess.Popen([nginx_binary, "-c", str(config), "-p", str(work)])
        try:
            front = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 10
            while True:
                try:
                    requests.get(f"{front}/healthz", timeout=1)
                    break
                except requests.ConnectionError:
                    assert time.monotonic() < deadline, (work / "error.log").read_text()
                    time.sleep(0.1)

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

            # channels, through the front
            selected = requests.post(
                f"{front}/api/admin/channel", json={"channel_id": "demo.1"}, timeout=10
            )
            with requests.get(f"{front}/ts", stream=True, timeout=30) as ts:
                first = next(ts.iter_content(chunk_size=188 * 100))

            assert clicked == {"data": {"addPoints": {"frameIndex": 0}}}
            assert parts == 144
            assert selected.status_code == 200
            assert first[0] == 0x47
            # the session lives in the segmentation process only: the routing is what finds it
            assert gql(segmentation, PING, s=session_id) == {"data": {"ping": {"success": True}}}
            assert gql(web, PING, s=session_id) == {"data": {"ping": {"success": False}}}
            # and the status is shared through the database
            assert (
                requests.get(f"{segmentation}/api/admin/status", timeout=10).json()["channel_name"]
                == "Test pattern 1"
            )
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
