"""The engine interface every segmentation engine implements, shaped after SAM 2's video predictor.

An :class:`Engine` is built once per process with its options and opens a :class:`VideoState`
per video. A state holds the prompts (clicked points per object and frame) and answers:

- :meth:`VideoState.add_points`: new clicks for one object on one frame; returns the masks of
  every object on that frame.
- :meth:`VideoState.add_mask`: one object's whole mask on one frame (SAM 2's ``add_new_mask``),
  an anchor for propagation just as a clicked frame is; :meth:`VideoState.give_mask` the same
  without the answer (an import gives a frame's objects one by one and asks for its masks once).
- :meth:`VideoState.clear_points_in_frame`, :meth:`VideoState.clear_points_in_video`,
  :meth:`VideoState.remove_object`: forget prompts.
- :meth:`VideoState.propagate`: carry the masks through the video, from a start frame forward to
  the end and then backward to the start of the video (or one way only, and only so far, as SAM
  2's ``reverse`` and ``max_frame_num_to_track`` say), yielding each frame's masks as it goes and
  checking a cancel flag between frames.

A frame with prompts (clicks or a given mask) is an *anchor* of its object. Corrections obey two
rules, which every engine keeps:

1. **A click corrects its own frame where it is put.** On a frame that already shows a mask
   (propagated or given), a negative click removes the region around it that it denies and a
   positive click adds the part around it; neither throws away most of a mask that was mostly
   right.
2. **A propagation from a corrected frame changes the frames that the correction governs, and
   no others.** Between two anchors, each frame takes the mask carried from the better-founded
   one: in the ``classic`` engine the nearer (the earlier of two as near), so a frame nearer
   another anchor keeps its mask when a far frame is corrected, and a propagation started
   anywhere leaves a frame whose nearest anchor has not changed as it was. ``sam2`` keeps SAM
   2's own behaviour: every anchor is a conditioning frame that the memory attention of every
   tracked frame sees.

Whoever runs a state may share the machine between states: a state whose operations run in steps
calls :attr:`VideoState.between_steps` between them (a no-op unless set), where the caller may
let other work run first (``segmentation/services/engine_turns.py``), and an engine says how many
of its calls a machine runs at once (:meth:`Engine.calls_at_once`).

A state keeps every frame's result until whoever runs it sets :attr:`VideoState.recall`: the
masks kept elsewhere (the session's store) for a frame, every object's as last shown. From then
on the state keeps only what the next frame needs, so that its memory stays flat however long
the video (each engine's docstring says what it keeps), and asks ``recall`` for the rest: a
frame's masks it no longer holds, the mask a correction far from the last tracked frame starts
from. :meth:`VideoState.restore` gives a new state a stored anchor (after a reload or a restart)
without running the model.

Masks are boolean ``H x W`` arrays at the video's own resolution, keyed by object ID, and never
overlap: each pixel belongs to at most one object. Points are normalized ``[x, y]`` in [0, 1];
labels are 1 (positive: the object is here) or 0 (negative: it is not). A box travels as in SAM
2's video predictor: two points labelled 2 (its top-left corner) and 3 (its bottom-right), first
in the list, the clicks after them; a box replaces the object's earlier prompts on its frame.
Engines know nothing of Django: frames in, numpy masks out. Invalid prompts raise
:class:`PromptError`.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import threading
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from segmentation.engines.frames import FrameSource

Masks = dict[int, np.ndarray]

# Which way a propagation goes from its start frame (see VideoState.propagate).
Direction = typing.Literal["both", "forward", "backward"]
DIRECTIONS: tuple[Direction, ...] = typing.get_args(Direction)


class PromptError(ValueError):
    """A prompt the engine cannot take: a bad point, label, frame index or object ID."""


# Point labels: a click's, and a box's two corners (SAM 2's own values, which its prompt encoder
# has an embedding for each of).
NEGATIVE, POSITIVE, BOX_TOP_LEFT, BOX_BOTTOM_RIGHT = 0, 1, 2, 3
BOX_LABELS = (BOX_TOP_LEFT, BOX_BOTTOM_RIGHT)

# Clicks one object may have on one frame: far more than anyone clicks, and a bound on the work a
# single request can ask of an engine.
MAX_POINTS = 100


def box_check(xy: np.ndarray, kinds: np.ndarray) -> None:
    """A box among normalized points (N x 2) and their labels: its two corners, in the order
    and place SAM 2's predictor puts them, spanning an area of the frame; PromptError if not."""
    if (kinds == BOX_TOP_LEFT).sum() > 1 or (kinds == BOX_BOTTOM_RIGHT).sum() > 1:
        raise PromptError("at most one box (one point labelled 2 and one labelled 3)")
    if len(kinds) < 2 or tuple(kinds[:2]) != BOX_LABELS:
        raise PromptError(
            "a box is a point labelled 2 (top-left) followed by one labelled 3 "
            "(bottom-right), before any clicks"
        )
    corners = xy[:2]
    if not np.isfinite(corners).all() or (corners < 0).any() or (corners > 1).any():
        raise PromptError("a box must lie inside the frame (corners normalized to [0, 1])")
    (left, top), (right, bottom) = corners
    if left >= right or top >= bottom:
        raise PromptError(
            "a box's top-left corner (label 2) must be above and left of its bottom-right "
            "corner (label 3), with an area"
        )


