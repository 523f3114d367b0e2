"""Running an engine over a sequence the way a user would, and scoring what it returns.

For each object of the first frame, clicks are added one round at a time (every object's first
click, then every object's second...) following :mod:`segmentation.evaluation.clicks`; then the
masks are propagated through the sequence from the first frame (or, in the first-mask protocol,
every object's true mask is given on the first frame instead of clicks, as in the DAVIS 2016
semi-supervised benchmark). J and F are averaged over every
frame but the first, per object, then over the objects. Only time spent inside the engine counts
towards the speed figures.

The interactive part alone (:func:`interactive_sequence`): the same user clicks a fixed number of
rounds on the first frame, and J there is taken after each round; NoC@85 and NoC@90 are the
rounds needed to reach J 0.85 and 0.90 (the standard measure of interactive segmentation, with at
most 20 clicks), counted as the most allowed when never reached.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from segmentation.davis_png import labels_png_write
from segmentation.engines.base import Engine, Masks, VideoState
from segmentation.evaluation.clicks import first_click, next_click
from segmentation.evaluation.davis import Sequence
from segmentation.evaluation.metrics import boundary_measure, region_similarity

Progress = Callable[[int], None]  # called with the number of frames just done


@dataclass(frozen=True)
class Score:
    J: float  # region similarity
    F: float  # boundary measure
    JF: float  # their mean
    fps: float  # propagation: frames x objects per second
    click_ms: float  # median time to answer one click

    def as_dict(self) -> dict[str, float]:
        return {key: round(value, 4) for key, value in asdict(self).items()}


def score_mean(scores: list[Score]) -> Score:
    def mean(name: str) -> float:
        return statistics.fmean(getattr(score, name) for score in scores)

    return Score(mean("J"), mean("F"), mean("JF"), mean("fps"), mean("click_ms"))


def evaluate_sequence(
    engine: Engine,
    sequence: Sequence,
    *,
    clicks: int,
    progress: Progress | None = None,
    dump_dir: Path | None = None,
    first_mask: bool = False,
) -> Score:
    """J, F and speed of ``engine`` on ``sequence``: after ``clicks`` rounds of the simulated
    user on the first frame, or, with ``first_mask``, with each object's true mask given there
    (the semi-supervised protocol of DAVIS 2016)."""
    frames = sequence.frames()
    state = engine.open(frames)
    try:
        first_truth = sequence.truth(0)
        object_ids = sorted(first_truth)
        if first_mask:
            click_seconds = masks_give(state, first_truth)
        else:
            click_seconds = clicks_simulate(state, first_truth, clicks=clicks)
        regions: dict[int, list[float]] = {object_id: [] for object_id in object_ids}
        boundaries: dict[int, list[float]] = {object_id: [] for object_id in object_ids}
        propagation = state.propagate(start_frame_index=0)
        engine_seconds, frame_count = 0.0, 0
        while True:
            started = time.perf_counter()
            step = next(propagation, None)
            engine_seconds += time.perf_counter() - started
            if step is None:
                break
            frame_index, masks = step
            frame_count += 1
            if dump_dir is not None:
                _dump(dump_dir, sequence.annotation_paths[frame_index].name, masks, frames)
            if frame_index > 0:
                truth = sequence.truth(frame_index)
                for object_id in object_ids:
                    mask = masks.get(object_id, _empty(frames))
                    expected = truth.get(object_id, _empty(frames))
                    regions[object_id].append(region_similarity(mask, expected))
                    boundaries[object_id].append(boundary_measure(mask, expected))
            if progress is not None:
                progress(1)
    finally:
        state.close()
        frames.close()
    region = statistics.fmean(statistics.fmean(values) for values in regions.values())
    boundary = statistics.fmean(statistics.fmean(values) for values in boundaries.values())
    return Score(
        J=region,
        F=boundary,
        JF=(region + boundary) / 2,
        fps=frame_count * len(object_ids) / engine_seconds if engine_seconds else 0.0,
        click_ms=statistics.median(click_seconds) * 1000 if click_seconds else 0.0,
    )


def masks_give(state: VideoState, truths: dict[int, np.ndarray]) -> list[float]:
    """Every object's true mask given on frame 0; the seconds each took the engine."""
    seconds = []
    for object_id, truth in truths.items():
        started = time.perf_counter()
        state.add_mask(frame_index=0, object_id=object_id, mask=truth)
        seconds.append(time.perf_counter() - started)
    return seconds


