"""Who sent a request, behind a proxy and not (core/client_address.py), and the start-up
warning of a server that listens beyond this machine with no admin token."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from core.client_address import came_through_proxy, client_address, peer_is_loopback
from edge.server import listening_warning


def request(remote: str, **headers: str):
    return RequestFactory().get("/", REMOTE_ADDR=remote, headers=headers)


@pytest.mark.parametrize(
    ("remote", "forwarded_for", "expected"),
    [
        # no proxy: the peer, whatever the client claims
        ("203.0.113.9", "", "203.0.113.9"),
        ("203.0.113.9", "198.51.100.1", "203.0.113.9"),
        # nginx on this machine: the hop it appended, not the client's own claims before it
        ("127.0.0.1", "198.51.100.1", "198.51.100.1"),
        ("127.0.0.1", "10.9.9.9, 198.51.100.1", "198.51.100.1"),
        # a chain of trusted proxies is walked from the right
        ("127.0.0.1", "198.51.100.1, 10.0.0.2", "198.51.100.1"),
        # a proxy that wrote no usable hop: the proxy itself
        ("127.0.0.1", "", "127.0.0.1"),
        ("127.0.0.1", "unknown", "127.0.0.1"),
        ("::1", "2001:db8::7", "2001:db8::7"),
    ],
)
def test_the_client_is_the_last_hop_a_trusted_proxy_saw(settings, remote, forwarded_for, expected):
    settings.TRUSTED_PROXIES = ["127.0.0.1", "::1", "10.0.0.0/8"]
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}

    assert client_address(request(remote, **headers)) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, False),
        ({"X-Forwarded-For": "127.0.0.1"}, True),
        ({"X-Real-IP": "127.0.0.1"}, True),
        ({"Forwarded": "for=127.0.0.1"}, True),
    ],
)
def test_any_proxy_header_marks_a_forwarded_request(headers, expected):
    forwarded = request("127.0.0.1", **headers)

    assert (came_through_proxy(forwarded), peer_is_loopback(forwarded)) == (expected, True)


def test_a_peer_that_is_not_an_address_is_not_loopback():
    assert peer_is_loopback(request("")) is False


@pytest.mark.parametrize("host", [None, "127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_no_warning_on_loopback(host):
    assert listening_warning(host, token="") is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.org"])  # noqa: S104
def test_a_server_listening_beyond_this_machine_without_a_token_warns(host):
    assert listening_warning(host, token="") == (
        f"listening on {host} with no CHANNELS_ADMIN_TOKEN: the channel admin API admits only "
        "staff logins and requests made on this machine (not through a proxy); set "
        "CHANNELS_ADMIN_TOKEN to use it from elsewhere"
    )
    assert listening_warning(host, token="s3cret") is None
