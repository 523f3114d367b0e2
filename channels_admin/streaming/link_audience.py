"""Who watches through each private viewer link, for its cap and the status: the ``/ts``
viewers (each holds a seat of the link while it watches) and the HLS clients (the distinct
client addresses that fetched the link's playlist within a window of a few target durations).

A link's cap counts both together: a new ``/ts`` viewer takes a seat, and a new HLS client is
counted, only while seats and HLS clients are under the cap; an HLS client counted already is
never refused on its reloads. :class:`LocalAudience` counts this process's audience, the whole
server's when it runs alone; with several processes on Redis, ``shared_audience.py`` counts
every process's, atomically. Both are bounded: at most :data:`HLS_CLIENTS_PER_LINK` HLS clients
per link are kept (the oldest go first), and this process keeps at most
:data:`HLS_CLIENTS_KEPT` in all.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Protocol

# HLS clients kept per link: a link capped higher than this counts up to this many of them.
HLS_CLIENTS_PER_LINK = 10_000
# HLS clients kept by this process in all (about 150 bytes each).
HLS_CLIENTS_KEPT = 100_000


class LinkAudience(Protocol):
    """A link's ``/ts`` seats and HLS clients (``link`` is a viewer link's ID; ``cap`` None:
    no cap; ``window`` the seconds an HLS client stays counted after its last playlist)."""

    async def seat_take(self, link: int, *, cap: int | None, window: float) -> bool:
        """A seat for a new ``/ts`` viewer of ``link``, if seats and HLS clients are under
        ``cap``; False when they are not."""

    async def seat_give(self, link: int) -> None:
        """A viewer of ``link`` that took a seat has gone."""

    async def hls_admit(self, link: int, client: str, *, cap: int | None, window: float) -> bool:
        """Whether the client at the address ``client`` may have ``link``'s playlist: it was
        counted within ``window`` (counted again now), or seats and HLS clients are under
        ``cap`` (then it is counted from now)."""

    async def counts(self, links: Iterable[int], *, window: float) -> dict[int, tuple[int, int]]:
        """Per link of ``links``: its seats and its HLS clients."""

    async def close(self) -> None:
        """Give back what this process holds (a server shutdown)."""


class LocalAudience:
    """The audience of this process alone, in its memory: exact while it is the whole server.
    No await between a count and its change, so a crowd arriving at once is admitted up to the
    cap and no further."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        per_link: int = HLS_CLIENTS_PER_LINK,
        kept: int = HLS_CLIENTS_KEPT,
    ) -> None:
        self._clock = clock
        self._per_link = per_link
        self._kept = kept
        self._seats: dict[int, int] = {}
        # (link, client) -> the time of its latest playlist, the oldest first
        self._clients: OrderedDict[tuple[int, str], float] = OrderedDict()
        self._clients_of: dict[int, int] = {}

    async def seat_take(self, link: int, *, cap: int | None, window: float) -> bool:
        if cap is not None and self._taken(link, window) >= cap:
            return False
        self._seats[link] = self._seats.get(link, 0) + 1
        return True

    async def seat_give(self, link: int) -> None:
        left = self._seats.get(link, 0) - 1
        if left > 0:
            self._seats[link] = left
        else:
            self._seats.pop(link, None)

    async def hls_admit(self, link: int, client: str, *, cap: int | None, window: float) -> bool:
        now = self._forget_before(window)
        key = (link, client)
        if key in self._clients:
            self._clients[key] = now
            self._clients.move_to_end(key)
            return True
        if cap is not None and self._taken(link, window) >= cap:
            return False
        if self._clients_of.get(link, 0) >= self._per_link:
            return True  # admitted, not kept: the link has as many as are kept
        self._clients[key] = now
        self._clients_of[link] = self._clients_of.get(link, 0) + 1
        while len(self._clients) > self._kept:
            self._drop_oldest()
        return True

    async def counts(self, links: Iterable[int], *, window: float) -> dict[int, tuple[int, int]]:
        self._forget_before(window)
        return {link: (self._seats.get(link, 0), self._clients_of.get(link, 0)) for link in links}

    async def close(self) -> None:
        self._seats.clear()
        self._clients.clear()
        self._clients_of.clear()

    def _taken(self, link: int, window: float) -> int:
        self._forget_before(window)
        return self._seats.get(link, 0) + self._clients_of.get(link, 0)

    def _forget_before(self, window: float) -> float:
        """Forget the clients whose latest playlist is ``window`` old; the time now."""
        now = self._clock()
        while self._clients and next(iter(self._clients.values())) <= now - window:
            self._drop_oldest()
        return now

    def _drop_oldest(self) -> None:
        (link, _client), _ = self._clients.popitem(last=False)
        left = self._clients_of[link] - 1
        if left:
            self._clients_of[link] = left
        else:
            del self._clients_of[link]
