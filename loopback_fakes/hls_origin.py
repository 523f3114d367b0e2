"""A real HLS origin for tests and benchmarks: an HTTP/1.1 server on loopback serving segments
that FFmpeg's own HLS muxer (through PyAV) cut from a generated video.

Every video frame shows its index as a row of black and white blocks (:func:`frame_index`
reads it back), so a test can decode what a viewer received and check that the frames come in
order with nothing lost. Segment ``n`` holds frames ``n * FRAMES_PER_SEGMENT`` onwards.

Playlists (``{kind}`` is ``ts``, ``fmp4``, ``aes`` for AES-128 with the sequence-number IV,
``aes-iv`` for fMP4 under AES-128 with an explicit IV, its init section encrypted too (the key
comes before the map), ``sample-aes`` for a method the hub refuses,
``packed`` for audio alone as raw ADTS frames, ``slow`` for TS whose every answer comes in
four writes 20 ms apart):

- ``/{kind}/live.m3u8``: a live window of ``WINDOW`` segments that slides with the clock from
  segment ``LIVE_START``; :attr:`HlsOrigin.stall` freezes it.
- ``/ts/gap.m3u8``: VOD, with ``EXT-X-DISCONTINUITY`` where the timestamps jump back to 0.
- ``/range/vod.m3u8``: VOD (``EXT-X-ENDLIST``) of the first ``VOD_SEGMENTS`` segments, as
  byte ranges of one file.
- ``/master.m3u8``: variants of 0.5, 2 and 4 Mbit/s (``/v/{bandwidth}/live.m3u8``), the
  highest without video.
- ``/master-audio.m3u8``: one variant of video alone (``/video/live.m3u8``) whose audio is a
  rendition of its own (``/audio/live.m3u8``), cut apart from the same source.
- ``/redirect/live.m3u8``: a 302 to ``/slow/live.m3u8``.

Segments listed in :attr:`HlsOrigin.missing` answer 404. The origin records every request and
counts connections (those whose client has not closed them) and requests in flight, so tests
see what a provider would see.
"""

from __future__ import annotations

import http.server
import io
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from loopback_fakes.server import LoopbackServer, peer_closed

WIDTH, HEIGHT, FPS = 160, 96, 10
SEGMENT_SECONDS = 0.5
FRAMES_PER_SEGMENT = round(FPS * SEGMENT_SECONDS)
SEGMENTS = 48
WINDOW = 4
LIVE_START = 4  # the live window holds segments 0-3 when the origin starts
VOD_SEGMENTS = 4
BITS = 10  # a frame's index, as blocks of 16 x 16 pixels
KEY = bytes(range(16))
EXPLICIT_IV = bytes(range(100, 116))
BACKGROUND = (40, 90, 160)  # RGB around the index blocks


def frame_index(image: np.ndarray) -> int:
    """The index painted into a decoded frame (grey, HEIGHT x WIDTH)."""
    blocks = image[40:56, : BITS * 16].reshape(16, BITS, 16)[4:12, :, 4:12]
    bits = blocks.mean(axis=(0, 2)) > 128
    return int(sum(1 << bit for bit in range(BITS) if bits[bit]))


def _frame(index: int) -> np.ndarray:
    image = np.full((HEIGHT, WIDTH, 3), BACKGROUND, np.uint8)
    for bit in range(BITS):
        image[40:56, bit * 16 : (bit + 1) * 16] = 235 if index >> bit & 1 else 16
    return image


