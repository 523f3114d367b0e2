"""The slate: what viewers get while no source of the channel plays.

A viewer whose stream goes silent is soon shown an error by its player, or a spinner that
never ends; a player kept fed waits. While the hub looks for a source (a failover, a switch
to a channel slow to answer) it plays a live test pattern labelled ``RECONNECTING``, encoded
here by the demo channels' encoder, and the next source starts from a key frame after it.
Every start of the slate begins with its layout and a key frame.

The slate takes the PIDs of the source it stands in for (its PMT's, its video's and its
audio's), and has no sound where that source had none, so that a client sees the same streams go
on rather than new ones appear: FFmpeg's demuxer, for one, adds a stream it finds midway that
PyAV's reader then does not know, and mpegts.js in Chromium cannot add a track to the player it
has (``addSourceBuffer``: "This MediaSource has reached the limit of SourceBuffer objects").

With ``pattern=False`` (``CHANNELS_SLATE=0``: no encoder spends CPU on it) the slate is null
packets, twice a second, which keep the connection and the player's patience, not its screen.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.remux import MUX_OPTIONS
from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import StreamLayout
from core.cancellation import task_cancel
from core.threads import iterate_in_thread

SLATE_LABEL = "RECONNECTING"
SLATE_OPTIONS = PatternOptions()
NULL_PID = 0x1FFF
NULL_PACKETS = (b"\x47\x1f\xff\x10" + b"\xff" * (TS_PACKET - 4)) * 7
NULL_SECONDS = 0.5


class Slate:
    """Plays the slate to ``push``, from :meth:`start` until :meth:`stop`."""

    def __init__(
        self,
        push: Callable[[bytes], Awaitable[None]],
        *,
        pattern: bool = True,
        options: PatternOptions = SLATE_OPTIONS,
    ) -> None:
        self._push = push
        self._pattern = pattern
        self._options = options
        self._task: asyncio.Task[None] | None = None
        self._stop: threading.Event | None = None

    @property
    def playing(self) -> bool:
        return self._task is not None

    def start(self, layout: StreamLayout | None = None) -> None:
        """Play, on the PIDs of ``layout`` (None: the muxer's own)."""
        if self._task is not None:
            return
        if not self._pattern:
            self._task = asyncio.create_task(self._play_nulls())
            return
        self._stop = threading.Event()
        self._task = asyncio.create_task(self._play(self._stop, layout))

    async def stop(self) -> None:
        """Stop at once: nothing more of the slate goes out after this returns (the encoder's
        thread ends at its next frame)."""
        task, self._task = self._task, None
        if self._stop is not None:
            self._stop.set()
        if task is not None:
            await task_cancel(task)

    async def _play(self, stop: threading.Event, layout: StreamLayout | None) -> None:
        options = dict(MUX_OPTIONS)
        pattern = self._options
        pids: tuple[int | None, int | None] = (None, None)
        if layout is not None:
            options["mpegts_pmt_start_pid"] = str(layout.pmt_pid)
            pids = (layout.video_pid, layout.audio_pid)
            if layout.audio_pid is None:
                pattern = dataclasses.replace(pattern, audio=False)
        chunks = iterate_in_thread(
            lambda: pattern_chunks(pattern, label=SLATE_LABEL, mux_options=options, pids=pids),
            stop=stop,
            name="slate",
            buffered=16,
        )
        async for chunk in chunks:
            await self._push(chunk)

    async def _play_nulls(self) -> None:
        while True:
            await self._push(NULL_PACKETS)
            await asyncio.sleep(NULL_SECONDS)
