"""A new source's bytes held back until its first key frame.

After a failover or a switch, viewers are watching something (the slate, or the source that
failed); what comes next must start where a decoder can: the programme's layout (PAT, PMT) and
a video key frame. Bytes before it would only be thrown away by the players, after showing
broken pictures or none. :class:`KeyFrameGate` watches a source's first chunks with a
:class:`~channels_admin.streaming.gop_cache.GopCache` of its own and opens at the first key
frame, letting out the layout and the picture group from it on.

A stream the gate cannot read (no PAT in its first 64 KiB) or without video (a radio channel)
passes as it is, at once: there is no key frame to wait for.
"""

from __future__ import annotations

from channels_admin.streaming.gop_cache import GopCache
from channels_admin.streaming.ts_scan import StreamLayout

UNREADABLE_BYTES = 64 * 1024
GROUP_MAX_BYTES = 64 * 1024 * 1024  # a picture group larger than this is not waited for
GROUP_MAX_SECONDS = 3600.0  # the hub's key-frame timeout decides how long to wait, not this


class KeyFrameGate:
    def __init__(self) -> None:
        self._cache = GopCache(max_bytes=GROUP_MAX_BYTES, max_seconds=GROUP_MAX_SECONDS)
        self._held: list[bytes] = []
        self._held_bytes = 0
        self.open = False
        self.layout: StreamLayout | None = None  # the source's PIDs, as read by the opening

    def feed(self, data: bytes) -> bytes:
        """What of the source may go out now: nothing while the gate waits; at its opening the
        layout and the picture group so far (or everything held, for a stream it cannot
        read); after that, ``data`` as it is."""
        if self.open:
            return data
        self._cache.feed(data)
        start = self._cache.start()
        if start:
            return self._opened(start)
        layout = self._cache.layout
        if layout is not None:
            if layout.video_pid is None:
                return self._opened(b"".join([*self._held, data]))
            self._held.clear()  # a video stream: only a key frame opens the gate
            return b""
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes > UNREADABLE_BYTES:
            return self._opened(b"".join(self._held))
        return b""

    def _opened(self, data: bytes) -> bytes:
        self.open = True
        self.layout = self._cache.layout
        self._held.clear()
        self._cache.clear()
        return data
