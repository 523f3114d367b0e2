"""One client cannot take every segmentation session (issue 47): each client address holds at
most ``MAX_SESSIONS_PER_CLIENT``, however fast it asks, and staff see who holds what.

Before, one client's 29 ``startSession`` calls in 3.1 s reached ``MAX_SESSIONS`` and everyone
else got ``TOO_MANY_SESSIONS``.
"""

from __future__ import annotations

import concurrent.futures
import re
import threading
from pathlib import Path

import pytest
import requests

from tests.conftest import manage, project_env, running_server

START = 'mutation { startSession(input: {path: "gallery/default.mp4"}) { sessionId } }'
CLOSE = "mutation($s: String!) { closeSession(input: {sessionId: $s}) { success } }"
CAP = 3
BURST = 10
ATTACKER = "203.0.113.66"  # through the trusted proxy (loopback), as nginx forwards it
HONEST = "203.0.113.7"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def server(default_video_var: Path):
    env = {"MAX_SESSIONS": "8", "MAX_SESSIONS_PER_CLIENT": str(CAP)}
    with running_server(default_video_var, **env) as base_url:
        made = manage(
            "createsuperuser",
            "--noinput",
            "--username=admin",
            "--email=admin@example.org",
            env=project_env(default_video_var, DJANGO_SUPERUSER_PASSWORD=PASSWORD, **env),
        )
        assert made.returncode == 0, made.stderr
        yield base_url


def graphql(server: str, query: str, *, client: str, **variables: object) -> dict:
    return requests.post(
        f"{server}/graphql",
        json={"query": query, "variables": variables},
        headers={"X-Forwarded-For": client},
        timeout=60,
    ).json()


def burst_start(server: str, client: str, count: int) -> list[dict]:
    """``count`` startSession calls from ``client``, released at the same moment."""
    start = threading.Barrier(count)

    def one(_: int) -> dict:
        start.wait(timeout=10)
        return graphql(server, START, client=client)

    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(one, range(count)))


def staff_page(server: str) -> requests.Response:
    browser = requests.Session()
    page = browser.get(f"{server}/admin/login/", timeout=10).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    browser.post(
        f"{server}/admin/login/",
        {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token},
        timeout=30,
    )
    return browser.get(f"{server}/admin/segmentation/sessions/", timeout=10)


def test_one_client_gets_exactly_its_share_however_fast_it_asks(server):
    # when: one client asks for ten sessions at once
    answers = burst_start(server, ATTACKER, BURST)
    honest = graphql(server, START, client=HONEST)

    # then: exactly its share is opened, the rest refused with the code and its text
    opened = [a["data"]["startSession"]["sessionId"] for a in answers if a.get("data")]
    refused = [a["errors"][0] for a in answers if a.get("errors")]
    assert len(opened) == CAP
    assert refused == [
        {
            "message": (
                f"this client holds its maximum of {CAP} sessions; close one or try again later"
            ),
            "locations": [{"line": 1, "column": 12}],
            "path": ["startSession"],
            "extensions": {"code": "TOO_MANY_CLIENT_SESSIONS"},
        }
    ] * (BURST - CAP)
    # and another client still gets one
    assert honest["data"]["startSession"]["sessionId"]

    # when: the client closes one, it may open one again, and only one
    closed = graphql(server, CLOSE, client=ATTACKER, s=opened[0])
    again = [graphql(server, START, client=ATTACKER) for _ in range(2)]

    assert closed == {"data": {"closeSession": {"success": True}}}
    assert again[0]["data"]["startSession"]["sessionId"]
    assert again[1]["errors"][0]["extensions"] == {"code": "TOO_MANY_CLIENT_SESSIONS"}
    for session_id in [*opened[1:], again[0]["data"]["startSession"]["sessionId"]]:
        graphql(server, CLOSE, client=ATTACKER, s=session_id)
    graphql(server, CLOSE, client=HONEST, s=honest["data"]["startSession"]["sessionId"])


def test_staff_see_who_holds_what(server):
    # given: the attacker holds its share, the honest client one
    attacker = [graphql(server, START, client=ATTACKER) for _ in range(CAP)]
    honest = graphql(server, START, client=HONEST)

    page = staff_page(server)
    anonymous = requests.get(
        f"{server}/admin/segmentation/sessions/", allow_redirects=False, timeout=10
    )

    assert page.status_code == 200
    assert '<p id="sessions-total">4 sessions held by 2 clients.</p>' in page.text
    rows = re.findall(
        r'<td class="client" rowspan="\d+">([^<]+)</td><td class="count" rowspan="\d+">(\d+)</td>',
        page.text,
    )
    assert rows == [(ATTACKER, str(CAP)), (HONEST, "1")]
    assert page.text.count("gallery/default.mp4") == 4
    for answer in [*attacker, honest]:
        assert answer["data"]["startSession"]["sessionId"] in page.text
    # anyone else is sent to the login page
    assert anonymous.status_code == 302
    assert anonymous.headers["Location"].startswith("/admin/login/")
