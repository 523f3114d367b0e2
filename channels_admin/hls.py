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
- MPEG-TS segments pass through as they are; fMP4 segments (``EXT-X-MAP``) and packed audio are
  remuxed (:mod:`~channels_admin.remux`). ``EXT-X-BYTERANGE`` ranges are requested as such.
- ``EXT-X-KEY METHOD=AES-128`` segments are decrypted (explicit IV, or the media sequence
  number); other methods are refused with the reason.
- Segments are released at the pace of their durations, at most a target duration ahead of
  real time, so viewers get a steady stream instead of a segment-sized burst.

:attr:`HlsReader.playing` says what is playing, for the status.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import m3u8
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels_admin.remux import RemuxError, TsRemuxer

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
RELEASE_SLICE_SECONDS = 0.1  # a segment's bytes go out in slices of about this much media
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


class HlsReader:
    """One channel's HLS upstream. Keeps its place across reconnects (:meth:`stream` is called
    once per connection attempt), so that no segment is fetched twice."""

    def __init__(self, *, max_bandwidth: int | None = None) -> None:
        self._max_bandwidth = max_bandwidth
        self._next_sequence: int | None = None  # the first segment not yet fetched
        self._keys: dict[str, bytes] = {}
        self._inits: dict[tuple[str, tuple[int, int] | None], bytes] = {}
        self._remuxer = TsRemuxer()
        self.playing = ""

    def close(self) -> None:
        self._remuxer.close()

    async def stream(self, fetch: Fetch, url: str, first: Response) -> AsyncIterator[bytes]:
        """The upstream's TS bytes, from the playlist ``first`` (``url``, already fetched) on.
        Playlists are reloaded from the URL asked for, not the one redirected to, whose token
        may expire."""
        variant = ""
        playlist = _parse(first)
        if playlist.is_variant:
            chosen = variant_pick(playlist, self._max_bandwidth)
            variant, url = _variant_text(chosen), chosen.absolute_uri
            playlist = _parse(await _fetch_ok(fetch, url, None, "playlist"))
        if playlist.is_variant:
            raise HlsError("the HLS variant is itself a master playlist")
        pace = _Pacer(lead=float(playlist.target_duration or 6))
        fresh_at = time.monotonic()
        loaded_at = fresh_at
        missing = 0
        while True:
            target = float(playlist.target_duration or 6)
            segments = playlist.segments
            first_sequence = playlist.media_sequence or 0
            last_sequence = first_sequence + len(segments) - 1
            start = self._start_sequence(playlist, first_sequence, last_sequence)
            ranges = byteranges(segments)
            new = False
            for offset, segment in enumerate(segments):
                sequence = first_sequence + offset
                if sequence < start:
                    continue
                new = True
                self._next_sequence = sequence + 1
                try:
                    data = await self._segment(fetch, segment, ranges[offset], sequence)
                except MissingSegment as error:
                    missing += 1
                    logger.warning("hls: %s (segment %d skipped)", error, sequence)
                    if missing >= MISSING_SEGMENTS_LIMIT:
                        raise
                    continue
                missing = 0
                self.playing = _playing_text(variant, data, segment.duration, sequence)
                async for piece in pace.release(data, float(segment.duration or target)):
                    yield piece
            now = time.monotonic()
            if new:
                fresh_at = now
            if playlist.is_endlist:
                return
            limit = STALL_TARGET_DURATIONS * target
            if now - fresh_at > limit:
                raise HlsError(f"the HLS playlist stalled: no new segment for {limit:g} s")
            # RFC 8216 6.3.4: wait a target duration after a load that changed the playlist,
            # half of one after a load that did not, counted from when that load began.
            wait = (target if new else target / 2) - (now - loaded_at)
            if wait > 0:
                await asyncio.sleep(wait)
            loaded_at = time.monotonic()
            playlist = _parse(await _fetch_ok(fetch, url, None, "playlist"))

    def _start_sequence(self, playlist: m3u8.M3U8, first: int, last: int) -> int:
        if self._next_sequence is None or self._next_sequence > last + 1:
            # The first load, or the media sequence restarted (a new encoder): join afresh.
            if self._next_sequence is not None:
                logger.warning("hls: the media sequence went back to %d; joining afresh", last)
            if playlist.is_endlist:
                return first
            return max(first, last + 1 - LIVE_EDGE_SEGMENTS)
        if self._next_sequence < first:
            logger.warning(
                "hls: segments %d-%d left the playlist before they were fetched",
                self._next_sequence,
                first - 1,
            )
            return first
        return self._next_sequence

    async def _segment(
        self, fetch: Fetch, segment, byterange: tuple[int, int] | None, sequence: int
    ) -> bytes:
        body = (await _fetch_ok(fetch, segment.absolute_uri, byterange, "segment")).body
        body = await self._decrypted(fetch, segment.key, body, sequence)
        init = b""
        if segment.init_section is not None:
            init = await self._init(fetch, segment.init_section)
        if not init and body[:1] == b"\x47":
            if segment.discontinuity:
                self._remuxer.close()
            return body
        try:
            return await asyncio.to_thread(
                self._remuxer.feed, init, body, discontinuity=segment.discontinuity
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
        iv = bytes.fromhex(key.iv[2:]).rjust(16, b"\0") if key.iv else sequence_iv(sequence)
        return segment_decrypt(body, secret, iv)

    async def _init(self, fetch: Fetch, section) -> bytes:
        byterange = byteranges([section])[0]
        cached = self._inits.get((section.absolute_uri, byterange))
        if cached is None:
            cached = (await _fetch_ok(fetch, section.absolute_uri, byterange, "init section")).body
            self._inits[(section.absolute_uri, byterange)] = cached
        return cached


class _Pacer:
    """Releases media at the pace of its duration, at most ``lead`` seconds ahead of the clock
    that started with the first byte; late media goes out at once."""

    def __init__(self, *, lead: float) -> None:
        self._lead = lead
        self._started: float | None = None
        self._media = 0.0  # seconds of media released so far

    async def release(self, data: bytes, duration: float) -> AsyncIterator[bytes]:
        if self._started is None:
            self._started = time.monotonic()
        slices = max(1, round(duration / RELEASE_SLICE_SECONDS))
        packets = len(data) // 188
        for index in range(slices):
            begin, end = packets * index // slices, packets * (index + 1) // slices
            due = self._started + self._media + duration * index / slices - self._lead
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if end > begin:
                yield data[begin * 188 : end * 188]
        tail = data[packets * 188 :]
        if tail:
            yield tail
        self._media += duration
        behind = time.monotonic() - (self._started + self._media)
        if behind > self._lead:
            self._started += behind - self._lead  # late: do not burst to catch up


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
        raise HlsError(f"the HLS playlist could not be parsed: {error}") from error
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
