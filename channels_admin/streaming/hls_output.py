"""The active channel as HLS (RFC 8216): the relayed MPEG-TS cut into segments at key frames,
and a live media playlist of the latest ones.

Players without Media Source Extensions (Safari on iOS) cannot play ``/ts``, but play HLS
natively; and HLS, unlike one endless response per viewer, is what HTTP caches and CDNs can
carry. :class:`HlsOutput` is fed the same chunks of whole packets as the ``/ts`` viewers (no
second upstream, no transcoding) and:

- closes a segment at the first video key frame at least ``target_seconds`` (2 s) after its
  start, so a segment is 2 s or the GOP when that is longer. Without a key frame to end at (no
  video, or none detected) a segment is still cut after ``max_seconds`` (or ``max_bytes``), at
  a PES start, so the playlist never stalls;
- starts every segment with the latest PAT and PMT, so each decodes on its own; what comes
  before the first key frame of a stream cannot, and is dropped;
- times segments by the PTS of the clock PID's PES (the video's, else the first stream's),
  falling back to the wall clock where they are missing or jump;
- keeps ``kept`` segments (a few more than the ``window`` the playlist lists, for clients that
  are slightly behind), so memory is bounded;
- marks the first segment after :meth:`discontinuity` (a switch; the hub's failover) or a jump
  of the time line (an upstream that restarted) with ``EXT-X-DISCONTINUITY``, and keeps
  ``EXT-X-DISCONTINUITY-SEQUENCE`` as those slide out of the window.

Segment names carry a random token per instance (per server process) and a media sequence that
never restarts, starting at the Unix time: a name is never used for other bytes, across
switches and restarts too, so an HTTP cache in front never serves stale bytes. (Each
process segments on its own, so a playlist and its segments must come from the same process:
docs/deploy.md.)

Requests are counted per segment: the clients that fetched the latest segments are the HLS
audience (:attr:`HlsOutput.viewers`).
"""

from __future__ import annotations

import math
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from channels_admin.streaming.ts import TS_PACKET
from channels_admin.streaming.ts_scan import PTS_HZ, PTS_WRAP, PesStart, ProgramScanner

TARGET_SECONDS = 2.0
MAX_SECONDS = 10.0
MAX_SEGMENT_BYTES = 32 * 1024 * 1024
WINDOW = 6
KEPT = WINDOW + 4
# A PTS this far from the previous one is not the same time line (an upstream that restarted).
JUMP_BACK_SECONDS = 1.0
JUMP_AHEAD_SECONDS = MAX_SECONDS
# A key frame this close to the target closes the segment (timestamps round).
TOLERANCE_SECONDS = 0.001


@dataclass(eq=False)
class Segment:
    """One published segment: its bytes (PAT, PMT, then the packets) and what the playlist
    says of it."""

    sequence: int
    name: str  # its URI, relative to the playlist's
    data: bytes
    duration: float  # seconds, to the millisecond
    discontinuity: bool  # EXT-X-DISCONTINUITY before it
    date: float  # EXT-X-PROGRAM-DATE-TIME: the wall clock (Unix time) of its first frame
    starts_with_key: bool
    requests: int = 0  # how often it was served


