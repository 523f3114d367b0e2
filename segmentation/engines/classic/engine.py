"""The weight-free default engine: graph cuts from clicks, optical flow to propagate.

- Clicks act one by one through :func:`~segmentation.engines.classic.click_cut.cut_clicks`, each
  correcting the mask the earlier ones left. The frame becomes an anchor for the object, holding
  its clicks and mask (and, once propagation needs them, the colour models learned there). When
  the frame had a propagated mask before its first click, the clicks correct that mask. A new
  list of clicks that extends the anchor's only applies the new ones (the SAM 2 demo resends
  every click each time); any other list is replayed from the start.
- Propagation carries each object's mask to the next frame both along DIS optical flow and by
  the object's motion as a whole (a similarity transform fitted to its flow), and re-cuts a band
  around the union (widened by where the object was in the last three frames) with a graph cut
  that weighs colour models against a prior for the moved shape. The object's colour model is
  the anchor's, kept through the pass (refitted on every frame, it learned each frame's errors
  and passed them on); the background's is relearned on every frame from the anchor's and from
  a ring around the object, as its surroundings change while it moves. A motion fitted to the
  flow of something passing in front would carry the object away: the object's motion is fitted
  where the frame still looks like it, and checked against its last one. The flow is worked out
  only around the objects. A given mask is an anchor too.
- Each frame's mask of an object is the one carried from its nearest anchor (the earlier of two
  as near), each result remembering the anchor it came from: a propagation recomputes only the
  frames whose nearest anchor is new or changed, carrying the mask from that anchor (backward
  from an anchor ahead of the pass too), and passes the others through as they are.
- A click on a frame that shows a mask corrects that mask (``click_cut.prior_seed``: the mask
  stands in as a positive click at its deepest point, away from a first negative click), and
  each click changes it only within twice its distance to the mask's edge.
- A box is GrabCut's rectangle (``click_cut``): the object is cut afresh inside it, whatever
  mask the frame showed, and the clicks sent with it or after it correct that cut.
- All work happens at a working size (``work_size`` on the long side); masks are scaled back to
  the video's resolution on output, where each pixel goes to at most one object.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import cv2
import numpy as np

from segmentation.engines.base import Engine, EngineOptions, Masks, VideoState
from segmentation.engines.classic.click_cut import (
    Box,
    Click,
    Terrain,
    cut_box,
    cut_clicks,
    prior_seed,
)
from segmentation.engines.classic.colour_model import ColourModel, EvidenceMap, colour_model
from segmentation.engines.classic.crop import crop_box
from segmentation.engines.classic.cutout import cut_in_band
from segmentation.engines.classic.flow import PRESETS, FlowWarp, object_motion, warp, warp_rigid
from segmentation.engines.classic.local_colour import EdgeModels
from segmentation.engines.frames import FrameSource


@dataclass(frozen=True)
class ClassicOptions(EngineOptions):
    work_size: int = 480  # pixels on the long side of the frames the engine works on
    flow_preset: str = "medium"  # DIS optical flow: ultrafast, fast or medium
    band: float = 0.1  # re-cut band on propagation, as a share of the object's size
    click_radius: int = 3  # pixels around a click that are certainly in (or out)
    click_iterations: int = 1  # rounds of learning colours and cutting per click
    # colour models of stretches of the object's edge veto the global ones on propagation
    # (local_colour): better from a true mask, worse from clicks' errors, about 30% slower
    edge_colours: bool = False

    def __post_init__(self) -> None:
        if not 64 <= self.work_size <= 4096:
            raise ValueError(f"work_size must be within 64..4096, got {self.work_size}")
        if self.flow_preset not in PRESETS:
            raise ValueError(
                f"flow_preset must be one of {', '.join(PRESETS)}, got {self.flow_preset!r}"
            )
        if not 0 < self.band <= 0.5:
            raise ValueError(f"band must be within (0, 0.5], got {self.band}")
        if not 1 <= self.click_radius <= 50:
            raise ValueError(f"click_radius must be within 1..50, got {self.click_radius}")
        if not 1 <= self.click_iterations <= 10:
            raise ValueError(f"click_iterations must be within 1..10, got {self.click_iterations}")


class ClassicEngine(Engine):
    name = "classic"
    Options = ClassicOptions
    given_masks_run_model = False  # kept at the working size (a resize): no cut, no frame read

    def open(self, frames: FrameSource) -> ClassicVideoState:
        return ClassicVideoState(frames, self.options)

    def describe(self) -> str:
        return "classic: no weights, CPU"

    def calls_at_once(self, cores: int) -> int:
        """One call for every two cores: a call's steps hold the interpreter's lock between
        their NumPy, OpenCV and graph-cut parts, and NumPy's BLAS runs threads of its own. On 2
        cores two calls at once did 1.16 times the clicks a second of one at a time, and a
        one-point click beside them took about twice as long (measured on 2 cores only)."""
        return max(1, cores // 2)


@dataclass(frozen=True)
class Anchor:
    clicks: list[Click]  # working-size pixels
    mask: np.ndarray  # bool, working size
    prior: np.ndarray | None  # the mask the clicks corrected (propagated or given), if any
    # numbered anew whenever an anchor is made or changed: a result carried from it holds the
    # number, and is current while its frame's nearest anchor has that number
    serial: int
    model: ColourModel | None = None  # learned when propagation first needs it
    # the stand-in for the positive click that made the prior (click_cut.prior_seed)
    seeds: tuple[Click, ...] = ()
    box: Box | None = None  # working-size pixels; the clicks' cuts stay inside it


@dataclass(frozen=True)
class _Track:
    """One object along a propagation pass: its mask on the last frame, the colour models it is
    cut with (global, and along its edge), where it was lately (1 where it was on the last frame,
    fading by ``RECENT_FADE`` a frame since, moved with the object) and how it moved last."""

    mask: np.ndarray | None
    model: ColourModel | None
    recent: np.ndarray | None = None
    motion: np.ndarray | None = None  # the object's motion onto the last frame (object_motion)
    edges: EdgeModels | None = None

    @classmethod
    def start(
        cls,
        mask: np.ndarray | None,
        model: ColourModel | None,
        image: np.ndarray,
        band: float | None,
    ) -> _Track:
        """The track of ``mask`` on ``image``, with colour models of its edge when ``band`` (the
        engine's, a share of the object's size) is given."""
        if mask is None or model is None or band is None or not mask.any():
            return cls(mask, model, None if mask is None else mask.astype(np.float32))
        edges = EdgeModels.learn(image, mask, _band(band, max(np.count_nonzero(mask), model.area)))
        return cls(mask, model, mask.astype(np.float32), edges=edges)


@dataclass(frozen=True)
class _Sweep:
    """One object carried from one of its anchors frame by frame, in one direction (``step``):
    the frame it has reached and its track there."""

    serial: int  # the anchor's
    step: int
    frame: _Working
    track: _Track

    def leads_to(self, serial: int, step: int, frame_index: int) -> bool:
        """Whether carrying this sweep on reaches ``frame_index`` from the anchor ``serial``."""
        ahead = (frame_index - self.frame.index) * step
        return (self.serial, self.step) == (serial, step) and ahead > 0


@dataclass
class _Working:
    """A frame at working size: the colour image and its grey levels."""

    index: int
    image: np.ndarray
    grey: np.ndarray


# How fast the memory of where an object was fades, a frame at a time: a place it left stays
# within reach for three frames (0.8, 0.64, 0.51 > 0.5). Chosen on the 19 sequences' mean and
# worst first-mask J&F in a research copy of this step (0.6: 0.649 / 0.096, 0.8: 0.669 / 0.331,
# 0.9: 0.662 / 0.270); the engine with 0.8: 0.652 / 0.273, against 0.646 / 0.096 without it.
RECENT_FADE = 0.8
# The object's motion is fitted to the flow of its moved pixels that look like it, when at least
# this share of them do (else to all of them).
LOOKS_SHARE = 0.25
# The flow is worked out only around the objects (grown by half their size and 24 pixels), or on
# the whole frame when that covers 80% of it: on the 19 sequences this cost first-mask J&F 0.003
# and took the slowest sequence from 13.1 to 15.5 frames/s.
FLOW_MARGIN, FLOW_PAD, WHOLE_FLOW = 0.5, 24, 0.8
# Frames kept at working size: a pass reads each frame once per object.
WORKING_FRAMES = 4


class ClassicVideoState(VideoState):
    def __init__(self, frames: FrameSource, options: ClassicOptions) -> None:
        super().__init__(frames)
        self._options = options
        scale = min(1.0, options.work_size / max(frames.width, frames.height))
        self._work_size = (
            max(round(frames.width * scale), 1),
            max(round(frames.height * scale), 1),
        )
        self._anchors: dict[int, dict[int, Anchor]] = {}
        # per object and frame: the packed working-size mask and its anchor's serial number
        self._results: dict[int, dict[int, tuple[np.ndarray, int]]] = {}
        self._flow = FlowWarp(options.flow_preset)
        self._sweeps: dict[int, _Sweep] = {}  # per object, along the pass under way
        self._working_frames: collections.OrderedDict[int, _Working] = collections.OrderedDict()
        self._serials = itertools.count(1)
        self._terrain: tuple[int, Terrain] | None = None  # the last clicked frame's

    # Clicks.
    def _segment(self, frame_index: int, object_id: int) -> Masks:
        prompt = self.prompts[object_id][frame_index]
        scale = np.array(self._work_size, np.float64) / (self.frames.width, self.frames.height)
        points, labels = prompt.clicks
        clicks = [
            Click(float(x), float(y), bool(label))
            for (x, y), label in zip(points * scale, labels, strict=True)
        ]
        box = None if prompt.box is None else Box(*(prompt.box * scale).ravel().tolist())
        anchors = self._anchors.setdefault(object_id, {})
        old = anchors.get(frame_index)
        prior = old.prior if old is not None else self._result(object_id, frame_index)
        terrain = self._clicked_frame(frame_index)
        seeds: tuple[Click, ...] = ()
        extends = old is not None and (old.clicks or old.box is not None) and old.box == box
        if extends and old.clicks == clicks[: len(old.clicks)]:
            seeds, start, done = old.seeds, old.mask, len(old.clicks)
        elif box is not None:  # a box says afresh where the object is, whatever was there
            options = self._options
            start = cut_box(
                terrain,
                box,
                click_radius=options.click_radius,
                iterations=options.click_iterations,
                between=self.between_steps,
            )
            done = 0
        elif prior is not None and prior.any():  # the clicks correct the mask that was there
            seeds, start, done = (prior_seed(terrain, prior, clicks[0]),), prior, 0
        else:
            width, height = self._work_size
            start, done = np.zeros((height, width), bool), 0
        others = {i: anchor for i, anchor in anchors.items() if i != frame_index}
        nearest = _nearest(others, frame_index)
        mask = cut_clicks(
            terrain,
            [*seeds, *clicks],
            start=start,
            done=len(seeds) + done,
            click_radius=self._options.click_radius,
            iterations=self._options.click_iterations,
            correcting=bool(seeds),
            area=0 if nearest is None else int(np.count_nonzero(others[nearest].mask)),
            box=box,
            between=self.between_steps,
        )
        anchor = Anchor(clicks, mask, prior, next(self._serials), seeds=seeds, box=box)
        anchors[frame_index] = anchor
        self._store(object_id, frame_index, mask, anchor.serial)
        return self._output(frame_index)

    def _masked(self, frame_index: int, object_id: int, mask: np.ndarray) -> None:
        # an anchor with no clicks: later clicks there correct this mask (see _segment)
        small = cv2.resize(mask.astype(np.float32), self._work_size, interpolation=cv2.INTER_AREA)
        anchored = small >= 0.5
        anchor = Anchor([], anchored, anchored, next(self._serials))
        self._anchors.setdefault(object_id, {})[frame_index] = anchor
        self._store(object_id, frame_index, anchored, anchor.serial)

    def _masks(self, frame_index: int) -> Masks:
        return self._output(frame_index)

    def _cleared(self, frame_index: int, object_id: int) -> Masks:
        self._anchors.get(object_id, {}).pop(frame_index, None)
        self._results.get(object_id, {}).pop(frame_index, None)
        return self._output(frame_index)

    def _reset(self) -> None:
        self._anchors.clear()
        self._results.clear()
        self._sweeps.clear()

    def _removed(self, object_id: int) -> None:
        for per_object in (self._anchors, self._results, self._sweeps):
            per_object.pop(object_id, None)

    # Propagation.
    def _start_pass(self, frame_index: int) -> None:
        self._sweeps.clear()

    def _track(self, frame_index: int, *, reverse: bool) -> Masks:
        for object_id in self.object_ids:
            self._refresh(object_id, frame_index)
        return self._output(frame_index)

    def _refresh(self, object_id: int, frame_index: int) -> None:
        """Make the object's result on the frame the one carried from its nearest anchor (the
        earlier of two as near), unless it already is; an object without anchors has none."""
        anchors = self._anchors.get(object_id, {})
        source = _nearest(anchors, frame_index)
        if source is None:
            self._results.get(object_id, {}).pop(frame_index, None)
            return
        anchor = anchors[source]
        if self._serial(object_id, frame_index) == anchor.serial:
            return
        if source == frame_index:
            self._store(object_id, frame_index, anchor.mask, anchor.serial)
            return
        step = 1 if frame_index > source else -1
        sweep = self._sweeps.get(object_id)
        if sweep is None or not sweep.leads_to(anchor.serial, step, frame_index):
            start = self._working(source)
            sweep = _Sweep(anchor.serial, step, start, self._anchor_track(object_id, start))
        while sweep.frame.index != frame_index:
            self.between_steps()  # carried from an anchor far away, this takes many frames
            sweep = self._sweep_step(object_id, sweep)
        self._sweeps[object_id] = sweep

    def _sweep_step(self, object_id: int, sweep: _Sweep) -> _Sweep:
        """The sweep carried one frame on, its result there stored."""
        previous = sweep.frame
        current = self._working(previous.index + sweep.step)
        window = _flow_window([sweep.track], current.grey.shape)
        where_from = self._flow.backward_map(previous.grey, current.grey, window)
        track = self._carry(sweep.track, current, where_from)
        # a frame where the object is lost is stored empty: it is as settled as any other, and
        # a later step of the pass (backward, say) must not carry to it again from the anchor
        lost = np.zeros(current.grey.shape, bool)
        mask = lost if track.mask is None else track.mask
        self._store(object_id, current.index, mask, sweep.serial)
        return dataclasses.replace(sweep, frame=current, track=track)

    def _carry(self, track: _Track, current: _Working, where_from: np.ndarray) -> _Track:
        """One object moved onto ``current`` and re-cut at its edge.

        The mask moves twice: pixel by pixel along the flow, and as a whole by the object's
        fitted motion. The cut chooses within their union, widened by where the object was in
        the last few frames (so that a part hidden behind something thin, or lost by the flow
        for a frame or two, can come back), and keeps only where both moves agree for sure."""
        model = track.model
        if track.mask is None or not track.mask.any() or model is None:
            return _Track(None, model)
        evidence = EvidenceMap(current.image, model)
        old = track.mask.astype(np.float32)
        recent = np.maximum(track.recent * RECENT_FADE, old) if track.recent is not None else old
        by_flow = warp(old, where_from) > 0.5
        motion, by_object = _object_move(old, by_flow, where_from, evidence, track.motion)
        if motion is None:
            by_object, recent = by_flow, warp(recent, where_from)
        else:
            recent = warp_rigid(recent, motion)
        reach = by_flow | by_object | (recent > 0.5)
        if not reach.any():
            return _Track(None, model)
        # An object partly hidden for a while must be able to grow back to its learned size.
        area = max(np.count_nonzero(reach), model.area)
        band = _band(self._options.band, area)
        edges = track.edges.moved(where_from, by_flow) if track.edges is not None else None
        mask = cut_in_band(
            current.image, reach, evidence, band=band, sure=by_flow & by_object, edges=edges
        )
        # The object's colours stay those learned on the anchor the pass came from: refitted on
        # each frame's own result, a frame's errors became the next frame's model and grew. Its
        # surroundings change as it moves, though, and a colour new to the background must not
        # pass for the object's: the background is relearned on every frame, half from the
        # anchor's and half from a ring around where the object may be now.
        surroundings = current.image[_ring(mask | reach, band)]
        return _Track(mask, model.with_surroundings(surroundings), recent, motion, edges)

    # Bookkeeping.
    def _working(self, frame_index: int) -> _Working:
        working = self._working_frames.get(frame_index)
        if working is None:
            image = cv2.resize(
                self.frames.frame(frame_index), self._work_size, interpolation=cv2.INTER_AREA
            )
            working = _Working(frame_index, image, cv2.cvtColor(image, cv2.COLOR_RGB2GRAY))
            self._working_frames[frame_index] = working
            if len(self._working_frames) > WORKING_FRAMES:
                self._working_frames.popitem(last=False)
        return working

    def _clicked_frame(self, frame_index: int) -> Terrain:
        if self._terrain is None or self._terrain[0] != frame_index:
            image = self._working(frame_index).image  # decoded: a step of its own
            self.between_steps()
            self._terrain = (frame_index, Terrain(image))
        return self._terrain[1]

    @property
    def _edge_band(self) -> float | None:
        return self._options.band if self._options.edge_colours else None

    def _anchor_track(self, object_id: int, frame: _Working) -> _Track:
        """The object's track from its anchor on ``frame``."""
        return _Track.start(
            self._anchors[object_id][frame.index].mask,
            self._anchor_model(object_id, frame.index),
            frame.image,
            self._edge_band,
        )

    def _anchor_model(self, object_id: int, frame_index: int) -> ColourModel | None:
        anchor = self._anchors[object_id][frame_index]
        if anchor.model is None and anchor.mask.any():
            model = colour_model(self._working(frame_index).image, anchor.mask)
            anchor = self._anchors[object_id][frame_index] = dataclasses.replace(
                anchor, model=model
            )
        return anchor.model

    def _store(self, object_id: int, frame_index: int, mask: np.ndarray, serial: int) -> None:
        """The object's mask on the frame, from the anchor of that serial number."""
        self._results.setdefault(object_id, {})[frame_index] = (np.packbits(mask), serial)

    def _serial(self, object_id: int, frame_index: int) -> int | None:
        """The serial number of the anchor the object's result on the frame came from."""
        stored = self._results.get(object_id, {}).get(frame_index)
        return None if stored is None else stored[1]

    def _result(self, object_id: int, frame_index: int) -> np.ndarray | None:
        stored = self._results.get(object_id, {}).get(frame_index)
        if stored is None:
            return None
        packed = stored[0]
        width, height = self._work_size
        return np.unpackbits(packed, count=width * height).reshape(height, width).astype(bool)

    def _output(self, frame_index: int) -> Masks:
        """Every object's mask on the frame at the video's size, each pixel to one object."""
        size = (self.frames.width, self.frames.height)
        shape = (self.frames.height, self.frames.width)
        soft = []
        for object_id in self.object_ids:
            mask = self._result(object_id, frame_index)
            if mask is None:
                soft.append(np.zeros(shape, np.float32))
            else:
                smooth = cv2.GaussianBlur(mask.astype(np.float32), (3, 3), 0)
                soft.append(cv2.resize(smooth, size, interpolation=cv2.INTER_LINEAR))
        if not soft:
            return {}
        if len(soft) == 1:  # nothing to share
            return {self.object_ids[0]: soft[0] > 0.5}
        # Each pixel to the object most sure of it, the first of several as sure (as argmax
        # across the objects would give it; that took 7 ms of a frame's 11 at 854 x 480 with
        # three objects, reading the stack across its slow axis, where these passes take 1).
        best = soft[0].copy()
        for layer in soft[1:]:
            np.maximum(best, layer, out=best)
        free = best > 0.5
        masks = {}
        for object_id, layer in zip(self.object_ids, soft, strict=True):
            mine = layer == best
            mine &= free
            free &= ~mine
            masks[object_id] = mine
        return masks


