"""HLS upstreams (RFC 8216) read as one continuous MPEG-TS stream.

:class:`HlsReader` follows one channel's playlist with one HTTP client (the hub's session: one
request at a time, over a keep-alive connection where the server allows):

- A master playlist gives one variant: the highest ``BANDWIDTH`` that has video, within
  ``max_bandwidth`` when one is set (the lowest variant when none fits).
- A live media playlist is joined near its live edge (three segments back, as players do) and
  reloaded on the RFC's schedule: a target duration after a load that brought new segments,
  half of one after a load that did not. A segment is never fetched twice, across reconnects
  too; a playlist without a new segment for three target durations has stalled.
- A VOD playlist (``EXT-X-ENDLIST``) plays from its start to its end, which ends the upstream.
- MPEG-TS segments pass through as they are; fMP4 segments (``EXT-X-MAP``), packed audio and
  a variant's separate audio rendition (fetched beside its video, the same stretch of time) are
  remuxed (:mod:`~channels_admin.streaming.remux`). ``EXT-X-BYTERANGE`` ranges are requested
  as such.
- ``EXT-X-KEY METHOD=AES-128`` segments are decrypted (explicit IV, or the media sequence
  number); other methods are refused with the reason. Init sections are taken as unencrypted.
- A live playlist's segments go out as soon as they are fetched (the relay adds no delay); media
  that would run further ahead of the clock than the join's segments and a second (a VOD
  playlist, a catch-up) goes out at the pace of its durations. The next segments are fetched
  meanwhile.

:attr:`HlsReader.playing` says what is playing, for the status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import m3u8
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels_admin.streaming.remux import RemuxError, TsRemuxer
from channels_admin.streaming.ts import TS_PACKET
from core.cancellation import task_cancel

logger = logging.getLogger(__name__)

HLS_CONTENT_TYPES = frozenset(
    {
        "application/vnd.apple.mpegurl",
        "application/x-mpegurl",
        "audio/mpegurl",
        "audio/x-mpegurl",
    }
)
LIVE_EDGE_SEGMENTS = 3  # a live playlist is joined this many segments before its end
STALL_TARGET_DURATIONS = 3  # no new segment for this many target durations: stalled
MISSING_SEGMENTS_LIMIT = 3  # consecutive segments that fail before the upstream counts as down
SLICE_BYTES = 64 * 1024  # a segment's bytes go out in slices of about this size
SPREAD = 0.5  # ...spread over this share of its duration (after the join's segments)
PACE_LEAD_SECONDS = 1.0  # media goes out at most the join's segments and this ahead of time
PREFETCH_SEGMENTS = 2  # segments fetched while the ones before them go out
PLAYLIST_MAX_BYTES = 4 * 1024 * 1024


class HlsError(Exception):
    """The HLS upstream cannot be played on; the message says why, for the status."""


class MissingSegment(HlsError):
    """A segment the playlist names answered 404 or 410."""


@dataclass(frozen=True)
class Response:
    url: str  # after redirects
    status: int
    content_type: str
    body: bytes


# (url, byte range as (offset, length) or None) -> the response
Fetch = Callable[[str, tuple[int, int] | None], Awaitable[Response]]


def looks_like_hls(content_type: str, head: bytes) -> bool:
    """An HLS playlist, told by its content type or by a body that starts with ``#EXTM3U``
    (an MPEG-TS stream starts with its sync byte)."""
    if content_type.split(";")[0].strip().lower() in HLS_CONTENT_TYPES:
        return True
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"#EXTM3U")


def variant_pick(master: m3u8.M3U8, max_bandwidth: int | None) -> m3u8.Playlist:
    """The variant to play: the highest bandwidth with video within ``max_bandwidth``."""
    variants = [v for v in master.playlists if v.absolute_uri]
    if not variants:
        raise HlsError("the HLS master playlist lists no variant")
    with_video = [v for v in variants if _has_video(v)] or variants

    def bandwidth(variant: m3u8.Playlist) -> int:
        return variant.stream_info.bandwidth or 0

    fitting = [v for v in with_video if max_bandwidth is None or bandwidth(v) <= max_bandwidth]
    if fitting:
        return max(fitting, key=bandwidth)
    return min(with_video, key=bandwidth)


def _audio_rendition(variant: m3u8.Playlist) -> str | None:
    """The URI of the variant's separate audio (its group's default rendition, else the first),
    or None when the variant's own segments carry the audio."""
    group = variant.stream_info.audio
    renditions = [m for m in variant.media if m.type == "AUDIO" and m.group_id == group]
    if not group or not renditions:
        return None
    chosen = next((m for m in renditions if m.default == "YES"), renditions[0])
    return chosen.absolute_uri if chosen.uri else None


