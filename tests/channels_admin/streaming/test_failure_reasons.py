"""Why a source failed, as the status tells it: a sentence a person reads for each kind of
failure, never aiohttp's words (nor the URL they may hold), which go to the server's log. The
hub against a real loopback server that misbehaves in each way."""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading

import aiohttp
import pytest

from channels_admin.streaming.failure_reasons import failure_detail, failure_reason
from channels_admin.streaming.hub_events import HubEvent
from channels_admin.streaming.sources import Upstream
from tests.channels_admin.streaming.test_failover import Recorder, hub_for, until

# What each path answers, written raw: these are not answers a well-behaved server gives.
ANSWERS = {
    # the issue's: a chunk announced, the connection closed before its end
    "/broken.ts": b"HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nTransfer-Encoding: chunked\r\n"
    b"\r\n1000\r\n" + b"\x47" * 100,
    "/loop.ts": b"HTTP/1.1 302 Found\r\nLocation: /loop.ts\r\nContent-Length: 0\r\n"
    b"Connection: close\r\n\r\n",
    "/hang-up.ts": b"",
    "/garbage.ts": b"THIS IS NOT HTTP\r\n\r\n",
}


class RawServer:
    """Loopback HTTP answered from :data:`ANSWERS`, then the connection closed."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://user:secret@127.0.0.1:{self._socket.getsockname()[1]}{path}"

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._socket.accept()
                with connection:
                    request = connection.recv(65536).decode("latin-1")
                    connection.sendall(ANSWERS[request.split()[1]])

    def close(self) -> None:
        self._socket.close()


@pytest.fixture
def raw():
    server = RawServer()
    yield server
    server.close()


@pytest.mark.parametrize(
    ("path", "reason", "logged"),
    [
        (
            "/broken.ts",
            "the upstream broke off in the middle of its answer",
            "ClientPayloadError: Response payload is not completed: <TransferEncodingError",
        ),
        ("/loop.ts", "the upstream redirected too many times", "TooManyRedirects"),
        (
            "/hang-up.ts",
            "the upstream closed the connection without an answer",
            "ServerDisconnectedError",
        ),
        ("/garbage.ts", "the upstream's answer is not valid HTTP", "Bad status line"),
    ],
)
async def test_each_kind_of_failure_is_told_in_a_sentence_and_logged_in_detail(
    raw, caplog, path, reason, logged
):
    recorder = Recorder()
    hub = hub_for(recorder)

    with caplog.at_level(logging.INFO, logger="channels_admin.streaming.hub"):
        await hub.switch([Upstream(raw.url(path))])
        await until(lambda: recorder.seen(), what="the failure")
        await hub.close()

    assert recorder.seen()[0] == (HubEvent.MISSED, "primary", reason)
    assert logged in caplog.text
    assert "secret" not in reason


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            aiohttp.ClientConnectorCertificateError(
                aiohttp.client_reqrep.ConnectionKey(
                    "example.org", 443, True, True, None, None, None
                ),
                ssl.SSLCertVerificationError("certificate has expired"),
            ),
            "the upstream's TLS certificate is not trusted",
        ),
        (
            aiohttp.InvalidURL("http://user:secret@[::1"),
            "the source's address is not a valid http(s) URL",
        ),
        (
            aiohttp.ClientOSError(104, "Connection reset by peer"),
            "connection reset by peer",
        ),
        (
            ValueError("http://user:secret@example.org: a bug"),
            "an unexpected error (the server's log has its details)",
        ),
    ],
)
def test_failures_that_a_loopback_server_cannot_cause_have_their_sentences_too(error, reason):
    assert failure_reason(error) == reason


def test_the_detail_for_the_log_names_each_cause():
    try:
        try:
            raise ConnectionResetError(104, "Connection reset by peer")
        except OSError as cause:
            raise aiohttp.ClientPayloadError("Response payload is not completed") from cause
    except aiohttp.ClientPayloadError as error:
        detail = failure_detail(error)

    assert detail == (
        "ClientPayloadError: Response payload is not completed;"
        " from ConnectionResetError: [Errno 104] Connection reset by peer"
    )