def media_write(folder: Path, segment_type: str, *, video: bool = True, audio: bool = True) -> None:
    """``SEGMENTS`` segments of video and AAC audio (or of one of them), cut by FFmpeg's HLS
    muxer."""
    folder.mkdir(parents=True, exist_ok=True)
    options = {
        "hls_time": str(SEGMENT_SECONDS),
        "hls_list_size": "0",
        "hls_playlist_type": "vod",
        "hls_segment_type": segment_type,
    }
    with av.open(str(folder / "index.m3u8"), "w", format="hls", options=options) as output:
        streams = []
        if video:
            pictures = output.add_stream("libx264", rate=FPS)
            pictures.width, pictures.height, pictures.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            gop = str(FRAMES_PER_SEGMENT)
            pictures.options = {
                "g": gop,
                "keyint_min": gop,
                "sc_threshold": "0",
                "preset": "ultrafast",
            }
            streams.append(pictures)
        if audio:
            sound = output.add_stream("aac", rate=48000)
            sound.layout = "mono"
            streams.append(sound)
        samples, audio_pts = 1024, 0
        for index in range(SEGMENTS * FRAMES_PER_SEGMENT):
            if video:
                frame = av.VideoFrame.from_ndarray(_frame(index), "rgb24")
                frame.pts, frame.time_base = index, Fraction(1, FPS)
                output.mux(pictures.encode(frame))
            while audio and audio_pts * FPS < (index + 1) * 48000:  # up to the frame's end
                tone = np.full((1, samples), 0.1 * (-1) ** (audio_pts // samples), np.float32)
                piece = av.AudioFrame.from_ndarray(tone, format="fltp", layout="mono")
                piece.sample_rate, piece.pts = 48000, audio_pts
                output.mux(sound.encode(piece))
                audio_pts += samples
        for stream in streams:
            output.mux(stream.encode(None))


def packed_audio(segment: bytes) -> bytes:
    """An audio-only TS segment's AAC frames as raw ADTS, as packed-audio HLS carries them
    (with no timestamps of their own: every segment starts at zero)."""
    target = io.BytesIO()
    with (
        av.open(io.BytesIO(segment), format="mpegts") as source,
        av.open(target, "w", format="adts") as output,
    ):
        stream = output.add_stream_from_template(source.streams.audio[0])
        for packet in source.demux(source.streams.audio[0]):
            if packet.size:
                packet.stream = stream
                output.mux(packet)
    return target.getvalue()


def encrypt(data: bytes, iv: bytes) -> bytes:
    padder = padding.PKCS7(128).padder()
    encryptor = Cipher(algorithms.AES(KEY), modes.CBC(iv)).encryptor()
    return encryptor.update(padder.update(data) + padder.finalize()) + encryptor.finalize()


MASTER_WITH_AUDIO = """#EXTM3U
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="Main",DEFAULT=YES,AUTOSELECT=YES,URI="audio/live.m3u8"
#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="Other",DEFAULT=NO,URI="other/live.m3u8"
#EXT-X-STREAM-INF:BANDWIDTH=600000,RESOLUTION=160x96,AUDIO="aud"
video/live.m3u8
"""


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    connection: int  # the client's port: one per TCP connection
    published: int  # how many segments the live playlists held then


class HlsOrigin:
    def __init__(self, folder: Path) -> None:
        self._folder = folder
        media_write(folder / "ts", "mpegts")
        media_write(folder / "fmp4", "fmp4")
        media_write(folder / "video", "mpegts", audio=False)
        media_write(folder / "audio", "mpegts", video=False)
        self._media = {
            kind: [(folder / kind / f"index{n}.ts").read_bytes() for n in range(SEGMENTS)]
            for kind in ("ts", "video", "audio")
        }
        self._media["packed"] = [packed_audio(segment) for segment in self._media["audio"]]
        self._ts = self._media["ts"]
        self._joined = b"".join(self._ts[:VOD_SEGMENTS])
        self.requests: list[Request] = []
        self.missing: set[int] = set()
        self.stall = False
        self.in_flight = self.max_in_flight = 0
        self.open_connections = self.max_open_connections = 0
        self._sockets: list = []
        self._started = time.monotonic()
        self._frozen: int | None = None
        self._lock = threading.Lock()
        self._server = LoopbackServer(
            self._serve,
            keep_alive=True,
            opened=self._connection_opened,
            closed=self._connection_closed,
        )

    def url(self, path: str) -> str:
        return self._server.url(path)

    def restart(self) -> None:
        """A fresh live clock and record, nothing missing or stalled."""
        with self._lock:
            self.requests.clear()
            self.missing.clear()
            self.stall = False
            self._frozen = None
            self.max_in_flight = self.in_flight
            self.max_open_connections = self.open_connections
            self._started = time.monotonic()

    def segment(self, number: int) -> bytes:
        """The MPEG-TS segment ``number`` as served."""
        return self._ts[number]

    def published_at(self, number: int) -> float:
        """When (monotonic) the live playlists first listed segment ``number``."""
        return self._started + max(0, number + 1 - LIVE_START) * SEGMENT_SECONDS

    def fetched(self, suffix: str) -> list[str]:
        """The paths requested that end with ``suffix``, in order."""
        return [r.path for r in self.requests if r.path.endswith(suffix)]

    def close(self) -> None:
        self._server.close()

    def _connection_opened(self, sock) -> None:
        """Count the connections open now: the earlier ones whose client has not closed its
        side (a handler thread may notice a close a moment late), and this one."""
        with self._lock:
            self._sockets = [c for c in self._sockets if not peer_closed(c)] + [sock]
            self.open_connections = len(self._sockets)
            self.max_open_connections = max(self.max_open_connections, self.open_connections)

    def _connection_closed(self, sock) -> None:
        with self._lock:
            self._sockets = [c for c in self._sockets if c is not sock]
            self.open_connections = len(self._sockets)

    def _available(self) -> int:
        """How many segments the live playlist has published by now."""
        if self.stall and self._frozen is None:
            self._frozen = self._published()
        return self._frozen if self.stall else self._published()

    def _published(self) -> int:
        elapsed = time.monotonic() - self._started
        return min(SEGMENTS, LIVE_START + int(elapsed / SEGMENT_SECONDS))

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests.append(
                Request(
                    handler.path,
                    dict(handler.headers.items()),
                    handler.client_address[1],
                    self._available(),
                )
            )
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            status, content_type, body, headers = self._answer(handler)
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            pieces = 4 if handler.path.startswith("/slow/") else 1
            for piece in range(pieces):  # a slow origin's body comes in several reads
                handler.wfile.write(
                    body[len(body) * piece // pieces : len(body) * (piece + 1) // pieces]
                )
                handler.wfile.flush()
                if piece < pieces - 1:
                    time.sleep(0.02)
        except OSError:
            pass
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, handler) -> tuple[int, str, bytes, dict[str, str]]:
        path = handler.path.split("?")[0]
        parts = path.strip("/").split("/")
        playlist = "application/vnd.apple.mpegurl"
        if path == "/master.m3u8":
            return 200, playlist, self._master().encode(), {}
        if path == "/master-audio.m3u8":
            return 200, playlist, MASTER_WITH_AUDIO.encode(), {}
        if path == "/redirect/live.m3u8":
            return 302, "text/plain", b"", {"Location": self.url("/slow/live.m3u8")}
        if path == "/key.bin":
            return 200, "application/octet-stream", KEY, {}
        if path == "/range/all.ts":
            return self._ranged(handler, self._joined)
        if path in ("/fmp4/init.mp4", "/aes-iv/init.mp4"):
            data = (self._folder / "fmp4" / "init.mp4").read_bytes()
            return 200, "video/mp4", encrypt(data, EXPLICIT_IV) if "aes" in path else data, {}
        if len(parts) >= 2 and parts[-1].endswith(".m3u8"):
            kind = "v" if parts[0] == "v" else parts[0]
            text = self._playlist(kind, parts[-1])
            return (200, playlist, text.encode(), {}) if text else (404, "text/plain", b"", {})
        if len(parts) >= 2 and parts[-1].startswith("segment"):
            return self._segment(parts[0], parts[-1])
        return 404, "text/plain", b"", {}

    def _master(self) -> str:
        lines = ["#EXTM3U"]
        for bandwidth, extra in (
            (500_000, ',RESOLUTION=160x96,CODECS="avc1.42c00c,mp4a.40.2"'),
            (2_000_000, ",RESOLUTION=160x96"),
            (4_000_000, ',CODECS="mp4a.40.2"'),
        ):
            lines += [f"#EXT-X-STREAM-INF:BANDWIDTH={bandwidth}{extra}", f"v/{bandwidth}/live.m3u8"]
        return "\n".join(lines) + "\n"

    def _playlist(self, kind: str, name: str) -> str | None:
        head = ["#EXTM3U", "#EXT-X-VERSION:7", "#EXT-X-TARGETDURATION:1"]
        extension = {"fmp4": "m4s", "aes-iv": "m4s", "packed": "aac"}.get(kind, "ts")
        if kind == "aes":
            head.append('#EXT-X-KEY:METHOD=AES-128,URI="/key.bin"')
        if kind == "aes-iv":
            head.append(f'#EXT-X-KEY:METHOD=AES-128,URI="/key.bin",IV=0x{EXPLICIT_IV.hex()}')
        if kind in ("fmp4", "aes-iv"):
            head.append('#EXT-X-MAP:URI="init.mp4"')
        if kind == "sample-aes":
            head.append('#EXT-X-KEY:METHOD=SAMPLE-AES,URI="/key.bin"')
        if kind == "range" and name == "vod.m3u8":
            lines = [*head, "#EXT-X-MEDIA-SEQUENCE:0"]
            for n, data in enumerate(self._ts[:VOD_SEGMENTS]):
                offset = "" if n else "@0"
                lines += [f"#EXTINF:{SEGMENT_SECONDS},", f"#EXT-X-BYTERANGE:{len(data)}{offset}"]
                lines.append("all.ts")
            return "\n".join([*lines, "#EXT-X-ENDLIST"]) + "\n"
        if kind == "ts" and name == "gap.m3u8":
            lines = [*head, "#EXT-X-MEDIA-SEQUENCE:0"]
            for n in range(2 * VOD_SEGMENTS):
                if n == VOD_SEGMENTS:
                    lines.append("#EXT-X-DISCONTINUITY")
                lines += [f"#EXTINF:{SEGMENT_SECONDS},", f"segment{n % VOD_SEGMENTS}.ts"]
            return "\n".join([*lines, "#EXT-X-ENDLIST"]) + "\n"
        if name != "live.m3u8":
            return None
        end = self._available()
        first = max(0, end - WINDOW)
        lines = [*head, f"#EXT-X-MEDIA-SEQUENCE:{first}"]
        for n in range(first, end):
            lines += [f"#EXTINF:{SEGMENT_SECONDS},", f"segment{n}.{extension}"]
        return "\n".join(lines) + "\n"

    def _segment(self, kind: str, name: str) -> tuple[int, str, bytes, dict[str, str]]:
        number = int(name.removeprefix("segment").split(".")[0])
        if number in self.missing or not 0 <= number < SEGMENTS:
            return 404, "text/plain", b"", {}
        if kind in ("fmp4", "aes-iv"):
            data = (self._folder / "fmp4" / f"index{number}.m4s").read_bytes()
            data = encrypt(data, EXPLICIT_IV) if kind == "aes-iv" else data
            return 200, "video/iso.segment", data, {}
        data = self._media.get(kind, self._ts)[number]
        if kind == "aes":
            data = encrypt(data, number.to_bytes(16, "big"))
        elif kind == "sample-aes":
            data = encrypt(data, EXPLICIT_IV)
        return 200, "video/mp2t", data, {}

    @staticmethod
    def _ranged(handler, data: bytes) -> tuple[int, str, bytes, dict[str, str]]:
        wanted = handler.headers.get("Range", "")
        if not wanted.startswith("bytes="):
            return 200, "video/mp2t", data, {}
        first, _, last = wanted.removeprefix("bytes=").partition("-")
        start, end = int(first), min(int(last), len(data) - 1)
        headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}"}
        return 206, "video/mp2t", data[start : end + 1], headers