def _has_video(variant: m3u8.Playlist) -> bool:
    info = variant.stream_info
    if info.resolution:
        return True
    codecs = (info.codecs or "").lower()
    if not codecs:
        return True  # unknown: most variants without CODECS carry video
    return any(codec.strip()[:4] in _VIDEO_CODECS for codec in codecs.split(","))


_VIDEO_CODECS = {"avc1", "avc3", "hvc1", "hev1", "mp4v", "vp09", "av01", "dvh1", "dvhe"}


def segment_decrypt(data: bytes, key: bytes, iv: bytes) -> bytes:
    """AES-128-CBC with PKCS#7 padding, as RFC 8216 section 4.3.2.4 prescribes."""
    decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    try:
        padded = decryptor.update(data) + decryptor.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError as error:
        raise HlsError("an HLS segment could not be decrypted (wrong key or IV?)") from error


def sequence_iv(sequence: int) -> bytes:
    """The IV of a segment whose key gives none: its media sequence number, big-endian."""
    return sequence.to_bytes(16, "big")


@dataclass(frozen=True)
class _Ready:
    """A stretch of TS ready to go out: one segment's time."""

    data: bytes
    duration: float
    target: float  # the playlist's target duration
    playing: str  # what the status says


@dataclass
class Fetched:
    """A segment as fetched and decrypted, with its init section (b"" for MPEG-TS)."""

    track: str  # "video" (the variant's own playlist) or "audio" (a separate rendition)
    init: bytes
    body: bytes
    duration: float
    discontinuity: bool


class _Track:
    """One media playlist followed from reload to reload: the variant's, or the separate audio
    rendition's. ``media`` counts the seconds of segments taken since the join."""

    def __init__(self, name: str, url: str, playlist: m3u8.M3U8) -> None:
        self.name = name
        self.url = url
        self.playlist = playlist
        self.queue: deque[tuple[int, m3u8.Segment, tuple[int, int] | None]] = deque()
        self.fresh_at = self.loaded_at = time.monotonic()
        self.media = 0.0
        self.missing = 0

    @property
    def target(self) -> float:
        return float(self.playlist.target_duration or 6)

    def new_segments(self, next_sequence: int | None, join_seconds: float | None) -> int:
        """Queue the segments from ``next_sequence`` on (the join point when None: ``join_seconds``
        of media before the end, or three segments there); the next sequence to queue after."""
        segments = self.playlist.segments
        first = self.playlist.media_sequence or 0
        last = first + len(segments) - 1
        if next_sequence is not None and next_sequence > last + 1:
            # The media sequence restarted (a new encoder): join afresh.
            logger.warning("hls: the media sequence went back to %d; joining afresh", last)
            next_sequence = None
        if next_sequence is None:
            next_sequence = self._join(first, join_seconds)
        elif next_sequence < first:
            logger.warning(
                "hls: segments %d-%d left the playlist before they were fetched",
                next_sequence,
                first - 1,
            )
            next_sequence = first
        ranges = byteranges(segments)
        for offset in range(next_sequence - first, len(segments)):
            self.queue.append((first + offset, segments[offset], ranges[offset]))
        if next_sequence <= last:
            self.fresh_at = time.monotonic()
        return last + 1

    def _join(self, first: int, join_seconds: float | None) -> int:
        segments = self.playlist.segments
        if self.playlist.is_endlist:
            return first
        if join_seconds is None:
            return first + max(0, len(segments) - LIVE_EDGE_SEGMENTS)
        behind = 0.0
        for offset in range(len(segments) - 1, -1, -1):
            behind += float(segments[offset].duration or 0)
            if behind >= join_seconds - 0.01:
                return first + offset
        return first

    def stalled(self, now: float) -> str | None:
        limit = STALL_TARGET_DURATIONS * self.target
        if now - self.fresh_at > limit:
            return f"the HLS playlist stalled: no new segment for {limit:g} s"
        return None


