"""A TS upstream of the demo encoder's live test pattern (H.264 in MPEG-TS, in real time), one
channel a path: ``/{name}.ts``.

Either each connection gets an encoder of its own, starting on a key frame, or (``live``) each
channel is encoded from the start whether watched or not and a connection joins it wherever it
is, mostly between key frames, as it would a real provider's. With ``key_frames`` the upstream
notes when each key frame left it (:attr:`PatternUpstream.sent`, by PTS).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.ts_scan import ProgramScanner
from loopback_fakes.ts_stream import Chunks, TsStream


class LiveChannel:
    """One channel's live encoder, handing every chunk to the connections listening then."""

    def __init__(self, name: str, options: PatternOptions) -> None:
        self._options = options
        self._label = name
        self._listeners: list[queue.SimpleQueue[bytes]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def listen(self) -> queue.SimpleQueue[bytes]:
        listener: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        with self._lock:
            self._listeners.append(listener)
        return listener

    def leave(self, listener: queue.SimpleQueue[bytes]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def _run(self) -> None:
        for chunk in pattern_chunks(self._options, label=self._label):
            with self._lock:
                for listener in self._listeners:
                    listener.put(chunk)


class PatternUpstream(TsStream):
    def __init__(
        self,
        patterns: dict[str, PatternOptions],
        *,
        live: bool = False,
        key_frames: bool = False,
    ) -> None:
        self._patterns = patterns
        self._live = (
            {name: LiveChannel(name, options) for name, options in patterns.items()}
            if live
            else None
        )
        self._key_frames = key_frames
        self.sent: dict[int, float] = {}  # a key frame's PTS: when it was written (monotonic)
        super().__init__()

    def url(self, path: str = "/live.ts") -> str:
        """``path`` may be a channel's name alone."""
        return super().url(path if path.startswith("/") else f"/{path}.ts")

    def _chunks(self, path: str) -> Chunks:
        name = path.strip("/").split(".")[0]
        scanner = ProgramScanner() if self._key_frames else None
        for chunk in self._encoded(name):
            yield chunk, 0.0  # the encoder keeps real time
            if scanner:
                written = time.monotonic()
                for start in scanner.scan(chunk):
                    if start.key and start.pts is not None:
                        self.sent[start.pts] = written

    def _encoded(self, name: str) -> Iterator[bytes]:
        if self._live is None:
            yield from pattern_chunks(self._patterns[name], label=name)
            return
        channel = self._live[name]
        listener = channel.listen()
        try:
            while True:
                yield listener.get()
        finally:
            channel.leave(listener)
