"""Which addresses the hub may open an upstream connection to.

A playlist names its channels' sources, and a playlist may come from anywhere: a backup URL of
``http://127.0.0.1:<port>/api/admin/status`` had the hub fetch the server's own admin API from
loopback, where a request counts as made on the machine. So every address the hub connects to
is checked as the connection opens, whatever led to it (a host name's every resolved address, a
redirect, an HLS playlist's segments): refused are the unspecified addresses (0.0.0.0, ``::``:
this machine), the networks of ``CHANNELS_UPSTREAM_DENY`` (loopback by default), and any
address this machine holds (what a socket can be bound to), unless the networks of
``CHANNELS_UPSTREAM_ALLOW`` hold it (a provider on this machine or this network, named on
purpose). The server's own demo channels (``trusted_urls``) are exempt: the server writes their
URLs itself.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
REFUSED = "the upstream's address is not one the hub may fetch (CHANNELS_UPSTREAM_DENY)"


class UpstreamDenied(OSError):
    """A connection to an address the hub may not fetch, refused before it was opened."""


def networks_parse(text: Iterable[str]) -> tuple[Network, ...]:
    """Networks (``127.0.0.0/8``) or single addresses (``::1``); ValueError names a bad one."""
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in text if item.strip())


@dataclass(frozen=True)
class UpstreamAddresses:
    deny: tuple[Network, ...]
    allow: tuple[Network, ...] = ()
    trusted_urls: frozenset[str] = frozenset()

    def allows(self, host: str) -> bool:
        """Whether the hub may connect to the address ``host`` (an IP address's text)."""
        address: Address = ipaddress.ip_address(host.split("%", 1)[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if any(address in network for network in self.allow):
            return True
        if address.is_unspecified or any(address in network for network in self.deny):
            return False
        return not _held_here(address)

    def socket_factory(self, addr_info: tuple) -> socket.socket:
        """aiohttp's hook for each connection it opens, to each address it tries."""
        family, kind, protocol, _, address = addr_info
        if not self.allows(address[0]):
            raise UpstreamDenied(REFUSED)
        return socket.socket(family, kind, protocol)


def _held_here(address: Address) -> bool:
    """Whether this machine holds ``address``: whether a socket can be bound to it."""
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True
