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

Memory. Without :attr:`~VideoState.recall` the state keeps every result (a packed working-size
mask per object and frame: about 16 kB a frame at 480 x 270). With it, the state keeps what the
next frame needs: the anchors (clicks, mask, colour models), the sweeps that carry each object
(its track on the last frame reached), a few working-size frames, the last ``results_kept``
results of each object that were shown (and those not shown yet: a sweep from an anchor ahead
of the pass carries the object back over the frames the pass reaches next, which are kept until
the pass gets there), and the serial number of each frame's result in an array allocated once
per object (4 bytes a frame), so that whether a frame's result is current is known everywhere.
A result out of that window comes from ``recall``: as the frame's output, as it was shown, and
at working size where the engine needs it (a click's prior). Propagation never reads results
(sweeps carry their own tracks), so its results do not change; a click on a frame whose result
was evicted corrects the recalled mask scaled to working size, which differs from the working
result only by the output's smoothing and scaling.

:meth:`~VideoState.restore` makes an anchor of the stored mask at working size and the stored
clicks: a list extending them applies only the new clicks, as on the first state. What is not
stored is whether the clicks corrected an earlier mask (the anchor's prior and its stand-in
click): a restored anchor's further clicks cut as on a frame that showed nothing before, and a
list that does not extend its clicks is cut afresh. The frame shows the stored mask as given
until the anchor changes.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import itertools
import pickle
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import cv2
import numpy as np

from segmentation.engines.base import Engine, EngineOptions, Masks, Prompt, VideoState
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
# The form anchor_kept writes an anchor in; one of another form is rebuilt from its mask.
KEPT_FORMAT = 1
# A frame's serial number once its result was dropped (its prompts cleared, or no anchor left):
# the mask shown there before is past, and not recalled.
DROPPED = -1


class ClassicVideoState(VideoState):
    # results each object keeps once ``recall`` is set (the older ones come from it)
    results_kept = 256

    def __init__(self, frames: FrameSource, options: ClassicOptions) -> None:
        super().__init__(frames)
        self._options = options
        scale = min(1.0, options.work_size / max(frames.width, frames.height))
        self._work_size = (
            max(round(frames.width * scale), 1),
            max(round(frames.height * scale), 1),
        )
        self._anchors: dict[int, dict[int, Anchor]] = {}
        # per object and frame, the latest stored last: the packed working-size mask (all of
        # them without ``recall``; with it, those not shown yet and the last shown ones)
        self._results: dict[int, dict[int, np.ndarray]] = {}
        # per object, the frames whose kept result has been shown (and so is in the store that
        # ``recall`` reads), the earliest shown first: the ones let go past ``results_kept``
        self._results_shown: dict[int, collections.OrderedDict[int, None]] = {}
        # per object, each frame's result's anchor serial number (0: no result)
        self._result_serials: dict[int, np.ndarray] = {}
        # per object and restored anchor's frame: the mask given back, packed at the video's
        # size, with the serial of the anchor it is shown for
        self._shown: dict[int, dict[int, tuple[np.ndarray, int]]] = {}
        self._flow = FlowWarp(options.flow_preset)
        self._sweeps: dict[int, _Sweep] = {}  # per object, along the pass under way
        self._working_frames: collections.OrderedDict[int, _Working] = collections.OrderedDict()
        self._serials = itertools.count(1)
        self._terrain: tuple[int, Terrain] | None = None  # the last clicked frame's
        self._carried: dict[int, _Sweep] | None = None  # sweeps the next pass takes up
        self._tracked_last = -1  # the frame a pass tracked last

    # Clicks.
    def _working_clicks(self, prompt: Prompt) -> tuple[list[Click], Box | None]:
        """The prompt's clicks and box in working-size pixels."""
        scale = np.array(self._work_size, np.float64) / (self.frames.width, self.frames.height)
        points, labels = prompt.clicks
        clicks = [
            Click(float(x), float(y), bool(label))
            for (x, y), label in zip(points * scale, labels, strict=True)
        ]
        box = None if prompt.box is None else Box(*(prompt.box * scale).ravel().tolist())
        return clicks, box

    def _segment(self, frame_index: int, object_id: int) -> Masks:
        prompt = self.prompts[object_id][frame_index]
        clicks, box = self._working_clicks(prompt)
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
        anchored = self._working_mask(mask)
        anchor = Anchor([], anchored, anchored, next(self._serials))
        self._anchors.setdefault(object_id, {})[frame_index] = anchor
        self._store(object_id, frame_index, anchored, anchor.serial)

    def anchor_kept(self, *, object_id: int, frame_index: int) -> bytes | None:
        """The anchor as it is, to the bit (``Anchor`` but its colour model, learned again from
        the same mask when needed): its clicks, mask, prior, stand-in clicks and box, at this
        state's working size, as NumPy arrays in one ``.npz``."""
        anchor = self._anchors.get(object_id, {}).get(frame_index)
        if anchor is None:
            return None
        arrays = {
            "format": np.array([KEPT_FORMAT]),
            "work_size": np.array(self._work_size),
            "clicks": _clicks_array(anchor.clicks),
            "seeds": _clicks_array(anchor.seeds),
            "mask": np.packbits(anchor.mask),
        }
        if anchor.prior is not None:
            arrays["prior"] = np.packbits(anchor.prior)
        if anchor.box is not None:
            box = anchor.box
            arrays["box"] = np.array([box.left, box.top, box.right, box.bottom], np.float64)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue()

    def _kept_anchor(self, kept: bytes | None) -> Anchor | None:
        """The anchor :meth:`anchor_kept` wrote, with a new serial number; None if ``kept`` is
        none, or not one of this engine's at this working size."""
        if kept is None:
            return None
        try:
            with np.load(io.BytesIO(kept), allow_pickle=False) as arrays:
                if int(arrays["format"][0]) != KEPT_FORMAT:
                    return None
                if tuple(int(n) for n in arrays["work_size"]) != self._work_size:
                    return None
                width, height = self._work_size

                def unpacked(name: str) -> np.ndarray:
                    bits = np.unpackbits(arrays[name], count=width * height)
                    return bits.reshape(height, width).astype(bool)

                box = Box(*arrays["box"].tolist()) if "box" in arrays else None
                return Anchor(
                    _clicks_list(arrays["clicks"]),
                    unpacked("mask"),
                    unpacked("prior") if "prior" in arrays else None,
                    next(self._serials),
                    seeds=tuple(_clicks_list(arrays["seeds"])),
                    box=box,
                )
        except (ValueError, KeyError, OSError, EOFError):  # not an anchor this engine wrote
            return None

    def _restored(
        self,
        frame_index: int,
        object_id: int,
        prompt: Prompt | None,
        mask: np.ndarray,
        kept: bytes | None,
    ) -> None:
        exact = self._kept_anchor(kept)
        if exact is not None:  # the anchor as it was: its own output is the one shown
            self._anchors.setdefault(object_id, {})[frame_index] = exact
            self._store(object_id, frame_index, exact.mask, exact.serial)
            return
        anchored = self._working_mask(mask)
        if prompt is None:
            anchor = Anchor([], anchored, anchored, next(self._serials))
        else:
            clicks, box = self._working_clicks(prompt)
            anchor = Anchor(clicks, anchored, None, next(self._serials), box=box)
        self._anchors.setdefault(object_id, {})[frame_index] = anchor
        self._store(object_id, frame_index, anchored, anchor.serial)
        shown = self._shown.setdefault(object_id, {})
        shown[frame_index] = (np.packbits(mask), anchor.serial)

    def _masks(self, frame_index: int) -> Masks:
        # an answer that may be kept nowhere (an export's): its results are not let go for it
        return self._output(frame_index, shown=False)

    def _cleared(self, frame_index: int, object_id: int) -> Masks:
        self._anchors.get(object_id, {}).pop(frame_index, None)
        self._drop(object_id, frame_index)
        return self._output(frame_index)

    def _reset(self) -> None:
        for per_object in self._per_object:
            per_object.clear()

    def _removed(self, object_id: int) -> None:
        for per_object in self._per_object:
            per_object.pop(object_id, None)

    @property
    def _per_object(self) -> tuple[dict, ...]:
        return (
            self._anchors,
            self._results,
            self._results_shown,
            self._result_serials,
            self._shown,
            self._sweeps,
        )

    # Propagation.
    def _start_pass(self, frame_index: int) -> None:
        self._sweeps.clear()
        if self._carried is not None:  # taken up where an earlier state's pass was
            self._sweeps.update(self._carried)
            self._carried = None

    def carry(self) -> bytes | None:
        """Each object's sweep (its anchor's frame, its way and its track on the frame it has
        reached), pickled: the frame's image is decoded again where it is taken up."""
        sweeps = {}
        for object_id, sweep in self._sweeps.items():
            anchor = next(
                (
                    frame
                    for frame, a in self._anchors.get(object_id, {}).items()
                    if a.serial == sweep.serial
                ),
                None,
            )
            if anchor is not None:
                sweeps[object_id] = (anchor, sweep.step, sweep.frame.index, sweep.track)
        if not sweeps:
            return None
        at = self._tracked_last
        data = {"format": KEPT_FORMAT, "work_size": self._work_size, "at": at, "sweeps": sweeps}
        return zlib.compress(pickle.dumps(data, protocol=5))

    def carry_restore(self, carry: bytes) -> int | None:
        try:
            data = _CarryUnpickler(io.BytesIO(zlib.decompress(carry))).load()
            if data["format"] != KEPT_FORMAT or tuple(data["work_size"]) != self._work_size:
                return None
            carried = {}
            for object_id, (anchor, step, frame, track) in data["sweeps"].items():
                kept = self._anchors.get(object_id, {}).get(anchor)
                if kept is None:
                    return None
                carried[object_id] = _Sweep(kept.serial, step, self._working(frame), track)
        except (pickle.UnpicklingError, zlib.error, KeyError, TypeError, ValueError):
            return None
        self._carried = carried
        return int(data["at"])

    def _track(self, frame_index: int, *, reverse: bool) -> Masks:
        self._tracked_last = frame_index
        for object_id in self.object_ids:
            self._refresh(object_id, frame_index)
        return self._output(frame_index)

    def _refresh(self, object_id: int, frame_index: int) -> None:
        """Make the object's result on the frame the one carried from its nearest anchor (the
        earlier of two as near), unless it already is; an object without anchors has none."""
        anchors = self._anchors.get(object_id, {})
        source = _nearest(anchors, frame_index)
        if source is None:
            self._drop(object_id, frame_index)
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

    def _working_mask(self, mask: np.ndarray) -> np.ndarray:
        """A mask at the video's size (bool) at the working size."""
        small = cv2.resize(mask.astype(np.float32), self._work_size, interpolation=cv2.INTER_AREA)
        return small >= 0.5

    def _store(self, object_id: int, frame_index: int, mask: np.ndarray, serial: int) -> None:
        """The object's mask on the frame, from the anchor of that serial number; once
        ``recall`` is set, the object's results shown longest ago beyond ``results_kept`` are let
        go. A result not shown yet is kept until it is: a sweep from an anchor ahead of the pass
        carries the object back over the frames the pass reaches next, and ``recall`` has not
        got them (so memory holds those, 16 kB a frame at 480 x 270, until the pass gets there)."""
        results = self._results.setdefault(object_id, {})
        results.pop(frame_index, None)  # stored again: the latest
        results[frame_index] = np.packbits(mask)
        shown = self._results_shown.setdefault(object_id, collections.OrderedDict())
        shown.pop(frame_index, None)
        serials = self._result_serials.get(object_id)
        if serials is None:
            serials = self._result_serials[object_id] = np.zeros(self.frame_count, np.int32)
        serials[frame_index] = serial
        self._let_go(object_id)

    def _let_go(self, object_id: int) -> None:
        """Once ``recall`` is set: the object's results shown longest ago, past the last
        ``results_kept``."""
        if self.recall is None:
            return
        results = self._results.get(object_id, {})
        shown = self._results_shown.get(object_id, {})
        while len(results) > self.results_kept and shown:
            let_go, _ = shown.popitem(last=False)
            del results[let_go]

    def _drop(self, object_id: int, frame_index: int) -> None:
        """The object has no result on the frame, and none shown there stands (``recall``'s
        is past)."""
        self._results.get(object_id, {}).pop(frame_index, None)
        self._results_shown.get(object_id, {}).pop(frame_index, None)
        serials = self._result_serials.get(object_id)
        if serials is None:
            serials = self._result_serials[object_id] = np.zeros(self.frame_count, np.int32)
        serials[frame_index] = DROPPED

    def _serial(self, object_id: int, frame_index: int) -> int | None:
        """The serial number of the anchor the object's result on the frame came from."""
        serials = self._result_serials.get(object_id)
        serial = 0 if serials is None else int(serials[frame_index])
        return serial if serial > 0 else None

    def _dropped(self, object_id: int, frame_index: int) -> bool:
        serials = self._result_serials.get(object_id)
        return serials is not None and serials[frame_index] == DROPPED

    def _result(self, object_id: int, frame_index: int) -> np.ndarray | None:
        """The object's result on the frame at working size: kept, or recalled and scaled."""
        packed = self._results.get(object_id, {}).get(frame_index)
        if packed is None:
            recalled = self._recalled(object_id, frame_index, {})
            return None if recalled is None else self._working_mask(recalled)
        width, height = self._work_size
        return np.unpackbits(packed, count=width * height).reshape(height, width).astype(bool)

    def _recalled(
        self, object_id: int, frame_index: int, recalled: dict[int, Masks]
    ) -> np.ndarray | None:
        """The object's mask on the frame as last shown, where this state holds no result there
        (let go, or never made: a state given its work back holds only its anchors), unless
        its result there was dropped since (``recalled``: the frame's masks once asked for);
        None where it has none."""
        if self.recall is None or self._dropped(object_id, frame_index):
            return None
        if frame_index not in recalled:
            recalled[frame_index] = self.recall(frame_index)
        mask = recalled[frame_index].get(object_id)
        shape = (self.frames.height, self.frames.width)
        return np.zeros(shape, bool) if mask is None else np.asarray(mask, bool)

    def _shown_mask(self, object_id: int, frame_index: int) -> np.ndarray | None:
        """The mask a restored anchor on the frame was given back with, while it is current."""
        shown = self._shown.get(object_id, {}).get(frame_index)
        if shown is None or shown[1] != self._serial(object_id, frame_index):
            return None
        width, height = self.frames.width, self.frames.height
        return np.unpackbits(shown[0], count=width * height).reshape(height, width).astype(bool)

    def _output(self, frame_index: int, *, shown: bool = True) -> Masks:
        """Every object's mask on the frame at the video's size, each pixel to one object; with
        ``shown``, an answer that whoever runs the state keeps (what ``recall`` gives back)."""
        masks = self._output_masks(frame_index)
        if shown:
            for object_id in self.object_ids:
                if frame_index in self._results.get(object_id, {}):
                    self._results_shown.setdefault(object_id, collections.OrderedDict())
                    self._results_shown[object_id][frame_index] = None
                    self._let_go(object_id)
        return masks

    def _output_masks(self, frame_index: int) -> Masks:
        """:meth:`_output`'s masks."""
        size = (self.frames.width, self.frames.height)
        shape = (self.frames.height, self.frames.width)
        soft = []
        recalled: dict[int, Masks] = {}
        for object_id in self.object_ids:
            # a mask given back or recalled is shown as it was (they never overlap)
            given = self._shown_mask(object_id, frame_index)
            packed = self._results.get(object_id, {}).get(frame_index)
            if given is None and packed is None:
                given = self._recalled(object_id, frame_index, recalled)
            if given is not None:
                soft.append(given.astype(np.float32))
                continue
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


class _CarryUnpickler(pickle.Unpickler):
    """A carry read back (:meth:`ClassicVideoState.carry`): NumPy's arrays and this engine's
    own records, nothing else."""

    ALLOWED = {
        ("numpy", "dtype"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        (__name__, "_Track"),
        ("segmentation.engines.classic.colour_model", "ColourModel"),
        ("segmentation.engines.classic.local_colour", "EdgeModels"),
    }

    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"not in a carry: {module}.{name}")
        return super().find_class(module, name)


def _clicks_array(clicks: Iterable[Click]) -> np.ndarray:
    """Clicks as an N x 3 array: x, y, and 1 for a positive click (0 for a negative one)."""
    rows = [(click.x, click.y, float(click.positive)) for click in clicks]
    return np.array(rows, np.float64).reshape(-1, 3)


def _clicks_list(array: np.ndarray) -> list[Click]:
    return [Click(float(x), float(y), bool(positive)) for x, y, positive in array.tolist()]


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