def clicks_simulate(
    state: VideoState, truths: dict[int, np.ndarray], *, clicks: int
) -> list[float]:
    """The simulated user: up to ``clicks`` clicks per object on frame 0, a round at a time,
    against the objects' true masks there; the seconds each click took the engine."""
    seconds: list[float] = []
    for _ in click_rounds(state, truths, rounds=clicks, seconds=seconds):
        pass
    return seconds


def click_rounds(
    state: VideoState, truths: dict[int, np.ndarray], *, rounds: int, seconds: list[float]
) -> Iterator[Masks]:
    """Each round of the simulated user's clicks on frame 0 (one click per object, none for an
    object already exact), yielding the masks after it; appends each click's engine time to
    ``seconds``."""
    width, height = state.frames.width, state.frames.height
    masks: Masks = {}
    for round_ in range(rounds):
        for object_id, truth in truths.items():
            if round_ == 0:
                click = first_click(truth)
            else:
                click = next_click(masks.get(object_id, np.zeros_like(truth)), truth)
                if click is None:
                    continue
            started = time.perf_counter()
            masks = state.add_points(
                frame_index=0,
                object_id=object_id,
                points=[[click.x / (width - 1), click.y / (height - 1)]],
                labels=[int(click.positive)],
                clear_old_points=False,
            )
            seconds.append(time.perf_counter() - started)
        yield masks


@dataclass(frozen=True)
class Interactive:
    """The clicked frame alone: its J after each round of clicks, and the number of clicks
    (rounds) needed to reach J 0.85 and 0.90 (the most allowed when never reached)."""

    J_per_click: tuple[float, ...]
    NoC85: int
    NoC90: int
    click_ms: float

    def as_dict(self) -> dict[str, object]:
        return {
            "J_per_click": [round(value, 4) for value in self.J_per_click],
            "NoC85": self.NoC85,
            "NoC90": self.NoC90,
            "click_ms": round(self.click_ms, 4),
        }


def clicks_needed(j_per_click: list[float] | tuple[float, ...], threshold: float) -> int:
    """NoC: the first click count whose J reaches ``threshold``; the most allowed if none."""
    for count, value in enumerate(j_per_click, start=1):
        if value >= threshold:
            return count
    return len(j_per_click)


def interactive_sequence(engine: Engine, sequence: Sequence, *, max_clicks: int) -> Interactive:
    """The simulated user clicks ``max_clicks`` rounds on the first frame; J there after each."""
    frames = sequence.frames()
    state = engine.open(frames)
    try:
        truths = sequence.truth(0)
        seconds: list[float] = []
        j_per_click = []
        for masks in click_rounds(state, truths, rounds=max_clicks, seconds=seconds):
            regions = [
                region_similarity(masks.get(object_id, np.zeros_like(truth)), truth)
                for object_id, truth in truths.items()
            ]
            j_per_click.append(statistics.fmean(regions))
    finally:
        state.close()
        frames.close()
    return Interactive(
        J_per_click=tuple(j_per_click),
        NoC85=clicks_needed(j_per_click, 0.85),
        NoC90=clicks_needed(j_per_click, 0.90),
        click_ms=statistics.median(seconds) * 1000,
    )


def interactive_mean(results: list[Interactive]) -> dict[str, object]:
    columns = zip(*(result.J_per_click for result in results), strict=True)
    return {
        "J_per_click": [round(statistics.fmean(column), 4) for column in columns],
        "NoC85": round(statistics.fmean(result.NoC85 for result in results), 4),
        "NoC90": round(statistics.fmean(result.NoC90 for result in results), 4),
        "click_ms": round(statistics.fmean(result.click_ms for result in results), 4),
    }


def _empty(frames) -> np.ndarray:
    return np.zeros((frames.height, frames.width), bool)


def _dump(folder: Path, name: str, masks: Masks, frames) -> None:
    """One palette PNG per frame, pixel value = object ID (DAVIS layout)."""
    labels = np.zeros((frames.height, frames.width), np.uint8)
    for object_id, mask in masks.items():
        labels[mask] = object_id
    folder.mkdir(parents=True, exist_ok=True)
    labels_png_write(labels, str(folder / name))
