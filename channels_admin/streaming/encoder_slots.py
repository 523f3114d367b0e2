"""How many demo encoders run at once: a cap in all, and a cap per client.

Each demo stream encodes its own test pattern, a share of a core, so the process runs a few at
most. Without a cap per client, one client's few requests would take them all, and the hub's own
request for a demo channel (an administrator's switch) would find none free.
"""

from __future__ import annotations

from collections import Counter

DEMO_ENCODERS = 4  # the demo streams a process runs at once, each a share of a core


class EncoderSlots:
    """The encoders running now, per client; a client is any key the caller chooses (its
    address)."""

    def __init__(self, *, total: int, per_client: int) -> None:
        self.total = total
        self.per_client = per_client
        self._held: Counter[str] = Counter()

    @property
    def held(self) -> int:
        """The slots taken now, by every client."""
        return self._held.total()

    def take(self, client: str) -> str | None:
        """Take a slot for ``client``: None when taken, else why not (nothing is taken)."""
        if self._held[client] >= self.per_client:
            return f"this client runs its most demo streams ({self.per_client})"
        if self.held >= self.total:
            return f"this server runs its most demo streams ({self.total})"
        self._held[client] += 1
        return None

    def give_back(self, client: str) -> None:
        """Free a slot ``client`` took."""
        self._held[client] -= 1
        if self._held[client] <= 0:
            del self._held[client]