def _nearest(anchors: Mapping[int, object], frame_index: int) -> int | None:
    """The anchor frame nearest ``frame_index`` (the earlier of two as near); None if none."""
    if not anchors:
        return None
    return min(anchors, key=lambda index: (abs(index - frame_index), index))


def _object_move(
    old: np.ndarray,
    by_flow: np.ndarray,
    where_from: np.ndarray,
    evidence: EvidenceMap,
    last: np.ndarray | None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The object's motion onto the new frame and its mask ``old`` moved by it.

    Something passing in front of an object drags the flow with it, and a motion fitted to that
    flow carries the object away. So the motion is fitted to the flow of the moved pixels that
    still look like the object, and then checked against the object's last motion (it keeps
    going while the flow follows the thing in front): the one whose moved mask holds more of
    the object's colours wins."""
    looks = np.zeros_like(by_flow)
    looks[by_flow] = evidence.at(by_flow) > 0
    share = np.count_nonzero(looks) / max(np.count_nonzero(by_flow), 1)
    fitted = object_motion(looks if share >= LOOKS_SHARE else by_flow, where_from)
    if fitted is None:
        return None, None
    candidates = [fitted] if last is None else [fitted, last]
    moved = [warp_rigid(old, motion) > 0.5 for motion in candidates]
    scores = [float(evidence.at(mask).sum()) for mask in moved]
    best = int(np.argmax(scores))  # the fitted motion on a tie
    return candidates[best], moved[best]


def _band(share: float, area: int) -> int:
    """The re-cut band in pixels: ``share`` of the size of an object of ``area`` pixels."""
    return max(2, round(share * np.sqrt(area)))


def _ring(region: np.ndarray, band: int) -> np.ndarray:
    """The pixels more than ``band`` and at most ``3 * band`` pixels away from ``region``."""
    away = cv2.distanceTransform((~region).view(np.uint8), cv2.DIST_L2, 3)
    return (away > band) & (away <= 3 * band)


def _flow_window(
    tracks: Iterable[_Track], shape: tuple[int, int]
) -> tuple[int, int, int, int] | None:
    """Where the flow onto the next frame is needed: around where the objects are and were
    lately, grown by ``FLOW_MARGIN`` of their size (None: the whole frame)."""
    region = np.zeros(shape, bool)
    for track in tracks:
        if track.mask is not None:
            region |= track.mask
        if track.recent is not None:
            region |= track.recent > 0.5
    if not region.any():
        return None
    top, bottom, left, right = crop_box(region, shape, margin=FLOW_MARGIN, pad=FLOW_PAD)
    if (bottom - top) * (right - left) > WHOLE_FLOW * shape[0] * shape[1]:
        return None
    return top, bottom, left, right
