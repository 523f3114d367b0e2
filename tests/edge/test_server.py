"""The project served by the real ASGI server, exactly as `make run` starts it."""

from __future__ import annotations

import socket

import requests

from edge import __version__
from tests.conftest import ROOT

VENDOR = ROOT / "vendor"

INTROSPECTION = "{ __schema { queryType { name } types { name } } }"


def test_healthz_over_http(asgi_server):
    response = requests.get(f"{asgi_server}/healthz", timeout=5)

    body = response.json()
    assert response.status_code == 200
    # a fresh VAR_DIR holds no checkpoint: classic answers, and says why
    assert body.pop("engine_chosen_because").startswith("no learned checkpoint in ")
    assert body == {
        "status": "ok",
        "version": __version__,
        "engine": "classic",
        "engine_model": "classic: no weights, CPU",
    }


def test_graphql_introspection_over_http(asgi_server):
    response = requests.post(f"{asgi_server}/graphql", json={"query": INTROSPECTION}, timeout=5)

    assert response.status_code == 200
    schema = response.json()["data"]["__schema"]
    assert schema["queryType"] == {"name": "Query"}
    names = {t["name"] for t in schema["types"]}
    assert {"Query", "Pong", "PingInput"} <= names


def test_graphiql_and_its_scripts_are_served(asgi_server):
    page = requests.get(f"{asgi_server}/graphql", headers={"Accept": "text/html"}, timeout=5)
    script = requests.get(f"{asgi_server}/static/vendor/graphiql/graphiql.min.js", timeout=5)

    assert page.status_code == 200
    assert "graphiql.min.js" in page.text
    assert script.status_code == 200
    assert script.headers["Content-Type"] == "text/javascript"
    assert script.content == (VENDOR / "graphiql" / "graphiql.min.js").read_bytes()


def test_admin_login_page_has_its_stylesheet(asgi_server):
    page = requests.get(f"{asgi_server}/admin/login/", timeout=5)
    css = requests.get(f"{asgi_server}/static/admin/css/base.css", timeout=5)

    assert page.status_code == 200
    assert css.status_code == 200


def raw_exchange(server: str, head: bytes) -> bytes:
    """Send ``head`` on a connection of its own and read until the server closes it."""
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(head)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def head_refusal(status: bytes, text: bytes) -> bytes:
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(text) + text
    )


def test_an_over_long_request_line_is_414(asgi_server):
    # Twisted dropped the connection without a word for a line over its 16384 bytes.
    answer = raw_exchange(
        asgi_server, b"GET /healthz?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    )

    assert answer == head_refusal(b"414 URI Too Long", b"the request line is over 16384 bytes\n")


def test_an_over_long_header_line_is_431(asgi_server):
    answer = raw_exchange(
        asgi_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nCookie: " + b"c" * 20_000 + b"\r\n\r\n"
    )

    assert answer == head_refusal(
        b"431 Request Header Fields Too Large",
        b"the request line and headers are over 16384 bytes together\n",
    )


def test_a_request_line_and_headers_over_the_limit_together_are_431(asgi_server):
    # Twisted answered this one "400 Bad Request", with no body to say why.
    answer = raw_exchange(
        asgi_server,
        b"GET /healthz?"
        + b"a" * 9_000
        + b" HTTP/1.1\r\nHost: x\r\nCookie: "
        + b"c" * 9_000
        + b"\r\n\r\n",
    )

    assert answer == head_refusal(
        b"431 Request Header Fields Too Large",
        b"the request line and headers are over 16384 bytes together\n",
    )


def test_a_request_line_within_the_limit_is_served(asgi_server):
    response = requests.get(f"{asgi_server}/healthz?pad={'a' * 16_000}", timeout=5)

    assert response.status_code == 200


def test_a_header_folded_over_5000_lines_is_431(asgi_server):
    # 20 KB of lines, which Twisted counted as 10 KB (without their line ends) and served
    folded = b"X-Folded: a\r\n" + b" b\r\n" * 5_000
    answer = raw_exchange(asgi_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + folded + b"\r\n")

    assert answer == head_refusal(
        b"431 Request Header Fields Too Large", b"the request has over 500 header lines\n"
    )


def test_folded_lines_count_with_their_line_ends_in_the_cap(asgi_server):
    # 420 lines of 39 bytes with their line ends: 16,380 bytes, where Twisted counted 15,540
    folded = b"X-Folded: a\r\n" + (b" " + b"b" * 36 + b"\r\n") * 420
    answer = raw_exchange(asgi_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + folded + b"\r\n")

    assert answer == head_refusal(
        b"431 Request Header Fields Too Large",
        b"the request line and headers are over 16384 bytes together\n",
    )


def test_over_500_header_lines_are_431(asgi_server):
    # Twisted answered this one "400 Bad Request", with no body to say why
    headers = b"".join(b"X-%d: 1\r\n" % n for n in range(500))
    answer = raw_exchange(asgi_server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")

    assert answer == head_refusal(
        b"431 Request Header Fields Too Large", b"the request has over 500 header lines\n"
    )


def test_500_header_lines_are_served(asgi_server):
    headers = b"".join(b"X-%d: 1\r\n" % n for n in range(499))
    answer = raw_exchange(
        asgi_server,
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        + headers[: -len(b"X-498: 1\r\n")]
        + b"\r\n",
    )

    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
