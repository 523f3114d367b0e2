"""The annotation loop as people work it, scored over the whole video after every round.

Round 1: each object's first click on frame 0 (:func:`~segmentation.evaluation.clicks.first_click`),
then one propagation from frame 0. Every later round, for each object in turn: the frame where
that object's J is lowest now (ties: the earliest) gets the simulated user's next click there
(:func:`~segmentation.evaluation.clicks.next_click`: the largest error region, positive or
negative; added to the clicks already there), then one propagation from that frame. This is the
loop of the DAVIS Interactive benchmark (Caelles et al., 2018), with one click per interaction.

After each round J and F are taken on every frame (the clicked ones too: they are part of the
video the user gets), averaged per object over the frames, then over the objects. Only the time
spent inside the engine (clicks and propagations) counts towards a round's seconds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import numpy as np

from segmentation.engines.base import Engine, Masks, VideoState
from segmentation.evaluation.clicks import Click, first_click, next_click
from segmentation.evaluation.davis import Sequence
from segmentation.evaluation.metrics import boundary_measure, region_similarity
from segmentation.evaluation.runner import Progress

TARGET_JF = 0.80  # rounds_to_target counts the rounds until the video's J&F reaches this
# the engine's time budget for a round: a propagation of every frame and object at this rate
BUDGET_FPS = 15.0


@dataclass(frozen=True)
class Corrections:
    """One sequence through the loop: J, F and J&F after each round, the rounds needed to reach
    J&F ``TARGET_JF`` (rounds + 1 when never reached), and the engine's seconds each round took,
    also as frames x objects per second (the round's rate, against ``BUDGET_FPS``)."""

    J_per_round: tuple[float, ...]
    F_per_round: tuple[float, ...]
    JF_per_round: tuple[float, ...]
    rounds_to_target: int
    seconds_per_round: tuple[float, ...]
    slowest_fps: float  # the slowest round's frames x objects per second of engine time

    def as_dict(self) -> dict[str, object]:
        return {
            "J_per_round": _rounded(self.J_per_round),
            "F_per_round": _rounded(self.F_per_round),
            "JF_per_round": _rounded(self.JF_per_round),
            "rounds_to_80": self.rounds_to_target,
            "seconds_per_round": _rounded(self.seconds_per_round),
            "slowest_fps": round(self.slowest_fps, 4),
        }


def rounds_needed(jf_per_round: tuple[float, ...] | list[float], threshold: float) -> int:
    """The first round whose J&F reaches ``threshold``; the rounds run + 1 if none does."""
    for count, value in enumerate(jf_per_round, start=1):
        if value >= threshold:
            return count
    return len(jf_per_round) + 1


def corrections_sequence(
    engine: Engine, sequence: Sequence, *, rounds: int, progress: Progress | None = None
) -> Corrections:
    """``rounds`` rounds of the loop on ``sequence``; ``progress`` hears of every frame that a
    propagation yields."""
    frames = sequence.frames()
    state = engine.open(frames)
    try:
        loop = _Loop(state, sequence, progress)
        for round_number in range(rounds):
            loop.round(first=round_number == 0)
    finally:
        state.close()
        frames.close()
    jf = tuple((j + f) / 2 for j, f in zip(loop.j_rounds, loop.f_rounds, strict=True))
    work = len(loop.truths) * len(loop.object_ids)
    return Corrections(
        J_per_round=tuple(loop.j_rounds),
        F_per_round=tuple(loop.f_rounds),
        JF_per_round=jf,
        rounds_to_target=rounds_needed(jf, TARGET_JF),
        seconds_per_round=tuple(loop.seconds),
        slowest_fps=min(work / max(seconds, 1e-9) for seconds in loop.seconds),
    )


def corrections_mean(results: list[Corrections]) -> dict[str, object]:
    def columns(name: str) -> list[float]:
        per_round = zip(*(getattr(result, name) for result in results), strict=True)
        return _rounded(tuple(statistics.fmean(column) for column in per_round))

    return {
        "J_per_round": columns("J_per_round"),
        "F_per_round": columns("F_per_round"),
        "JF_per_round": columns("JF_per_round"),
        "rounds_to_80": round(statistics.fmean(r.rounds_to_target for r in results), 4),
        "seconds_per_round": columns("seconds_per_round"),
        "slowest_fps": round(min(r.slowest_fps for r in results), 4),
    }


class _Loop:
    """The simulated user's side of the loop: the truth, the masks the engine gave last on every
    frame, and their J and F (kept per frame and object, recomputed only where a mask changed)."""

    def __init__(self, state: VideoState, sequence: Sequence, progress: Progress | None) -> None:
        self.state, self.progress = state, progress
        self.truths = [sequence.truth(index) for index in range(state.frame_count)]
        self.object_ids = sorted(self.truths[0])
        shape = (state.frames.height, state.frames.width)
        self.empty = np.zeros(shape, bool)
        count = len(self.truths)
        self.masks: list[Masks] = [{} for _ in range(count)]
        self.j = {object_id: np.zeros(count) for object_id in self.object_ids}
        self.f = {object_id: np.zeros(count) for object_id in self.object_ids}
        self.j_rounds: list[float] = []
        self.f_rounds: list[float] = []
        self.seconds: list[float] = []

    def round(self, *, first: bool) -> None:
        seconds = 0.0
        if first:
            for object_id in self.object_ids:
                seconds += self._click(0, object_id, first_click(self.truths[0][object_id]))
            seconds += self._propagate(0)
        else:
            for object_id in self.object_ids:
                frame_index = int(np.argmin(self.j[object_id]))  # the earliest of the lowest
                mask = self.masks[frame_index].get(object_id, self.empty)
                click = next_click(mask, self._truth(frame_index, object_id))
                if click is None:  # every frame of the object is exact
                    continue
                seconds += self._click(frame_index, object_id, click)
                seconds += self._propagate(frame_index)
        self.seconds.append(seconds)
        self.j_rounds.append(statistics.fmean(self.j[i].mean() for i in self.object_ids))
        self.f_rounds.append(statistics.fmean(self.f[i].mean() for i in self.object_ids))

    def _click(self, frame_index: int, object_id: int, click: Click) -> float:
        width, height = self.state.frames.width, self.state.frames.height
        started = time.perf_counter()
        self.state.add_points(
            frame_index=frame_index,
            object_id=object_id,
            points=[[click.x / (width - 1), click.y / (height - 1)]],
            labels=[int(click.positive)],
            clear_old_points=False,
        )
        return time.perf_counter() - started

    def _propagate(self, start: int) -> float:
        propagation = self.state.propagate(start_frame_index=start)
        seconds = 0.0
        while True:
            started = time.perf_counter()
            step = next(propagation, None)
            seconds += time.perf_counter() - started
            if step is None:
                return seconds
            frame_index, masks = step
            self._take(frame_index, masks)
            if self.progress is not None:
                self.progress(1)

    def _take(self, frame_index: int, masks: Masks) -> None:
        before = self.masks[frame_index]
        for object_id in self.object_ids:
            mask = masks.get(object_id, self.empty)
            if object_id in before and np.array_equal(before[object_id], mask):
                continue
            truth = self._truth(frame_index, object_id)
            self.j[object_id][frame_index] = region_similarity(mask, truth)
            self.f[object_id][frame_index] = boundary_measure(mask, truth)
        self.masks[frame_index] = {i: masks.get(i, self.empty) for i in self.object_ids}

    def _truth(self, frame_index: int, object_id: int) -> np.ndarray:
        return self.truths[frame_index].get(object_id, self.empty)


def _rounded(values: tuple[float, ...]) -> list[float]:
    return [round(value, 4) for value in values]
