"""A live MPEG-TS test pattern encoded in-process: the demo channels' streams, and the picture of
the slate (``slate.py``) that plays while no source of a channel does.

The demo channels must work with no internet, so the server produces its own upstream:
SMPTE-style colour bars, a box that sweeps across a strip below them on every frame, the
running time as big digits and a small label, encoded as H.264 (plus an optional quiet
AAC beep once per second) in MPEG-TS, which the fan-out hub pulls like any IPTV source
and browsers play through mpegts.js.

Frames are painted straight into YUV 4:2:0 planes with numpy: only the luma of the strip
and the text band changes from frame to frame, so chroma and the bars are computed once.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import av
import numpy as np
from av.video.reformatter import ColorPrimaries, ColorRange, ColorTrc

from channels_admin.streaming.remux import MUX_OPTIONS, PacketSink

AUDIO_SAMPLE_RATE = 48_000
AUDIO_BITRATE = 64_000
AAC_FRAME_SAMPLES = 1024  # fixed by AAC-LC; the encoder rejects other frame sizes
# A consumer that stalls longer than this gets a fresh clock instead of a catch-up burst.
MAX_CATCH_UP_SECONDS = 1.0

AVCOL_SPC_SMPTE170M = 6  # libavutil/pixfmt.h: BT.601 matrix, 525-line tagging

BEEP_HZ = 1_000.0
BEEP_SECONDS = 0.1
# -20 dBFS: audible enough to confirm the audio path, quiet enough not to startle.
BEEP_AMPLITUDE = 0.1
BEEP_RAMP_SECONDS = 0.005


PICTURES = ("moving", "still", "black")
SOUNDS = ("beep", "silent")


@dataclass(frozen=True)
class PatternOptions:
    """What the generated stream looks like; the defaults suit a browser demo channel."""

    width: int = 640
    height: int = 360
    fps: int = 25
    video_bitrate: int = 800_000  # bits/s
    audio: bool = True  # a quiet 1 kHz beep at the start of every second, 48 kHz mono AAC
    gop_seconds: float = 1.0  # keyframe interval: a player joining mid-stream starts within ~1 s
    profile: str = "main"  # x264's H.264 profile: "baseline", "main" or "high"
    # "moving": the pattern as described; "still": its bars and label alone, without the box
    # or the running time, over and over (a frozen source, for the picture checks' tests: a
    # picture no moving frame shows, so that a freeze starts when it is sent); "black": black
    # frames. The stream goes on alike.
    picture: str = "moving"
    # "beep": the beep as described; "silent": digital silence, the stream otherwise alike (a
    # source whose sound died, for the silent-audio check's tests).
    sound: str = "beep"

    def __post_init__(self) -> None:
        # 4:2:0 chroma halves both dimensions, so odd sizes cannot be encoded exactly.
        if self.width < 32 or self.height < 32 or self.width % 2 or self.height % 2:
            raise ValueError(
                f"width and height must be even and at least 32, got {self.width}x{self.height}"
            )
        if not 1 <= self.fps <= 120:
            raise ValueError(f"fps must be between 1 and 120, got {self.fps}")
        if self.video_bitrate <= 0 or self.gop_seconds <= 0:
            raise ValueError("video_bitrate and gop_seconds must be positive")
        if self.picture not in PICTURES:
            raise ValueError(f"picture must be one of {', '.join(PICTURES)}, got {self.picture!r}")
        if self.sound not in SOUNDS:
            raise ValueError(f"sound must be one of {', '.join(SOUNDS)}, got {self.sound!r}")

    @property
    def gop_frames(self) -> int:
        return max(1, round(self.gop_seconds * self.fps))


def pattern_chunks(
    options: PatternOptions = PatternOptions(),  # frozen, so one shared default is safe
    *,
    realtime: bool = True,
    max_seconds: float | None = None,
    label: str = "demo",
    mux_options: Mapping[str, str] = MUX_OPTIONS,
    pids: tuple[int | None, int | None] = (None, None),
) -> Iterator[bytes]:
    """Yield MPEG-TS bytes of a live test pattern, each chunk a whole number of 188-byte packets.

    One chunk follows each encoded frame (frames the muxer is still holding yield nothing).
    With ``realtime`` frame N is released at start + N/fps by the wall clock; otherwise as
    fast as the encoder goes. ``max_seconds`` ends the stream after that much stream time
    (rounded up to whole frames); None runs forever. ``mux_options`` are FFmpeg's MPEG-TS muxer
    options; ``pids``: the video's and the audio's PIDs (None: the muxer's choice). Closing
    the generator early releases the encoder and the muxer.
    """
    if max_seconds is not None and max_seconds < 0:
        raise ValueError(f"max_seconds must not be negative, got {max_seconds}")
    total_frames = None if max_seconds is None else math.ceil(max_seconds * options.fps - 1e-9)
    painter = _Painter(options, label)
    sink = PacketSink()
    container = av.open(sink, "w", format="mpegts", container_options=dict(mux_options))
    try:
        video = container.add_stream(
            "libx264",
            rate=options.fps,
            width=options.width,
            height=options.height,
            pix_fmt="yuv420p",
            bit_rate=options.video_bitrate,
            options=_x264_options(options),
        )
        _tag_bt601(video.codec_context)
        beeps = _BeepTrack(container, silent=options.sound == "silent") if options.audio else None
        # FFmpeg's muxer takes a stream's id of 16 or more as its PID
        for stream, pid in zip((video, beeps and beeps.stream), pids, strict=True):
            if stream is not None and pid is not None:
                stream.id = pid

        clock_start = time.monotonic()
        index = 0
        while total_frames is None or index < total_frames:
            frame = av.VideoFrame.from_ndarray(painter.paint(index), format="yuv420p")
            frame.pts = index
            container.mux(video.encode(frame))
            if beeps is not None:
                # Audio up to the end of this frame, so the muxer can interleave at once.
                container.mux(beeps.encode_until((index + 1) * AUDIO_SAMPLE_RATE // options.fps))
            if realtime:
                due = clock_start + index / options.fps
                lag = time.monotonic() - due
                if lag < 0:
                    time.sleep(-lag)
                elif lag > MAX_CATCH_UP_SECONDS:
                    clock_start += lag
            chunk = sink.take()
            if chunk:
                yield chunk
            index += 1

        container.mux(video.encode(None))
        if beeps is not None:
            container.mux(beeps.stream.encode(None))
        container.close()
        chunk = sink.take()
        if chunk:
            yield chunk
    finally:
        # Idempotent: after a normal end this is a no-op; after an early close it frees the
        # encoders (and their threads) instead of waiting for garbage collection.
        container.close()


def _x264_options(options: PatternOptions) -> dict[str, str]:
    gop = options.gop_frames
    kbps = max(1, options.video_bitrate // 1000)
    return {
        # veryfast over ultrafast: keeps CABAC (main profile) for a sharper picture at the
        # same bitrate and still encodes this content many times faster than real time.
        "preset": "veryfast",
        # No B-frames or lookahead: a frame leaves the encoder as soon as it is painted.
        "tune": "zerolatency",
        "profile": options.profile,
        # A fixed cadence of IDR frames: scene-cut detection would add unplanned ones.
        "x264-params": (
            f"keyint={gop}:min-keyint={gop}:scenecut=0:vbv-maxrate={kbps}:vbv-bufsize={kbps}"
        ),
        # The demo channel shares a small server with everything else.
        "threads": "1",
    }


def _tag_bt601(context: av.VideoCodecContext) -> None:
    # The planes are painted with BT.601 limited-range maths; say so in the bitstream so
    # browsers do not guess BT.709 and shift the bar colours.
    # PyAV's Colorspace enum holds swscale's SWS_CS_* numbers, not FFmpeg's AVColorSpace
    # that this field takes, so the AVColorSpace value is spelt out.
    context.colorspace = AVCOL_SPC_SMPTE170M
    context.color_range = ColorRange.MPEG
    context.color_primaries = ColorPrimaries.SMPTE170M
    context.color_trc = ColorTrc.SMPTE170M


class _BeepTrack:
    """The audio stream: one precomputed second (a short beep, then silence) on a loop; with
    ``silent``, the second is all silence."""

    def __init__(self, container: av.container.OutputContainer, *, silent: bool = False) -> None:
        self.stream = container.add_stream(
            "aac", rate=AUDIO_SAMPLE_RATE, layout="mono", bit_rate=AUDIO_BITRATE
        )
        t = np.arange(AUDIO_SAMPLE_RATE, dtype=np.float64) / AUDIO_SAMPLE_RATE
        envelope = (t < BEEP_SECONDS).astype(np.float64)
        # Raised-cosine edges: a hard-gated sine clicks.
        ramp = int(BEEP_RAMP_SECONDS * AUDIO_SAMPLE_RATE)
        fade = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, ramp))
        beep_end = int(BEEP_SECONDS * AUDIO_SAMPLE_RATE)
        envelope[:ramp] = fade
        envelope[beep_end - ramp : beep_end] = fade[::-1]
        wave = (0.0 if silent else BEEP_AMPLITUDE) * envelope * np.sin(2 * np.pi * BEEP_HZ * t)
        self._second = wave.astype(np.float32)
        self._sent = 0

    def encode_until(self, samples_due: int) -> list[av.Packet]:
        """Encode the loop up to sample ``samples_due`` (in whole AAC frames)."""
        packets: list[av.Packet] = []
        while self._sent < samples_due:
            positions = np.arange(self._sent, self._sent + AAC_FRAME_SAMPLES) % AUDIO_SAMPLE_RATE
            frame = av.AudioFrame.from_ndarray(
                self._second[positions][np.newaxis, :], format="fltp", layout="mono"
            )
            frame.sample_rate = AUDIO_SAMPLE_RATE
            frame.pts = self._sent
            packets.extend(self.stream.encode(frame))
            self._sent += AAC_FRAME_SAMPLES
        return packets


# 75% colour bars, left to right: white, yellow, cyan, green, magenta, red, blue.
BAR_COLOURS_RGB = (
    (191, 191, 191),
    (191, 191, 0),
    (0, 191, 191),
    (0, 191, 0),
    (191, 0, 191),
    (191, 0, 0),
    (0, 0, 191),
)
BARS_FRACTION = 0.6  # of the height, from the top
STRIP_FRACTION = 0.09  # the sweeping box runs in this strip just below the bars
LUMA_BLACK = 16
LUMA_WHITE = 235
CHROMA_NEUTRAL = 128


def rgb_to_yuv601(red: int, green: int, blue: int) -> tuple[int, int, int]:
    """BT.601 limited-range Y'CbCr of an 8-bit R'G'B' colour, as the decoder will invert it."""
    r, g, b = red / 255, green / 255, blue / 255
    y = 16 + 65.481 * r + 128.553 * g + 24.966 * b
    cb = 128 - 37.797 * r - 74.203 * g + 112.0 * b
    cr = 128 + 112.0 * r - 93.786 * g - 18.214 * b
    return round(y), round(cb), round(cr)


def _even(value: float) -> int:
    return int(value) // 2 * 2


class _Painter:
    """Paints frame N as one (height * 3/2, width) uint8 array: the Y, U and V planes of
    yuv420p stacked the way ``VideoFrame.from_ndarray`` expects them."""

    def __init__(self, options: PatternOptions, label: str) -> None:
        width, height = options.width, options.height
        self._fps = options.fps
        self._picture = options.picture
        self._width = width
        self._height = height
        self._bars_bottom = max(2, _even(height * BARS_FRACTION))
        self._strip_bottom = self._bars_bottom + max(2, _even(height * STRIP_FRACTION))
        margin = max(2, _even(height * 0.02))
        self._strip_top = self._bars_bottom + margin // 2
        strip_end = self._strip_bottom - margin // 2
        self._box_width = max(4, _even(width / 16))
        self._box_rows = slice(self._strip_top, max(self._strip_top + 1, strip_end))
        # Whole sweep in about two seconds; at least 2 px so every frame differs.
        self._box_step = max(2, _even(width / (2 * options.fps)))
        self._box_travel = width - self._box_width + self._box_step

        band_top = self._strip_bottom + margin
        self._small_scale = max(1, (height - self._strip_bottom) // 50)
        small_height = GLYPH_ROWS * self._small_scale
        self._label_top = band_top
        digits_top = band_top + small_height + margin
        timecode_chars = 11  # HH:MM:SS:FF
        self._big_scale = max(
            1,
            min(
                (height - digits_top - margin) // (GLYPH_ROWS + 1),
                (width - 2 * margin) // (GLYPH_PITCH * timecode_chars),
            ),
        )
        big_height = GLYPH_ROWS * self._big_scale
        self._digits_top = digits_top + max(0, (height - margin - digits_top - big_height) // 2)
        self._margin = margin

        self._static = self._paint_static(label)
        self._canvas = self._static.copy()
        self._blank = np.full_like(self._static, CHROMA_NEUTRAL)
        self._blank[:height] = LUMA_BLACK

    def _paint_static(self, label: str) -> np.ndarray:
        width, height = self._width, self._height
        planes = np.empty((height * 3 // 2, width), dtype=np.uint8)
        luma = planes[:height]
        # Each chroma plane is (height/2, width/2) stored row-major in height/4 full rows.
        chroma_u = planes[height : height * 5 // 4].reshape(height // 2, width // 2)
        chroma_v = planes[height * 5 // 4 :].reshape(height // 2, width // 2)
        luma[:] = LUMA_BLACK
        chroma_u[:] = CHROMA_NEUTRAL
        chroma_v[:] = CHROMA_NEUTRAL

        edges = [_even(width * i / len(BAR_COLOURS_RGB)) for i in range(len(BAR_COLOURS_RGB))]
        edges.append(width)
        bars_half = self._bars_bottom // 2
        for (left, right), rgb in zip(itertools.pairwise(edges), BAR_COLOURS_RGB, strict=True):
            y, u, v = rgb_to_yuv601(*rgb)
            luma[: self._bars_bottom, left:right] = y
            chroma_u[:bars_half, left // 2 : right // 2] = u
            chroma_v[:bars_half, left // 2 : right // 2] = v

        text = _sanitise(label)
        label_room = (width - 2 * self._margin) // (GLYPH_PITCH * self._small_scale) - 9
        _stamp(
            luma,
            _text_mask(text[: max(0, label_room)], self._small_scale),
            self._label_top,
            self._margin,
        )
        return planes

    def paint(self, index: int) -> np.ndarray:
        if self._picture == "black":
            return self._blank
        if self._picture == "still":
            return self._static
        canvas = self._canvas
        # Only luma below the bars changes; restore it from the static picture.
        canvas[self._bars_bottom : self._height] = self._static[self._bars_bottom : self._height]
        luma = canvas[: self._height]

        left = (index * self._box_step) % self._box_travel
        luma[self._box_rows, left : left + self._box_width] = LUMA_WHITE

        seconds, frames = divmod(index, self._fps)
        minutes, seconds = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        # Hours wrap at 100 so the timecode keeps its width (and place) on long runs.
        timecode = f"{hours % 100:02d}:{minutes:02d}:{seconds:02d}:{frames:02d}"
        mask = _text_mask(timecode, self._big_scale)
        _stamp(luma, mask, self._digits_top, (self._width - mask.shape[1]) // 2)

        counter = _text_mask(f"#{index}", self._small_scale)
        _stamp(luma, counter, self._label_top, self._width - self._margin - counter.shape[1])
        return canvas


def _stamp(luma: np.ndarray, mask: np.ndarray, top: int, left: int) -> None:
    """Light the mask's pixels at (top, left), clipped to the picture."""
    bottom = min(luma.shape[0], top + mask.shape[0])
    right = min(luma.shape[1], left + mask.shape[1])
    top_clip, left_clip = max(0, -top), max(0, -left)
    if bottom <= top + top_clip or right <= left + left_clip:
        return
    region = luma[top + top_clip : bottom, left + left_clip : right]
    region[mask[top_clip : bottom - top, left_clip : right - left]] = LUMA_WHITE


# A 5x7 bitmap font: per glyph, seven rows as two hex digits each, bit 4 the left column.
GLYPH_ROWS = 7
GLYPH_COLUMNS = 5
GLYPH_PITCH = GLYPH_COLUMNS + 1  # one blank column between characters
FONT_HEX = {
    " ": "00000000000000",
    "#": "0A0A1F0A1F0A0A",
    "-": "0000001F000000",
    ".": "00000000000C0C",
    "/": "01010204081010",
    ":": "000C0C000C0C00",
    "?": "0E110102040004",
    "_": "0000000000001F",
    "0": "0E11131519110E",
    "1": "040C040404040E",
    "2": "0E11010204081F",
    "3": "1F02040201110E",
    "4": "02060A121F0202",
    "5": "1F101E0101110E",
    "6": "0608101E11110E",
    "7": "1F010204080808",
    "8": "0E11110E11110E",
    "9": "0E11110F01020C",
    "A": "0E11111F111111",
    "B": "1E11111E11111E",
    "C": "0E11101010110E",
    "D": "1C12111111121C",
    "E": "1F10101E10101F",
    "F": "1F10101E101010",
    "G": "0E11101711110F",
    "H": "1111111F111111",
    "I": "0E04040404040E",
    "J": "0702020202120C",
    "K": "11121418141211",
    "L": "1010101010101F",
    "M": "111B1515111111",
    "N": "11111915131111",
    "O": "0E11111111110E",
    "P": "1E11111E101010",
    "Q": "0E11111115120D",
    "R": "1E11111E141211",
    "S": "0F10100E01011E",
    "T": "1F040404040404",
    "U": "1111111111110E",
    "V": "11111111110A04",
    "W": "1111111515150A",
    "X": "11110A040A1111",
    "Y": "1111110A040404",
    "Z": "1F01020408101F",
}


def _build_glyph_table() -> tuple[dict[str, int], np.ndarray]:
    """All glyphs as one boolean array (glyph, row, column incl. the spacing column), so a
    string becomes a mask with a single fancy-index instead of a per-pixel loop."""
    index = {char: i for i, char in enumerate(FONT_HEX)}
    packed = bytes.fromhex("".join(FONT_HEX.values()))
    rows = np.frombuffer(packed, dtype=np.uint8).reshape(len(FONT_HEX), GLYPH_ROWS, 1)
    shifts = np.arange(GLYPH_COLUMNS - 1, -1, -1, dtype=np.uint8)
    bits = ((rows >> shifts) & 1).astype(bool)
    spaced = np.zeros((len(FONT_HEX), GLYPH_ROWS, GLYPH_PITCH), dtype=bool)
    spaced[:, :, :GLYPH_COLUMNS] = bits
    return index, spaced


GLYPH_INDEX, GLYPHS = _build_glyph_table()


def _sanitise(text: str) -> str:
    return "".join(char if char in GLYPH_INDEX else "?" for char in text.upper())


def _text_mask(text: str, scale: int) -> np.ndarray:
    """Boolean (7*scale, 6*scale*len) mask of ``text``, trailing spacing column trimmed."""
    if not text:
        return np.zeros((0, 0), dtype=bool)
    codes = [GLYPH_INDEX.get(char, GLYPH_INDEX["?"]) for char in _sanitise(text)]
    line = GLYPHS[codes].transpose(1, 0, 2).reshape(GLYPH_ROWS, -1)[:, :-1]
    return line.repeat(scale, axis=0).repeat(scale, axis=1)
