"""Who sent a request: the address the server sees, or the one a trusted proxy says it saw.

Behind a reverse proxy every request arrives from the proxy's address (127.0.0.1 when nginx
runs on the same machine), so that address says nothing about the client. Two rules follow:

- A request that carries a proxy header (``Forwarded``, ``X-Forwarded-For``, ``X-Real-IP``)
  came through a proxy, or claims to: its loopback address proves nothing, and it is never
  trusted as "this machine" (:func:`came_through_proxy`).
- The client's address, for per-client limits, is the peer's address, unless the peer is one of
  ``TRUSTED_PROXIES``: then it is the right-most ``X-Forwarded-For`` hop that is not a trusted
  proxy itself (the hops to its left are the client's own claims, and free to lie)
  (:func:`client_address`).
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

PROXY_HEADERS = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_REAL_IP")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def came_through_proxy(request: HttpRequest) -> bool:
    """Whether the request carries any header a proxy adds."""
    return any(header in request.META for header in PROXY_HEADERS)


def peer_is_loopback(request: HttpRequest) -> bool:
    """Whether the connection itself comes from this machine."""
    address = _address(request.META.get("REMOTE_ADDR", ""))
    return address is not None and address.is_loopback


def client_address(request: HttpRequest) -> str:
    """The client's IP address as text, as far as the server can know it."""
    return address_of(
        request.META.get("REMOTE_ADDR", ""), request.META.get("HTTP_X_FORWARDED_FOR", "")
    )


def address_of(peer: str, forwarded_for: str) -> str:
    """:func:`client_address` from the connection's peer and its ``X-Forwarded-For``."""
    peer = peer or "unknown"
    if not _trusted(peer):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",")]
    for hop in reversed(hops):
        if _address(hop) is None:
            # the trusted proxy wrote what follows this hop; this one is not an address
            break
        if not _trusted(hop):
            return hop
    return peer


def _trusted(address: str) -> bool:
    parsed = _address(address)
    return parsed is not None and any(parsed in network for network in trusted_networks())


def trusted_networks(entries: list[str] | None = None) -> tuple[Network, ...]:
    """``TRUSTED_PROXIES`` (or ``entries``) as networks; ``ValueError`` names a bad entry."""
    entries = settings.TRUSTED_PROXIES if entries is None else entries
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