class HlsOutput:
    """Segments of the relayed stream and the live playlist of the latest ones."""

    def __init__(
        self,
        *,
        target_seconds: float = TARGET_SECONDS,
        max_seconds: float = MAX_SECONDS,
        max_bytes: int = MAX_SEGMENT_BYTES,
        window: int = WINDOW,
        kept: int = KEPT,
        clock: Callable[[], float] = time.time,
        token: str | None = None,
    ) -> None:
        if not 1 <= window <= kept:
            raise ValueError(f"need 1 <= window <= kept, got {window} and {kept}")
        self._target_seconds = target_seconds
        self._max_seconds = max_seconds
        self._max_bytes = max_bytes
        self._window = window
        self._kept = kept
        self._clock = clock
        self._token = token or secrets.token_hex(4)
        # From the Unix time: a restarted process goes on above its predecessor's numbers,
        # as segments come less often than once a second.
        self._next_sequence = int(clock())
        self._scanner = ProgramScanner()
        self._segments: deque[Segment] = deque()
        self._by_name: dict[str, Segment] = {}
        self.served = 0  # segment requests answered, since the start
        self._reset_state()

    def _reset_state(self) -> None:
        self._segments.clear()
        self._by_name.clear()
        self._target_duration = 0  # never lowered while the playlist lives
        self._slid_discontinuities = 0
        self._rendered: bytes | None = None
        self._discontinuity_due = False
        self._next_date: float | None = None
        self._last_pts: int | None = None
        self._step = 0.0  # the latest PTS step between PES starts: about one frame
        self._scanner.clear()
        self._begin(key=False, pts=None, now=self._clock(), leading=True)

    # -- what the hub calls ------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Take a chunk of whole TS packets, as the ``/ts`` viewers get it."""
        if len(data) < TS_PACKET:
            return
        now = self._clock()
        cut = 0  # the chunk's packets before this row are in the segment already, or dropped
        for start in self._scanner.scan(data):
            # Without video, any PES start of the clock PID is a place to cut.
            key = start.key or self._scanner.video_pid is None
            if start.pts is not None and self._jumped(start.pts):
                self._add(data[cut * TS_PACKET : start.row * TS_PACKET])
                cut = start.row
                self._run_ends(now)
                self._begin(key=key, pts=start.pts, now=now, leading=not key)
            elif key and self._leading:
                cut = start.row  # what came before the first key frame cannot be decoded alone
                self._begin(key=True, pts=start.pts, now=now)
            elif self._cuts_at(start, key, now):
                self._add(data[cut * TS_PACKET : start.row * TS_PACKET])
                cut = start.row
                self._finish(start.pts, now)
                self._begin(key=key, pts=start.pts, now=now)
            self._timed(start.pts)
        self._add(data[cut * TS_PACKET :])
        if self._size > self._max_bytes:
            self._finish(None, now)
            self._begin(key=False, pts=None, now=now)

    def discontinuity(self) -> None:
        """Another stream follows (a switch, a failover): the segment under way is published
        as it is, and the next one is marked ``EXT-X-DISCONTINUITY``."""
        self._run_ends(self._clock())
        self._scanner.clear()  # the next stream's PIDs may differ
        self._begin(key=False, pts=None, now=self._clock(), leading=True)

    def reset(self) -> None:
        """No channel plays: forget every segment (names are never used again)."""
        self._reset_state()

    # -- what the HTTP side calls ------------------------------------------------------------

    def playlist(self) -> bytes | None:
        """The live media playlist, or None before the first segment."""
        if not self._segments:
            return None
        if self._rendered is None:
            listed = list(self._segments)[-self._window :]
            older = len(self._segments) - len(listed)
            sequence = self._slid_discontinuities + sum(
                self._segments[index].discontinuity for index in range(older)
            )
            self._rendered = media_playlist(
                listed, target_duration=self._target_duration, discontinuity_sequence=sequence
            ).encode()
        return self._rendered

    def segment(self, name: str) -> bytes | None:
        """The bytes of the segment called ``name`` (counted as a request), or None when it is
        unknown or gone."""
        segment = self._by_name.get(name)
        if segment is None:
            return None
        segment.requests += 1
        self.served += 1
        return segment.data

    @property
    def viewers(self) -> int:
        """About how many clients play the HLS output: the requests of the second and third
        newest segments, whichever has more. Every playing client fetches each new segment
        within a playlist reload (a target duration) and the playlist's cache lifetime; the
        newest may not have been fetched by all yet. Behind a cache, each cache counts once."""
        recent = list(self._segments)[-3:-1]
        return max((segment.requests for segment in recent), default=0)

    @property
    def segments(self) -> list[Segment]:
        """The segments the playlist lists, oldest first."""
        return list(self._segments)[-self._window :]

    @property
    def target_duration(self) -> int:
        return self._target_duration

    # -- cutting -----------------------------------------------------------------------------

    def _begin(self, *, key: bool, pts: int | None, now: float, leading: bool = False) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._leading = leading  # before the stream's first key frame
        self._starts_with_key = key
        self._start_pts = pts
        self._start_wall = now
        self._span: float | None = 0.0 if pts is not None else None  # latest PTS, as an offset
        self._tables = self._scanner.pat + self._scanner.pmt

    def _add(self, data: bytes) -> None:
        if data:
            self._parts.append(data)
            self._size += len(data)

    def _cuts_at(self, start: PesStart, key: bool, now: float) -> bool:
        elapsed = self._elapsed(start.pts, now)
        if key:
            return elapsed >= self._target_seconds - TOLERANCE_SECONDS
        return elapsed >= self._max_seconds

    def _offset(self, pts: int) -> float | None:
        """Seconds from the segment's first PTS to ``pts``; None where that is no measure."""
        if self._start_pts is None:
            return None
        ticks = (pts - self._start_pts) % PTS_WRAP
        if ticks >= PTS_WRAP // 2:
            ticks -= PTS_WRAP
        seconds = ticks / PTS_HZ
        return max(seconds, 0.0) if abs(seconds) <= 2 * self._max_seconds else None

    def _elapsed(self, pts: int | None, now: float) -> float:
        offset = None if pts is None else self._offset(pts)
        return now - self._start_wall if offset is None else offset

    def _timed(self, pts: int | None) -> None:
        """Follow the clock PID's time line: the segment's span and the step of a frame."""
        if pts is None:
            return
        if self._start_pts is None:  # a segment that began between PES starts
            self._start_pts, self._span = pts, 0.0
        offset = self._offset(pts)
        if offset is not None and self._span is not None:
            self._span = max(self._span, offset)
        if self._last_pts is not None:
            step = ((pts - self._last_pts) % PTS_WRAP) / PTS_HZ
            if 0 < step < 1:
                self._step = step
        self._last_pts = pts

    def _jumped(self, pts: int) -> bool:
        if self._last_pts is None:
            return False
        ticks = (pts - self._last_pts) % PTS_WRAP
        if ticks >= PTS_WRAP // 2:
            return (PTS_WRAP - ticks) / PTS_HZ > JUMP_BACK_SECONDS
        return ticks / PTS_HZ > JUMP_AHEAD_SECONDS

    def _run_ends(self, now: float) -> None:
        """The stream's time line ends here: publish what is under way (unless it is what
        came before a first key frame), and mark the next segment."""
        if not self._leading:
            self._finish(None, now)
        self._last_pts = None
        if self._segments:
            self._discontinuity_due = True

    def _finish(self, end_pts: int | None, now: float) -> None:
        """Publish the segment under way, ended by a PES with ``end_pts`` (None: cut short)."""
        if not self._size:
            return
        duration = None if end_pts is None else self._offset(end_pts)
        if duration is None and self._span is not None:
            duration = self._span + self._step  # the last frame lasts about one step
        if not duration:
            duration = now - self._start_wall
        duration = round(duration, 3)
        if duration <= 0:
            return
        discontinuity, self._discontinuity_due = self._discontinuity_due, False
        date = self._start_wall
        if not discontinuity and self._next_date is not None:
            date = self._next_date  # a continuous run: its dates follow its durations
        self._next_date = date + duration
        sequence = self._next_sequence
        self._next_sequence += 1
        tables = self._tables or self._scanner.pat + self._scanner.pmt
        segment = Segment(
            sequence=sequence,
            name=f"seg-{self._token}-{sequence}.ts",
            data=b"".join([tables, *self._parts]),
            duration=duration,
            discontinuity=discontinuity,
            date=date,
            starts_with_key=self._starts_with_key,
        )
        self._segments.append(segment)
        self._by_name[segment.name] = segment
        while len(self._segments) > self._kept:
            gone = self._segments.popleft()
            del self._by_name[gone.name]
            self._slid_discontinuities += gone.discontinuity
        self._target_duration = max(self._target_duration, math.ceil(duration))
        self._rendered = None
        self._parts, self._size = [], 0


def media_playlist(
    segments: list[Segment], *, target_duration: int, discontinuity_sequence: int
) -> str:
    """A live media playlist (RFC 8216, section 4.3) of ``segments``, oldest first."""
    lines = [
        "#EXTM3U",
        "#EXT-X-VERSION:3",  # decimal EXTINF durations
        f"#EXT-X-TARGETDURATION:{target_duration}",
        f"#EXT-X-MEDIA-SEQUENCE:{segments[0].sequence}",
        f"#EXT-X-DISCONTINUITY-SEQUENCE:{discontinuity_sequence}",
    ]
    for segment in segments:
        if segment.discontinuity:
            lines.append("#EXT-X-DISCONTINUITY")
        date = datetime.fromtimestamp(segment.date, UTC).isoformat(timespec="milliseconds")
        lines.append(f"#EXT-X-PROGRAM-DATE-TIME:{date.replace('+00:00', 'Z')}")
        lines.append(f"#EXTINF:{segment.duration:.3f},")
        lines.append(segment.name)
    return "\n".join(lines) + "\n"