class HlsReader:
    """One channel's HLS upstream. Keeps its place across reconnects (:meth:`stream` is called
    once per connection attempt), so that no segment is fetched twice."""

    def __init__(self, *, max_bandwidth: int | None = None) -> None:
        self._max_bandwidth = max_bandwidth
        self._next: dict[str, int | None] = {"video": None, "audio": None}  # first not queued
        self._keys: dict[str, bytes] = {}
        self._inits: dict[tuple[str, tuple[int, int] | None], bytes] = {}
        self._remuxer = TsRemuxer()
        self.playing = ""

    def close(self) -> None:
        self._remuxer.close()

    async def stream(self, fetch: Fetch, url: str, first: Response) -> AsyncIterator[bytes]:
        """The upstream's TS bytes, from the playlist ``first`` (``url``, already fetched) on.

        Segments are fetched ahead (up to ``PREFETCH_SEGMENTS``, still one request at a time)
        while the ones before go out at the pace of their durations, so that a slow segment
        fetch does not starve the viewers."""
        ready: asyncio.Queue[_Ready | Exception | None] = asyncio.Queue(PREFETCH_SEGMENTS)
        producer = asyncio.create_task(self._produce(fetch, url, first, ready))
        pace: SegmentSpreader | None = None
        try:
            while (item := await ready.get()) is not None:
                if isinstance(item, Exception):
                    raise item
                self.playing = item.playing
                if pace is None:
                    # The segments behind the live edge that the join takes go out at once
                    # (the players' buffer); later ones spread over half their duration as
                    # they come, and slower when the reader runs ahead of the clock (a VOD
                    # playlist, or catching up after an outage).
                    lead = LIVE_EDGE_SEGMENTS * item.target + PACE_LEAD_SECONDS
                    pace = SegmentSpreader(lead=lead, burst=LIVE_EDGE_SEGMENTS)
                async for piece in pace.release(item.data, item.duration):
                    yield piece
        finally:
            await task_cancel(producer)

    async def _produce(self, fetch: Fetch, url: str, first: Response, ready: asyncio.Queue) -> None:
        """Follow the playlists and put each stretch of TS in ``ready``; then None at the end
        of a VOD playlist, or the error that stopped it."""
        try:
            await self._follow(fetch, url, first, ready)
        except Exception as error:  # handed to the reader, which raises it
            await ready.put(error)
        else:
            await ready.put(None)

    async def _follow(self, fetch: Fetch, url: str, first: Response, ready: asyncio.Queue) -> None:
        """Playlists are reloaded from the URL asked for, not the one redirected to, whose
        token may expire."""
        variant, audio_url = "", None
        playlist = _parse(first)
        if playlist.is_variant:
            chosen = variant_pick(playlist, self._max_bandwidth)
            variant, url = _variant_text(chosen), chosen.absolute_uri
            audio_url = _audio_rendition(chosen)
            playlist = _parse(await _fetch_ok(fetch, url, None, "playlist"))
        if playlist.is_variant:
            raise HlsError("the HLS variant is itself a master playlist")
        video = _Track("video", url, playlist)
        audio = None
        if audio_url is not None:
            listed = _parse(await _fetch_ok(fetch, audio_url, None, "playlist"))
            audio = _Track("audio", audio_url, listed)
        while True:
            joined = self._next["video"] is not None
            self._next["video"] = video.new_segments(self._next["video"], None)
            if audio is not None:
                behind = None if joined else sum(float(s[1].duration or 0) for s in video.queue)
                self._next["audio"] = audio.new_segments(self._next["audio"], behind)
            while video.queue:
                sequence, segment, byterange = video.queue.popleft()
                parts = await self._take(fetch, video, sequence, segment, byterange)
                if not parts:
                    continue
                while audio is not None and audio.queue and audio.media < video.media:
                    parts += await self._take(fetch, audio, *audio.queue.popleft())
                data = await self._to_ts(parts, sequence)
                playing = _playing_text(variant, data, parts[0].duration, sequence)
                duration = parts[0].duration or video.target
                await ready.put(_Ready(data, duration, video.target, playing))
            if video.playlist.is_endlist:
                return
            now = time.monotonic()
            for track in (video, audio):
                reason = track.stalled(now) if track is not None else None
                if reason:
                    raise HlsError(reason)
            # RFC 8216 6.3.4: wait a target duration after a load that changed the playlist,
            # half of one after a load that did not, counted from when that load began.
            changed = video.fresh_at >= video.loaded_at
            wait = (video.target if changed else video.target / 2) - (now - video.loaded_at)
            if wait > 0:
                await asyncio.sleep(wait)
            for track in (video, audio):
                if track is not None:
                    track.loaded_at = time.monotonic()
                    track.playlist = _parse(await _fetch_ok(fetch, track.url, None, "playlist"))

    async def _take(
        self,
        fetch: Fetch,
        track: _Track,
        sequence: int,
        segment: m3u8.Segment,
        byterange: tuple[int, int] | None,
    ) -> list[Fetched]:
        """The segment, or nothing when it is missing (404/410) and the track may skip it."""
        duration = float(segment.duration or 0)
        track.media += duration
        try:
            body = (await _fetch_ok(fetch, segment.absolute_uri, byterange, "segment")).body
        except MissingSegment as error:
            track.missing += 1
            logger.warning("hls: %s (segment %d skipped)", error, sequence)
            if track.missing >= MISSING_SEGMENTS_LIMIT:
                raise
            return []
        track.missing = 0
        body = await self._decrypted(fetch, segment.key, body, sequence)
        init = b""
        if segment.init_section is not None:
            init = await self._init(fetch, segment.init_section, segment.key)
        return [Fetched(track.name, init, body, duration, bool(segment.discontinuity))]

    async def _to_ts(self, parts: list[Fetched], sequence: int) -> bytes:
        """MPEG-TS as it came, or remuxed: fMP4, packed audio, or video with separate audio."""
        first = parts[0]
        if len(parts) == 1 and not first.init and first.body[:1] == b"\x47":
            if first.discontinuity:
                self._remuxer.close()
            return first.body
        try:
            return await asyncio.to_thread(
                self._remuxer.feed,
                [(part.track, part.init + part.body) for part in parts],
                discontinuity=first.discontinuity,
            )
        except RemuxError as error:
            raise HlsError(f"HLS segment {sequence}: {error}") from error

    async def _decrypted(self, fetch: Fetch, key, body: bytes, sequence: int) -> bytes:
        method = (key.method if key is not None else None) or "NONE"
        if method == "NONE":
            return body
        if method != "AES-128":
            raise HlsError(f"HLS encryption {method} is not supported (AES-128 only)")
        secret = self._keys.get(key.absolute_uri)
        if secret is None:
            secret = (await _fetch_ok(fetch, key.absolute_uri, None, "key")).body
            if len(secret) != 16:
                raise HlsError(f"the HLS key is {len(secret)} bytes long, not 16")
            self._keys[key.absolute_uri] = secret
        iv = int(key.iv, 16).to_bytes(16, "big") if key.iv else sequence_iv(sequence)
        return segment_decrypt(body, secret, iv)

    async def _init(self, fetch: Fetch, section, key) -> bytes:
        """The fMP4 init section, decrypted where it is: an AES-128 key listed before the map
        applies to it as well (RFC 8216 4.3.2.5, with the key's IV, which is then required). The
        parsed playlist does not keep that order, so a section that already opens with an MP4
        box is taken as clear."""
        byterange = byteranges([section])[0]
        cached = self._inits.get((section.absolute_uri, byterange))
        if cached is None:
            cached = (await _fetch_ok(fetch, section.absolute_uri, byterange, "init section")).body
            if key is not None and key.method == "AES-128" and not _opens_with_box(cached):
                if not key.iv:
                    raise HlsError("the encrypted HLS init section has no IV in its key")
                cached = await self._decrypted(fetch, key, cached, 0)
            self._inits[(section.absolute_uri, byterange)] = cached
        return cached


