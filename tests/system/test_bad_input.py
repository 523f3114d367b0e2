"""Bad input is a 4xx with the documented body, never a 500 (issue 36, hostile clients).

Each attack is sent to the real server. Before the fixes, each was a 500 and wrote a traceback
to the server's log (131 KB of it for the 110 bytes of a fragment cycle); now each is answered
as the endpoint answers any bad request, and logged in one line at most beside the access
log's.
"""

from __future__ import annotations

import http.client
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import running_server

DEEP_JSON = "[" * 50_000 + "]" * 50_000
CYCLE = "query { ...A } fragment A on Query { ...B } fragment B on Query { ...A }"
NOT_FOUND_PAGE = (
    '\n<!doctype html>\n<html lang="en">\n<head>\n  <title>Not Found</title>\n</head>\n<body>\n'
    "  <h1>Not Found</h1><p>The requested resource was not found on this server.</p>\n"
    "</body>\n</html>\n"
)
LOG_WAIT_SEC = 5
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
ACCESS = re.compile(r'^127\.0\.0\.1:\d+ - - \[[^]]+\] (".*)$')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    var_dir = tmp_path_factory.mktemp("bad-input")
    with running_server(var_dir) as base_url:
        yield base_url, var_dir / "daphne.log"


def logged(log: Path, send: Callable[[], Any]) -> tuple[Any, list[str]]:
    """The answer to ``send()``, and the lines the server logged for it (without timestamps and
    ports), once its access log line is in."""
    start = log.stat().st_size
    response = send()
    deadline = time.monotonic() + LOG_WAIT_SEC
    while True:
        with log.open("rb") as file:
            file.seek(start)
            lines = file.read().decode(errors="replace").splitlines()
        if any(ACCESS.match(line) for line in lines) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return response, [_plain(line) for line in lines]


def _plain(line: str) -> str:
    access = ACCESS.match(line)
    return f"access {access.group(1)}" if access else TIMESTAMP.sub("", line)


def post_json(base_url: str, path: str, body: str) -> Callable[[], requests.Response]:
    return lambda: requests.post(
        f"{base_url}{path}",
        data=body.encode(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )


def test_a_fragment_cycle_is_an_invalid_document(server):
    base_url, log = server

    response, lines = logged(
        log,
        lambda: requests.post(f"{base_url}/graphql", json={"query": CYCLE}, timeout=30),
    )

    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "message": "Cannot spread fragment 'A' within itself via 'B'.",
                "locations": [{"line": 1, "column": 38}, {"line": 1, "column": 67}],
            }
        ]
    }
    assert lines == [
        "WARNING django.request: Bad Request: /graphql",
        f'access "POST /graphql" 400 {len(response.content)}',
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"query": 5}, "the query must be a string"),
        ({"query": ["{ __typename }"]}, "the query must be a string"),
        (
            {"query": "{ __typename }", "operationName": 5},
            "operationName must be a string or null",
        ),
        (
            {"query": "{ __typename }", "variables": [1]},
            "variables must be a JSON object or null",
        ),
    ],
)
def test_parameters_of_the_wrong_type_are_refused(server, body, message):
    base_url, log = server

    response, lines = logged(
        log, lambda: requests.post(f"{base_url}/graphql", json=body, timeout=30)
    )

    assert response.status_code == 400
    assert response.json() == {
        "errors": [{"message": message, "extensions": {"code": "BAD_USER_INPUT"}}]
    }
    assert lines == [
        "WARNING django.request: Bad Request: /graphql",
        f'access "POST /graphql" 400 {len(response.content)}',
    ]


def test_deeply_nested_json_to_graphql_is_invalid_json(server):
    base_url, log = server

    response, lines = logged(log, post_json(base_url, "/graphql", DEEP_JSON))

    assert response.status_code == 400
    assert response.json() == {"errors": [{"message": "POST body sent invalid JSON."}]}
    assert lines == [
        "WARNING django.request: Bad Request: /graphql",
        f'access "POST /graphql" 400 {len(response.content)}',
    ]


def test_deeply_nested_json_to_the_channel_admin_is_invalid_json(server):
    base_url, log = server

    response, lines = logged(log, post_json(base_url, "/api/admin/channel", DEEP_JSON))

    assert (response.status_code, response.text) == (400, "invalid json")
    assert lines == [
        "WARNING django.request: Bad Request: /api/admin/channel",
        'access "POST /api/admin/channel" 400 12',
    ]


def test_deeply_nested_json_to_the_propagation_stream_is_its_bad_body(server):
    base_url, log = server

    response, lines = logged(log, post_json(base_url, "/propagate_in_video", DEEP_JSON))

    assert response.status_code == 400
    assert response.json() == {
        "error": 'the body must be JSON {"session_id": "<id>", "start_frame_index": <integer>}',
        "code": "BAD_USER_INPUT",
    }
    assert lines == [
        "WARNING django.request: Bad Request: /propagate_in_video",
        f'access "POST /propagate_in_video" 400 {len(response.content)}',
    ]