def _no_pause() -> None:
    """:attr:`VideoState.between_steps` until someone sets it: go straight on."""


class EngineConfigError(ValueError):
    """An unknown engine name or a bad engine option."""


@dataclass(frozen=True)
class Prompt:
    """The clicks of one object on one frame: ``points`` in pixels (N x 2, x then y), a box's
    two corners (labels 2 and 3) first when there is one."""

    points: np.ndarray
    labels: np.ndarray

    @property
    def box(self) -> np.ndarray | None:
        """The box's corners in pixels (2 x 2: top-left, bottom-right), if there is one."""
        if len(self.labels) >= 2 and tuple(self.labels[:2]) == BOX_LABELS:
            return self.points[:2]
        return None

    @property
    def clicks(self) -> tuple[np.ndarray, np.ndarray]:
        """The points and labels of the clicks, the box left out."""
        first = 0 if self.box is None else 2
        return self.points[first:], self.labels[first:]

    def extended(self, other: Prompt) -> Prompt:
        return Prompt(
            np.concatenate([self.points, other.points]), np.concatenate([self.labels, other.labels])
        )


@dataclass(frozen=True)
class EngineOptions:
    """Base of each engine's options: typed fields with defaults, parsed from strings."""

    @classmethod
    def parse(cls, raw: Mapping[str, str]) -> EngineOptions:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        types = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for key, text in raw.items():
            if key not in fields:
                known = ", ".join(sorted(fields)) or "none"
                raise EngineConfigError(f"unknown option {key!r} (known options: {known})")
            values[key] = _parse_value(key, text, types[key])
        try:
            return cls(**values)
        except (TypeError, ValueError) as error:
            raise EngineConfigError(str(error)) from None


_KINDS = {int: "an integer", float: "a number", bool: "a boolean (1/0, true/false)"}