class SegmentSpreader:
    """Releases segments in slices of about ``SLICE_BYTES``, spread over ``SPREAD`` of their
    duration, and at most ``lead`` seconds of media ahead of the clock that started with the
    first byte. The first ``burst`` segments (the join's, the players' buffer) are not spread.

    Spreading makes a live HLS upstream look to the viewers' sockets like a TS one: each chunk
    is written before the next comes. A segment written at once costs the server a copy of it
    per viewer (Twisted joins what waits in a transport's buffer) and held the server of 2,000
    viewers at a full core. As ``SPREAD`` is under 1, a relay that fell behind (a late segment)
    catches up again; at a half, the last byte of a segment goes out at most half a segment
    after it came, well within the playlist's reload interval."""

    def __init__(self, *, lead: float, burst: int = 0) -> None:
        self._lead = lead
        self._burst = burst
        self._started: float | None = None
        self._media = 0.0  # seconds of media released so far
        self._segments = 0

    async def release(self, data: bytes, duration: float) -> AsyncIterator[bytes]:
        now = time.monotonic()
        if self._started is None:
            self._started = now
        spread = 0.0 if self._segments < self._burst else SPREAD * duration
        self._segments += 1
        slices = max(1, round(len(data) / SLICE_BYTES))
        packets = len(data) // TS_PACKET
        begin = 0  # the first slice not yet released
        while begin < slices:
            end = begin
            while (
                end < slices and self._due(now, spread, duration, end / slices) <= time.monotonic()
            ):
                end += 1
            if end == begin:
                await asyncio.sleep(
                    self._due(now, spread, duration, begin / slices) - time.monotonic()
                )
                continue
            if begin == 0 and end == slices:
                yield data
            else:
                first = packets * begin // slices * TS_PACKET
                last = len(data) if end == slices else packets * end // slices * TS_PACKET
                if last > first:
                    yield data[first:last]
            begin = end
        self._media += duration
        behind = time.monotonic() - (self._started + self._media)
        if behind > self._lead:
            self._started += behind - self._lead  # late: do not burst to catch up

    def _due(self, began: float, spread: float, duration: float, part: float) -> float:
        """When the slice ``part`` of the way into a segment whose release ``began`` may go."""
        return max(
            began + spread * part, self._started + self._media + duration * part - self._lead
        )


