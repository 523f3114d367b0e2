"""A TS upstream of real MPEG-TS, for the failover tests and benchmarks.

Every path serves the same clip, H.264 (Main profile) and AAC encoded once by the demo encoder,
unless it has a look of its own (:class:`Look`: its width, its profile, whether it has sound),
looped, and paced to real time by its bytes (``speed`` 1.0), so that the hub sees true PCRs,
PATs, PMTs and key frames. Each path's behaviour is set at run time
(:class:`Behaviour`), and :meth:`MediaUpstream.drop` closes the open connections of a path. The
origin records every connection, and whether an earlier one was still open when it came.

Three behaviours change the picture and nothing else (the picture checks' tests): ``FREEZE``
(a still picture the moving clip never shows), ``BLACK`` and ``CARD`` (a still card labelled
CARD); one changes the sound and nothing else (the silent-audio check's): ``SILENT``. The
stream goes on with the same PIDs and codecs, its timestamps going on from the last ones sent
(``restamp.py``), and the origin notes when the new clip's first byte left it
(:attr:`MediaUpstream.changed`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import time

from channels_admin.streaming.pattern_encoder import PatternOptions, pattern_chunks
from channels_admin.streaming.remux import MUX_OPTIONS
from channels_admin.streaming.restamp import Restamper
from loopback_fakes.ts_stream import Chunks, TsStream

WRITE_BYTES = 188 * 7 * 4
CLIP_OPTIONS = PatternOptions(width=320, height=180, fps=25, video_bitrate=400_000)
# Not the muxer's own PIDs (PMT 0x1000, streams from 0x100), which the slate of a switch has.
CLIP_PMT_PID, CLIP_VIDEO_PID, CLIP_AUDIO_PID = 0x1F00, 0x200, 0x201


class Behaviour(enum.Enum):
    PLAY = "play"  # the clip in a loop, in real time
    REFUSE = "refuse"  # HTTP 503
    STALL = "stall"  # connects, then sends nothing (the connection stays open)
    SLOW = "slow"  # the clip at ``slow_speed`` of real time
    FREEZE = "freeze"  # a still picture the clip never shows, in real time
    BLACK = "black"  # black pictures, in real time
    CARD = "card"  # a still card, in real time
    SILENT = "silent"  # the clip with digital silence for its sound, in real time


@dataclasses.dataclass(frozen=True)
class Look:
    """How a path's clip differs from the others: its width (16:9), its H.264 profile,
    whether it has sound, its picture and its sound (the pattern encoder's) and its label."""

    width: int = CLIP_OPTIONS.width
    profile: str = "main"
    audio: bool = True
    picture: str = "moving"
    sound: str = "beep"
    label: str = "SOURCE"


# What the behaviours that change the picture or the sound make of a path's look.
LOOK_CHANGES = {
    Behaviour.FREEZE: {"picture": "still"},
    Behaviour.BLACK: {"picture": "black"},
    Behaviour.CARD: {"picture": "still", "label": "CARD"},
    Behaviour.SILENT: {"sound": "silent"},
}


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
            picture=look.picture,
            sound=look.sound,
        ),
        realtime=False,
        max_seconds=seconds,
        label=look.label,
        mux_options={**MUX_OPTIONS, "mpegts_pmt_start_pid": str(CLIP_PMT_PID)},
        pids=(CLIP_VIDEO_PID, CLIP_AUDIO_PID),
    )
    return b"".join(chunks)


class MediaUpstream(TsStream):
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
        self.looks = looks
        self.clips = {path: clip(clip_seconds, look) for path, look in looks.items()}
        self.slow_speed = slow_speed
        self.behaviour: dict[str, Behaviour] = {}  # by path; PLAY when unset
        # by path: when the first byte of a clip a behaviour changed went out (monotonic)
        self.changed: dict[str, float] = {}
        super().__init__()

    def behave(self, path: str, behaviour: Behaviour) -> None:
        """Make ``path`` behave as ``behaviour`` from its next chunk on, its new clip encoded
        first: encoded on the way (seconds, under load), it stalled the stream as well."""
        self._media(path, behaviour)
        self.behaviour[path] = behaviour

    def _refused(self, path: str) -> bool:
        return self.behaviour.get(path, Behaviour.PLAY) is Behaviour.REFUSE

    def _media(self, path: str, behaviour: Behaviour) -> bytes:
        """The clip ``path`` plays while it behaves as ``behaviour``."""
        change = LOOK_CHANGES.get(behaviour)
        if change is None:
            return self.clips.get(path, self.clip)
        look = dataclasses.replace(self.looks.get(path, Look()), **change)
        return clip(self.clip_seconds, look)

    def _chunks(self, path: str) -> Chunks:
        restamp = Restamper()  # as it is until the picture changes, then on from the last
        media, sent, begun = b"", 0, False
        while True:
            behaviour = self.behaviour.get(path, Behaviour.PLAY)
            if behaviour is Behaviour.STALL:
                yield None, 0.0
                continue
            wanted = self._media(path, behaviour)
            if wanted is not media:
                if begun:  # the picture changes: from the new clip's start, a stream on
                    restamp.begin()
                    self.changed[path] = time.monotonic()
                media, sent = wanted, 0
            elif sent and sent % len(media) == 0 and behaviour in LOOK_CHANGES:
                restamp.begin()  # a changed clip's loop, its clock going on
            begun = True
            rate = len(media) / self.clip_seconds  # bytes per second of real time
            speed = self.slow_speed if behaviour is Behaviour.SLOW else 1.0
            at = sent % len(media)
            # ten writes a second at the least: slow is not silent
            size = min(WRITE_BYTES, max(188, int(rate * speed / 10) // 188 * 188))
            chunk = media[at : at + size]
            sent += len(chunk)
            yield restamp.feed(chunk), len(chunk) / (rate * speed)