def _parse_value(key: str, text: str, kind: Any) -> Any:
    try:
        if kind is bool:
            lowered = text.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError
            return lowered in {"1", "true", "yes", "on"}
        value = kind(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError
        return value
    except ValueError:
        expected = _KINDS.get(kind, getattr(kind, "__name__", str(kind)))
        raise EngineConfigError(f"option {key!r} must be {expected}, got {text!r}") from None


class Engine(abc.ABC):
    """A segmentation engine; one instance serves every session of a process."""

    name: ClassVar[str]
    Options: ClassVar[type[EngineOptions]] = EngineOptions
    # Whether a mask given as a prompt (:meth:`VideoState.add_mask`) runs the model, as a click
    # does (SAM 2 decodes it on the frame's features for the object's pointer), rather than
    # being kept as it is: what an imported mask is charged
    # (segmentation/services/engine_prices.py).
    given_masks_run_model: ClassVar[bool] = True

    def __init__(self, options: EngineOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @abc.abstractmethod
    def open(self, frames: FrameSource) -> VideoState:
        """A new per-video state over ``frames``, with no prompts."""

    def describe(self) -> str:
        """What answers, in a few words for people: the engine, its model and where it runs."""
        return self.name

    def calls_at_once(self, cores: int) -> int:
        """How many of this engine's calls a machine of ``cores`` cores runs at once, each about
        as fast as alone: here one a core, for an engine whose calls each keep one core busy."""
        return max(1, cores)


class VideoState(abc.ABC):
    """One video's prompts and results. Not thread-safe: callers serialize operations on a state
    (the cancel flag given to :meth:`propagate` is the exception, and may be set from anywhere).

    This base class validates input and keeps the prompts; engines implement the ``_`` methods.
    """

    def __init__(self, frames: FrameSource) -> None:
        self.frames = frames
        # called between the steps of an operation, by engines whose operations have steps
        self.between_steps: Callable[[], None] = _no_pause
        self.prompts: dict[int, dict[int, Prompt]] = {}  # object ID -> frame index -> clicks
        self.object_ids: list[int] = []  # in order of first appearance
        # set by whoever runs the state: the masks kept elsewhere for a frame, every object's as
        # last shown ({} when none). None: the state keeps every result itself.
        self.recall: Callable[[int], Masks] | None = None

    @property
    def frame_count(self) -> int:
        return len(self.frames)

    def add_points(
        self,
        *,
        frame_index: int,
        object_id: int,
        points: Sequence[Sequence[float]],
        labels: Sequence[int],
        clear_old_points: bool = True,
    ) -> Masks:
        """Add clicks for ``object_id`` on ``frame_index``; the masks of every object there."""
        self._check_frame(frame_index)
        self._check_object(object_id)
        prompt = self._prompt(points, labels)
        if prompt.box is not None and not clear_old_points:
            # SAM 2's predictor refuses this too: a box must come before every click
            raise PromptError("a box replaces the object's points on the frame: clear old points")
        old = self.prompts.get(object_id, {}).get(frame_index)
        if not clear_old_points and old is not None:
            prompt = old.extended(prompt)
        if len(prompt.points) > MAX_POINTS:
            raise PromptError(
                f"at most {MAX_POINTS} points per object and frame, got {len(prompt.points)}"
            )
        self.prompts.setdefault(object_id, {})[frame_index] = prompt
        if object_id not in self.object_ids:
            self.object_ids.append(object_id)
        return self._segment(frame_index, object_id)

    def add_mask(self, *, frame_index: int, object_id: int, mask: np.ndarray) -> Masks:
        """Give ``object_id``'s mask on ``frame_index`` (boolean or 0/1, the video's height x
        width); it replaces the object's clicks there. The masks of every object there."""
        self.give_mask(frame_index=frame_index, object_id=object_id, mask=mask)
        return self._masks(frame_index)

    def give_mask(self, *, frame_index: int, object_id: int, mask: np.ndarray) -> None:
        """:meth:`add_mask` without its answer: every object's mask on the frame, put together
        at the video's size, costs more than keeping the given one, and an import asks for it
        once a frame, after all of the frame's objects."""
        self._check_frame(frame_index)
        self._check_object(object_id)
        given = self._given_mask(mask)
        self.prompts.get(object_id, {}).pop(frame_index, None)
        if object_id not in self.object_ids:
            self.object_ids.append(object_id)
        self._masked(frame_index, object_id, given)

    def restore(
        self,
        *,
        object_id: int,
        frame_index: int,
        prompt: Prompt | None,
        mask: np.ndarray,
        kept: bytes | None = None,
    ) -> None:
        """Give back a stored anchor without running the model now: ``object_id``'s clicks on
        ``frame_index`` (``prompt``, in pixels as :class:`Prompt` holds them; None for a given
        or imported mask) and its mask there as it was last shown (boolean or 0/1, the video's
        height x width). Afterwards :meth:`masks` on the frame answers that mask at once,
        :attr:`prompts` and :attr:`object_ids` hold the anchor (a given mask, as after
        :meth:`give_mask`, has no prompt), and later clicks there and propagations behave as
        on the state the anchor was made in, as nearly as the engine can (its docstring says
        how); exactly so where ``kept``, the engine's own form of the anchor
        (:meth:`anchor_kept`), is given and the engine takes it."""
        self._check_frame(frame_index)
        self._check_object(object_id)
        given = self._given_mask(mask)
        if prompt is None:
            self.prompts.get(object_id, {}).pop(frame_index, None)
        else:
            prompt = self._restored_prompt(prompt)
            self.prompts.setdefault(object_id, {})[frame_index] = prompt
        if object_id not in self.object_ids:
            self.object_ids.append(object_id)
        self._restored(frame_index, object_id, prompt, given, kept)

    def carry(self) -> bytes | None:
        """What the propagation under way carries to its next frame, in the engine's own form,
        for whoever runs a long propagation to keep now and then: given to a new state that
        holds the same anchors (:meth:`restore` with their kept form) by :meth:`carry_restore`,
        the next pass goes on from the frame after it as this one would have. None where the
        engine keeps no such form (its pass then sets out afresh, as a new one does)."""
        return None

    def carry_restore(self, carry: bytes) -> int | None:
        """Let the next pass go on from ``carry`` (:meth:`carry`); the frame it was taken on,
        or None where the engine cannot take it up (not its own, or of anchors it does not
        hold), and the next pass sets out afresh."""
        return None

    def anchor_kept(self, *, object_id: int, frame_index: int) -> bytes | None:
        """The engine's own form of ``object_id``'s anchor on ``frame_index``, for whoever keeps
        the prompts to give back to :meth:`restore` (``kept``), so that a new state continues
        as this one would have; None where the engine keeps no such form (or there is no
        anchor), and :meth:`restore` rebuilds the anchor from its mask."""
        return None

    def clear_points_in_frame(self, *, frame_index: int, object_id: int) -> Masks:
        """Forget ``object_id``'s clicks on ``frame_index``; the masks of every object there."""
        self._check_frame(frame_index)
        self._check_object(object_id)
        self.prompts.get(object_id, {}).pop(frame_index, None)
        return self._cleared(frame_index, object_id)

    def masks(self, *, frame_index: int) -> Masks:
        """Every object's current mask on ``frame_index`` (from clicks or propagation)."""
        self._check_frame(frame_index)
        return self._masks(frame_index)

    def clear_points_in_video(self) -> None:
        """Forget every prompt and every object."""
        self.prompts.clear()
        self.object_ids.clear()
        self._reset()

    def remove_object(self, *, object_id: int) -> None:
        """Forget ``object_id`` and its prompts; unknown IDs are ignored."""
        self._check_object(object_id)
        self.prompts.pop(object_id, None)
        if object_id in self.object_ids:
            self.object_ids.remove(object_id)
            self._removed(object_id)

    def propagate(
        self,
        *,
        start_frame_index: int = 0,
        cancel: threading.Event | None = None,
        direction: Direction = "both",
        max_frame_num_to_track: int | None = None,
    ) -> Iterator[tuple[int, Masks]]:
        """Yield ``(frame_index, masks)`` from ``start_frame_index``, stopping early once
        ``cancel`` is set. ``"forward"`` goes to the last frame and ``"backward"`` to the first,
        each from the start frame itself, as SAM 2's ``propagate_in_video`` does without and
        with ``reverse``; ``"both"`` (the SAM 2 demo's propagation) goes forward, then from the
        frame before the start backward. ``max_frame_num_to_track`` (SAM 2's argument) stops each
        direction that many frames past the start (0: the start frame alone), or at the video's
        end if sooner."""
        self._check_frame(start_frame_index)
        if direction not in DIRECTIONS:
            raise PromptError(
                f"direction must be one of {', '.join(DIRECTIONS)}, got {direction!r}"
            )
        reach = self.frame_count if max_frame_num_to_track is None else max_frame_num_to_track
        if isinstance(reach, bool) or not isinstance(reach, int | np.integer) or reach < 0:
            raise PromptError(
                f"max_frame_num_to_track must be a count of frames, got {max_frame_num_to_track!r}"
            )
        last = min(start_frame_index + reach, self.frame_count - 1)
        first = max(start_frame_index - reach, 0)
        forward = range(start_frame_index, last + 1) if direction != "backward" else range(0)
        # "both" has already given the start frame on its way forward
        backward_from = start_frame_index - 1 if direction == "both" else start_frame_index
        backward = range(backward_from, first - 1, -1) if direction != "forward" else range(0)
        order = [(i, False) for i in forward] + [(i, True) for i in backward]
        self._start_pass(start_frame_index)
        finishing: tuple[int, Future[Masks]] | None = None  # a frame whose masks are on the way
        for position, (frame_index, reverse) in enumerate(order):
            if cancel is not None and cancel.is_set():
                return
            if reverse and position > 0 and not order[position - 1][1]:
                self._start_pass(start_frame_index)  # the backward pass sets out anew
            tracked = self._track(frame_index, reverse=reverse)
            if finishing is not None:
                yield finishing[0], finishing[1].result()
                finishing = None
            if isinstance(tracked, Future):
                finishing = (frame_index, tracked)
            else:
                yield frame_index, tracked
        if finishing is not None:
            yield finishing[0], finishing[1].result()

    def close(self) -> None:  # noqa: B027 (most engines hold nothing that needs freeing)
        """Free what the state holds (caches, device memory)."""

    # What engines implement.
    @abc.abstractmethod
    def _segment(self, frame_index: int, object_id: int) -> Masks:
        """Recompute ``object_id`` on ``frame_index`` from its prompts there; every mask there."""

    @abc.abstractmethod
    def _masked(self, frame_index: int, object_id: int, mask: np.ndarray) -> None:
        """``object_id``'s mask on ``frame_index`` is ``mask`` (bool, the video's size), an
        anchor."""

    def _restored(
        self,
        frame_index: int,
        object_id: int,
        prompt: Prompt | None,
        mask: np.ndarray,
        kept: bytes | None,
    ) -> None:
        """``object_id``'s anchor on ``frame_index`` is given back: its clicks (None: a given
        mask), its mask as last shown (bool, the video's size) and the engine's own form of it
        if it was kept (:meth:`anchor_kept`); nothing runs the model. By default the mask as
        shown becomes the anchor, as a given mask does (:meth:`_masked`); engines that can do
        better with the clicks or the kept form say so."""
        self._masked(frame_index, object_id, mask)

    @abc.abstractmethod
    def _masks(self, frame_index: int) -> Masks:
        """Every object's current mask on the frame; changes nothing."""

    @abc.abstractmethod
    def _cleared(self, frame_index: int, object_id: int) -> Masks:
        """The object's prompts on the frame are gone; every mask on the frame."""

    @abc.abstractmethod
    def _reset(self) -> None:
        """Every prompt and object is gone."""

    @abc.abstractmethod
    def _removed(self, object_id: int) -> None:
        """The object and its prompts are gone."""

    @abc.abstractmethod
    def _start_pass(self, frame_index: int) -> None:
        """A pass of propagation (forward, then backward) sets out from ``frame_index``."""

    @abc.abstractmethod
    def _track(self, frame_index: int, *, reverse: bool) -> Masks | Future[Masks]:
        """The masks on ``frame_index``: the pass's start frame, or the frame after (before, when
        ``reverse``) the one tracked last. An engine that finishes masks in another thread
        returns them as a future: they are yielded once the next frame has been started, so
        that its work overlaps their finishing."""

    # Validation.
    def _check_frame(self, frame_index: int) -> None:
        if isinstance(frame_index, bool) or not isinstance(frame_index, int | np.integer):
            raise PromptError(f"frame index must be an integer, got {frame_index!r}")
        if not 0 <= frame_index < self.frame_count:
            raise PromptError(
                f"frame index {frame_index} is outside the video's frames 0..{self.frame_count - 1}"
            )

    def _given_mask(self, mask: np.ndarray) -> np.ndarray:
        shape = (self.frames.height, self.frames.width)
        given = np.asarray(mask)
        if given.shape != shape:
            raise PromptError(
                f"the mask must be {shape[0]}x{shape[1]} (the video's height x width), "
                f"got {'x'.join(map(str, given.shape))}"
            )
        if given.dtype != bool:
            if given.dtype.kind not in "iuf" or not np.isin(given, (0, 1)).all():
                raise PromptError("the mask must hold booleans or 0 and 1")
            given = given.astype(bool)
        return given

    def _restored_prompt(self, prompt: Prompt) -> Prompt:
        points = np.asarray(prompt.points, dtype=np.float64)
        labels = np.asarray(prompt.labels, dtype=np.int8)
        if points.ndim != 2 or points.shape[1:] != (2,) or len(points) != len(labels):
            raise PromptError("a restored prompt holds N x 2 points and N labels")
        if not 1 <= len(points) <= MAX_POINTS or not np.isin(labels, (0, 1, 2, 3)).all():
            raise PromptError(f"a restored prompt holds 1 to {MAX_POINTS} points labelled 0 to 3")
        return Prompt(points, labels)

    @staticmethod
    def _check_object(object_id: int) -> None:
        if isinstance(object_id, bool) or not isinstance(object_id, int | np.integer):
            raise PromptError(f"object ID must be an integer, got {object_id!r}")
        if object_id < 0:
            raise PromptError(f"object ID must not be negative, got {object_id}")

    def _prompt(self, points: Sequence[Sequence[float]], labels: Sequence[int]) -> Prompt:
        try:
            xy = np.asarray(points, dtype=np.float64)
        except (TypeError, ValueError):
            raise PromptError("points must be a list of [x, y] pairs of numbers") from None
        if xy.size == 0:
            raise PromptError("at least one point is needed")
        if xy.ndim != 2 or xy.shape[1] != 2:
            raise PromptError("points must be a list of [x, y] pairs of numbers")
        if len(labels) != len(xy):
            raise PromptError(
                f"points and labels differ in length: {len(xy)} points, {len(labels)} labels"
            )
        if any(isinstance(label, bool) or label not in (0, 1, 2, 3) for label in labels):
            raise PromptError(
                "labels must be 1 (positive), 0 (negative), 2 (box top-left) "
                "or 3 (box bottom-right)"
            )
        kinds = np.asarray(labels, dtype=np.int8)
        if np.isin(kinds, BOX_LABELS).any():
            box_check(xy, kinds)
        if not np.isfinite(xy).all() or (xy < 0).any() or (xy > 1).any():
            raise PromptError("point coordinates must be normalized to [0, 1]")
        size = np.array([self.frames.width - 1, self.frames.height - 1], dtype=np.float64)
        return Prompt(xy * size, kinds)