def test_a_nul_byte_in_a_media_path_is_not_found(server):
    base_url, log = server

    response, lines = logged(
        log, lambda: requests.get(f"{base_url}/media/gallery/default.mp4%00.jpg", timeout=30)
    )

    assert (response.status_code, response.text) == (404, NOT_FOUND_PAGE)
    assert lines == [
        "WARNING django.request: Not Found: /media/gallery/default.mp4\\x00.jpg",
        f'access "GET /media/gallery/default.mp4%00.jpg" 404 {len(NOT_FOUND_PAGE)}',
    ]


def test_a_static_path_out_of_its_folder_is_not_found(server):
    base_url, log = server
    host, port = base_url.removeprefix("http://").split(":")

    def send() -> http.client.HTTPResponse:
        # http.client sends the path as written; requests (and browsers) would remove the "..".
        connection = http.client.HTTPConnection(host, int(port), timeout=30)
        connection.request("GET", "/static/../config/settings.py")
        response = connection.getresponse()
        response.text = response.read().decode()
        connection.close()
        return response

    response, lines = logged(log, send)

    assert (response.status, response.text) == (404, NOT_FOUND_PAGE)
    # as for any missing static file: the access log's line alone
    assert lines == [f'access "GET /static/../config/settings.py" 404 {len(NOT_FOUND_PAGE)}']


BAD_REQUEST_PAGE = (
    '\n<!doctype html>\n<html lang="en">\n<head>\n  <title>Bad Request (400)</title>\n</head>\n'
    "<body>\n  <h1>Bad Request (400)</h1><p></p>\n</body>\n</html>\n"
)


def test_a_host_not_allowed_is_one_log_line(server):
    # Django logs a suspicious request with its traceback: 30 lines for a 50-byte request
    base_url, log = server

    response, lines = logged(
        log,
        lambda: requests.get(f"{base_url}/healthz", headers={"Host": "evil.example"}, timeout=30),
    )

    assert (response.status_code, response.text) == (400, BAD_REQUEST_PAGE)
    assert lines == [
        "ERROR django.security.DisallowedHost: Invalid HTTP_HOST header: 'evil.example'. "
        "You may need to add 'evil.example' to ALLOWED_HOSTS.",
        f'access "GET /healthz" 400 {len(BAD_REQUEST_PAGE)}',
    ]


def test_too_many_form_fields_is_one_log_line(server):
    base_url, log = server
    fields = "&".join(f"f{n}=1" for n in range(1001))

    response, lines = logged(
        log,
        lambda: requests.post(
            f"{base_url}/graphql",
            data=fields,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=30,
        ),
    )

    assert (response.status_code, response.text) == (400, BAD_REQUEST_PAGE)
    assert lines == [
        "ERROR django.security.TooManyFieldsSent: The number of GET/POST parameters exceeded "
        "settings.DATA_UPLOAD_MAX_NUMBER_FIELDS.",
        f'access "POST /graphql" 400 {len(BAD_REQUEST_PAGE)}',
    ]


def test_a_multipart_file_name_over_1024_bytes_is_a_coded_error_in_one_line(server):
    # Django's multipart parser refuses a part's headers over 1,024 bytes; that was an HTML 400
    # and a 4.8 KB traceback
    base_url, log = server
    operations = '{"query": "mutation($f: Upload!) { uploadVideo(file: $f) { path } }", '
    operations += '"variables": {"f": null}}'

    response, lines = logged(
        log,
        lambda: requests.post(
            f"{base_url}/graphql",
            files={
                "operations": (None, operations),
                "map": (None, '{"0": ["variables.f"]}'),
                "0": ("a" * 1100 + ".mp4", b"not a video", "video/mp4"),
            },
            timeout=30,
        ),
    )

    assert response.status_code == 400
    assert response.json() == {
        "errors": [
            {
                "message": "the multipart body cannot be read: "
                "Request max total header size exceeded.",
                "extensions": {"code": "BAD_USER_INPUT"},
            }
        ]
    }
    assert lines == [
        "WARNING django.request: Bad Request: /graphql",
        f'access "POST /graphql" 400 {len(response.content)}',
    ]


@pytest.mark.parametrize(
    ("header", "status", "content_range", "body"),
    [
        # a first byte past every file: unsatisfiable
        ("bytes=" + "9" * 5000 + "-", 416, "bytes */1000", b""),
        # a last byte, or a suffix, past every file: to the end, or the whole file
        ("bytes=990-" + "9" * 5000, 206, "bytes 990-999/1000", b"x" * 10),
        ("bytes=-" + "9" * 5000, 206, "bytes 0-999/1000", b"x" * 1000),
    ],
)
def test_a_range_of_5000_digits_is_answered_as_http_says(
    server, header, status, content_range, body
):
    # Python refuses to read an integer of over 4,300 digits: that was a 500 and a traceback
    base_url, log = server
    media = log.parent / "media" / "gallery"
    media.mkdir(parents=True, exist_ok=True)
    (media / "range.mp4").write_bytes(b"x" * 1000)

    response, lines = logged(
        log,
        lambda: requests.get(
            f"{base_url}/media/gallery/range.mp4", headers={"Range": header}, timeout=30
        ),
    )

    assert (response.status_code, response.headers["Content-Range"], response.content) == (
        status,
        content_range,
        body,
    )
    assert not any("Traceback" in line for line in lines)
    assert lines[-1] == f'access "GET /media/gallery/range.mp4" {status} {len(body) or "-"}'
