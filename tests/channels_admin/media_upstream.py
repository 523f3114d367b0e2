"""A real IPTV origin for the failover tests and benchmarks: loopback HTTP serving real MPEG-TS.

Every path serves the same clip, H.264 (Main profile) and AAC encoded once by the demo encoder,
unless it has a look of its own (:class:`Look`: its width, its profile, whether it has sound),
looped, and paced to real time by its bytes (``speed`` 1.0), so that the hub sees true PCRs,
PATs, PMTs and key frames. Each path's behaviour is set at run time
(:class:`Behaviour`), and :meth:`MediaUpstream.drop` closes the open connections of a path. The
origin records every connection, and whether an earlier one was still open when it came.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import http.server
import threading
import time

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.remux import MUX_OPTIONS
from tests.channels_admin.upstream import Connection, peer_closed

WRITE_BYTES = 188 * 7 * 4
CLIP_OPTIONS = PatternOptions(width=320, height=180, fps=25, video_bitrate=400_000)
# Not the muxer's own PIDs (PMT 0x1000, streams from 0x100), which the slate of a switch has.
CLIP_PMT_PID, CLIP_VIDEO_PID, CLIP_AUDIO_PID = 0x1F00, 0x200, 0x201


class Behaviour(enum.Enum):
    PLAY = "play"  # the clip in a loop, in real time
    REFUSE = "refuse"  # HTTP 503
    STALL = "stall"  # connects, then sends nothing (the connection stays open)
    SLOW = "slow"  # the clip at ``slow_speed`` of real time


@dataclasses.dataclass(frozen=True)
class Look:
    """How a path's clip differs from the others: its width (16:9), its H.264 profile, and
    whether it has sound."""

    width: int = CLIP_OPTIONS.width
    profile: str = "main"
    audio: bool = True


@functools.cache
def clip(seconds: float = 12.0, look: Look = Look()) -> bytes:
    """``seconds`` of the demo pattern as MPEG-TS, as ``look`` says, encoded once per process."""
    height = round(look.width * 9 / 16 / 2) * 2
    chunks = pattern_chunks(
        dataclasses.replace(
            CLIP_OPTIONS,
            width=look.width,
            height=height,
            profile=look.profile,
            audio=look.audio,
        ),
        realtime=False,
        max_seconds=seconds,
        label="SOURCE",
        mux_options={**MUX_OPTIONS, "mpegts_pmt_start_pid": str(CLIP_PMT_PID)},
        pids=(CLIP_VIDEO_PID, CLIP_AUDIO_PID),
    )
    return b"".join(chunks)


class MediaUpstream:
    def __init__(
        self,
        *,
        clip_seconds: float = 12.0,
        slow_speed: float = 0.1,
        widths: dict[str, int] | None = None,
        looks: dict[str, Look] | None = None,
    ) -> None:
        self.clip = clip(clip_seconds)
        self.clip_seconds = clip_seconds
        # a path of its own width, so that a client can tell whose pictures it shows
        looks = {
            **{path: Look(width=width) for path, width in (widths or {}).items()},
            **(looks or {}),
        }
        self.clips = {path: clip(clip_seconds, look) for path, look in looks.items()}
        self.slow_speed = slow_speed
        self.behaviour: dict[str, Behaviour] = {}  # by path; PLAY when unset
        self.connections: list[Connection] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._dropped: dict[str, int] = {}
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                origin._serve(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self._server.server_port}{path}"

    def of(self, path: str) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.path == path]

    @property
    def open_connections(self) -> list[Connection]:
        with self._lock:
            return [c for c in self.connections if c.closed is None]

    def drop(self, path: str) -> None:
        """Close the open connections of ``path`` (its behaviour decides the next ones)."""
        with self._lock:
            self._dropped[path] = self._dropped.get(path, 0) + 1

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def _serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        path = handler.path
        connection = Connection(
            path=path,
            headers=dict(handler.headers.items()),
            opened=time.monotonic(),
            sock=handler.connection,
        )
        with self._lock:
            earlier = [c for c in self.connections if c.closed is None]
            connection.overlapping = sum(not peer_closed(c.sock) for c in earlier)
            self.connections.append(connection)
            dropped = self._dropped.get(path, 0)
        try:
            if self.behaviour.get(path, Behaviour.PLAY) is Behaviour.REFUSE:
                handler.send_error(503, "refused by test")
                return
            handler.send_response(200)
            handler.send_header("Content-Type", "video/mp2t")
            handler.end_headers()
            self._stream(handler, connection, path, dropped)
        except OSError:
            pass
        finally:
            connection.closed = time.monotonic()

    def _stream(
        self,
        handler: http.server.BaseHTTPRequestHandler,
        connection: Connection,
        path: str,
        dropped: int,
    ) -> None:
        media = self.clips.get(path, self.clip)
        rate = len(media) / self.clip_seconds  # bytes per second of real time
        sent, due = 0, time.monotonic()
        while not self._stopping.is_set() and self._dropped.get(path, 0) == dropped:
            if peer_closed(handler.connection):
                return
            behaviour = self.behaviour.get(path, Behaviour.PLAY)
            if behaviour is Behaviour.STALL:
                time.sleep(0.01)
                due = time.monotonic()
                continue
            speed = self.slow_speed if behaviour is Behaviour.SLOW else 1.0
            at = sent % len(media)
            # ten writes a second at the least: slow is not silent
            size = min(WRITE_BYTES, max(188, int(rate * speed / 10) // 188 * 188))
            chunk = media[at : at + size]
            handler.wfile.write(chunk)
            sent += len(chunk)
            connection.bytes_sent += len(chunk)
            # paced from the last write, so that a change of speed takes effect at once
            due = max(due, time.monotonic() - 0.5) + len(chunk) / (rate * speed)
            time.sleep(max(0.0, due - time.monotonic()))
