"""Request bodies over the cap are refused while they arrive: by the project's server (daphne
with a capped request class) and by the ASGI middleware that serves other servers."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
import requests

from edge.body_limit import FORM_OVERHEAD, DrainPace, RequestBodyLimit
from tests.conftest import running_server
from tests.timing import Clock

CAP = 1024 * 1024 + FORM_OVERHEAD  # MAX_UPLOAD_MB=1
REFUSAL = {
    "data": None,
    "errors": [
        {
            "message": "the upload is larger than the limit of 1 MB",
            "extensions": {"code": "UPLOAD_TOO_LARGE"},
        }
    ],
}
PING = json.dumps({"query": 'query { ping(input: {sessionId: "none"}) { success } }'}).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("body-limit-var"), MAX_UPLOAD_MB="1") as url:
        yield url


def connect(server: str) -> socket.socket:
    host, port = server.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(10)
    return sock


def read_response(sock: socket.socket) -> tuple[str, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in lines)}
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536)
    return status, headers, body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_a_declared_length_over_the_cap_is_answered_before_any_of_the_body(server: str) -> None:
    # given a client that declares 50 MB and waits for 100 Continue, as curl does
    with connect(server) as sock:
        sock.sendall(
            b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nOrigin: http://localhost:7262\r\n"
            b"Content-Type: application/json\r\nContent-Length: 50000000\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        # when it reads, without having sent a byte of the body
        status, headers, body = read_response(sock)

    # then the answer is the refusal (not 100 Continue), readable by the cross-origin page
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert json.loads(body) == REFUSAL
    assert headers["content-type"] == "application/json"
    assert headers["connection"] == "close"
    assert headers["access-control-allow-origin"] == "http://localhost:7262"
    assert headers["access-control-allow-credentials"] == "true"


def test_a_body_without_a_length_is_answered_once_it_passes_the_cap(server: str) -> None:
    piece = b"y" * 65536
    with connect(server) as sock:
        sock.sendall(
            b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        # when the body grows just past the cap, and the client goes on
        for _ in range(CAP // len(piece) + 1):
            sock.sendall(chunk(piece))
        status, headers, body = read_response(sock)
        # the server reads and drops the rest, and closes once the client has sent it all
        for _ in range(16):
            sock.sendall(chunk(piece))
        sock.sendall(b"0\r\n\r\n")
        rest = sock.recv(65536)

    assert (status, json.loads(body), rest) == (
        "HTTP/1.1 413 Request Entity Too Large",
        REFUSAL,
        b"",
    )
    # an origin-less request gets no CORS headers
    assert "access-control-allow-origin" not in headers


def test_a_client_that_sends_its_whole_body_first_still_reads_the_refusal(server: str) -> None:
    response = requests.post(
        f"{server}/graphql",
        data=b"z" * (5 * 1024 * 1024),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )

    assert (response.status_code, response.json()) == (413, REFUSAL)


def test_a_body_at_the_cap_reaches_the_application(server: str) -> None:
    body = PING + b" " * (CAP - len(PING))

    response = requests.post(
        f"{server}/graphql", data=body, headers={"Content-Type": "application/json"}, timeout=30
    )

    assert (response.status_code, response.json()) == (200, {"data": {"ping": {"success": False}}})


# The ASGI middleware, for servers that stream bodies to the application (uvicorn).


class Recorder:
    """An ASGI application that reads the whole body and answers 200 with its length."""

    def __init__(self) -> None:
        self.called = False

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        size, more = 0, True
        while more:
            message = await receive()
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


async def call(app, *, headers: list[tuple[bytes, bytes]], parts: list[bytes], path="/graphql"):
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    messages = [
        {"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
        for i, part in enumerate(parts)
    ]
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    return sent, len(messages)


async def test_middleware_refuses_a_declared_length_without_calling_the_application(
    settings,
) -> None:
    settings.MAX_UPLOAD_BYTES = 1024 * 1024
    inner = Recorder()

    sent, unread = await call(
        RequestBodyLimit(inner),
        headers=[(b"content-length", str(CAP + 1).encode()), (b"origin", b"http://localhost:1")],
        parts=[b"x"],
    )

    assert inner.called is False
    assert unread == 1
    assert sent[0]["status"] == 413
    assert (b"access-control-allow-origin", b"http://localhost:1") in sent[0]["headers"]
    assert json.loads(sent[1]["body"]) == REFUSAL


async def test_middleware_refuses_a_body_that_grows_past_the_cap(settings) -> None:
    settings.MAX_UPLOAD_BYTES = 1024 * 1024
    piece = b"y" * (256 * 1024)

    sent, unread = await call(RequestBodyLimit(Recorder()), headers=[], parts=[piece] * 8)

    # four pieces fill the upload limit, the fifth passes the cap and is the last one read
    assert unread == 3
    assert [m.get("status") for m in sent] == [413, None]
    assert json.loads(sent[1]["body"]) == REFUSAL


async def test_middleware_passes_a_body_under_the_cap(settings) -> None:
    settings.MAX_UPLOAD_BYTES = 1024 * 1024

    sent, unread = await call(RequestBodyLimit(Recorder()), headers=[], parts=[b"a" * 1000] * 3)

    assert (unread, sent[0]["status"], sent[1]["body"]) == (0, 200, b"3000")


async def test_the_admin_api_refusal_carries_no_cors_headers(settings) -> None:
    settings.MAX_UPLOAD_BYTES = 1024 * 1024

    sent, _ = await call(
        RequestBodyLimit(Recorder()),
        headers=[(b"content-length", str(CAP + 1).encode()), (b"origin", b"http://localhost:1")],
        parts=[b""],
        path="/api/admin/channel",
    )

    assert sent[0]["status"] == 413
    assert not [name for name, _ in sent[0]["headers"] if name.startswith(b"access-control")]


# The cap by path: the annotation endpoints take an annotation file (MAX_ANNOTATIONS_MB, 8), the
# rest the upload limit (MAX_UPLOAD_MB, 70, and the form's other fields).

ANNOTATION_ENDPOINTS = [
    "/annotations/coco.json",
    "/annotations/yolo.zip",
    "/annotations/masks.zip",
    "/sessions/abc123/annotations",
]


@pytest.fixture(scope="module")
def paced_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    var = tmp_path_factory.mktemp("body-limit-paced-var")
    with running_server(var, MAX_UPLOAD_MB="1", SERVER_REFUSED_DRAIN_MB="2") as url:
        yield url


def test_a_refused_body_is_drained_at_the_servers_pace(paced_server: str) -> None:
    # given a client that declares 16 MB, over the cap, and sends it all as fast as it can
    size = 16 * 2**20
    with connect(paced_server) as sock:
        sock.settimeout(30)
        began = time.monotonic()
        sock.sendall(
            b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % size + b" " * size
        )
        # when the last of it has left the client
        sent_after = time.monotonic() - began
        status, _, body = read_response(sock)

    # then the server read it at 2 MB a second (a quarter of a second's worth at once): all of
    # it but what the two sockets' buffers hold (up to about 10 MB here) took over 2 s to go, and
    # the refusal was answered (at once: it waited for the client to read it)
    assert sent_after > 2
    assert (status, json.loads(body)) == ("HTTP/1.1 413 Request Entity Too Large", REFUSAL)


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_server(tmp_path_factory.mktemp("body-limit-default-var")) as url:
        yield url


@pytest.mark.parametrize("path", ANNOTATION_ENDPOINTS)
def test_an_annotation_endpoint_refuses_70_mb_at_the_head(default_server: str, path: str) -> None:
    # given a client that declares 70 MB (under the upload limit) and sends none of it
    with connect(default_server) as sock:
        sock.sendall(
            b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), 70 * 2**20)
        )
        # when it reads
        status, headers, body = read_response(sock)

    # then the refusal is the segmentation views' own, before a byte of the body
    assert status == "HTTP/1.1 413 Request Entity Too Large"
    assert json.loads(body) == {
        "error": "the annotation file is 70.0 MB, over the limit of 8.0 MB (MAX_ANNOTATIONS_MB)",
        "code": "UPLOAD_TOO_LARGE",
    }
    assert headers["connection"] == "close"


def test_an_annotation_body_without_a_length_is_cut_past_its_cap(default_server: str) -> None:
    piece = b" " * 65536
    with connect(default_server) as sock:
        sock.sendall(
            b"POST /annotations/coco.json HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(8 * 2**20 // len(piece) + 1):  # just past 8 MB
            sock.sendall(chunk(piece))
        status, _, body = read_response(sock)

    assert (status, json.loads(body)["code"]) == (
        "HTTP/1.1 413 Request Entity Too Large",
        "UPLOAD_TOO_LARGE",
    )


def test_an_annotation_file_at_its_cap_reaches_the_view(default_server: str) -> None:
    # given exactly 8 MB: an empty object padded with spaces
    body = b"{}" + b" " * (8 * 2**20 - 2)

    response = requests.post(
        f"{default_server}/annotations/coco.json",
        data=body,
        headers={"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.40"},
        timeout=60,
    )

    # then the view read and checked it (no annotation file), rather than the server refusing it
    assert response.status_code == 400
    assert response.json()["code"] == "BAD_USER_INPUT"


def test_an_upload_over_the_annotation_cap_is_still_let_in(default_server: str) -> None:
    # given a GraphQL upload declaring 69 MB, within MAX_UPLOAD_MB, that waits for 100 Continue
    with connect(default_server) as sock:
        sock.sendall(
            b"POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (69 * 2**20)
        )
        answer = sock.recv(65536)

    # then the server asks for the body
    assert answer.startswith(b"HTTP/1.1 100 Continue\r\n")


async def test_middleware_caps_an_annotation_endpoint_at_the_annotation_limit(settings) -> None:
    settings.MAX_UPLOAD_BYTES = 1024 * 1024
    settings.MAX_ANNOTATIONS_BYTES = 1000
    inner = Recorder()

    sent, _ = await call(
        RequestBodyLimit(inner),
        headers=[(b"content-length", b"1001")],
        parts=[b"x"],
        path="/sessions/abc123/annotations",
    )

    assert inner.called is False
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"]) == {
        "error": "the annotation file is 0.0 MB, over the limit of 0.0 MB (MAX_ANNOTATIONS_MB)",
        "code": "UPLOAD_TOO_LARGE",
    }


def test_the_drain_pace_lets_a_burst_through_then_pauses_by_the_bytes_ahead() -> None:
    clock = Clock()
    pace = DrainPace(rate=1000, burst=0.25, least_pause=0.1, clock=clock)

    # a quarter of a second's worth passes, and what is less than 0.1 s ahead too
    assert [pace.take(100) for _ in range(3)] == [0.0, 0.0, 0.0]
    # then each read waits until the time its bytes are worth has passed
    assert pace.take(100) == pytest.approx(0.15)
    assert pace.take(200) == pytest.approx(0.35)
    # an idle while lets a burst through again, and no more
    clock.now += 10
    assert pace.take(250) == 0.0
    assert pace.take(150) == pytest.approx(0.15)