async def _fetch_ok(
    fetch: Fetch, url: str, byterange: tuple[int, int] | None, what: str
) -> Response:
    response = await fetch(url, byterange)
    if response.status in (200, 206):
        if byterange is not None and response.status == 200:
            offset, length = byterange
            response = Response(
                response.url, 206, response.content_type, response.body[offset : offset + length]
            )
        return response
    message = f"the HLS {what} answered HTTP {response.status}"
    if what == "segment" and response.status in (404, 410):
        raise MissingSegment(message)
    raise HlsError(message)


def _parse(response: Response) -> m3u8.M3U8:
    if len(response.body) > PLAYLIST_MAX_BYTES:
        raise HlsError("the HLS playlist is too large")
    text = response.body.decode("utf-8", errors="replace")
    if not text.lstrip("\ufeff \t\r\n").startswith("#EXTM3U"):
        raise HlsError("the HLS playlist does not start with #EXTM3U")
    try:
        playlist = m3u8.loads(text, uri=response.url)
    except Exception as error:  # the parser raises assorted errors on malformed input
        # the parser's words stay in the cause, for the log (failure_reasons.py)
        raise HlsError("the HLS playlist could not be parsed") from error
    return playlist


def byteranges(segments) -> list[tuple[int, int] | None]:
    """Every segment's ``EXT-X-BYTERANGE`` as (offset, length); a range without an offset
    follows the previous segment's range of the same resource."""
    ranges: list[tuple[int, int] | None] = []
    end, uri = 0, None
    for segment in segments:
        if not segment.byterange:
            ranges.append(None)
            end, uri = 0, None
            continue
        length, _, offset = segment.byterange.partition("@")
        start = int(offset) if offset else (end if segment.uri == uri else 0)
        ranges.append((start, int(length)))
        end, uri = start + int(length), segment.uri
    return ranges


def _opens_with_box(data: bytes) -> bool:
    """Whether ``data`` starts as an fMP4 init section does: with a box these open with."""
    return data[4:8] in (b"ftyp", b"styp", b"moov", b"sidx", b"free")


def _variant_text(variant: m3u8.Playlist) -> str:
    info = variant.stream_info
    size = f"{info.resolution[0]}x{info.resolution[1]}, " if info.resolution else ""
    rate = f"{info.bandwidth / 1e6:.1f} Mbit/s" if info.bandwidth else ""
    return f"{size}{rate}".rstrip(", ")


def _playing_text(variant: str, data: bytes, duration: float | None, sequence: int) -> str:
    described = variant
    if not described and duration:
        described = f"{len(data) * 8 / duration / 1e6:.1f} Mbit/s"
    parts = ["HLS", f"{described}," if described else "", f"segment {sequence:,}"]
    return " ".join(part for part in parts if part)
