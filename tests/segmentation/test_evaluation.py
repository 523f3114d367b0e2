"""The measures, the simulated user, DAVIS folders and the evaluate_vos command."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from segmentation.engines.base import Engine, Masks, VideoState
from segmentation.evaluation.clicks import Click, first_click, next_click
from segmentation.evaluation.corrections import rounds_needed
from segmentation.evaluation.davis import Sequence, SequenceError
from segmentation.evaluation.metrics import boundary, boundary_measure, region_similarity
from segmentation.evaluation.runner import clicks_needed, interactive_mean, interactive_sequence
from tests.conftest import ROOT, manage, project_env
from tests.segmentation.synthetic import Video, write_davis

SHARED_VOS = ROOT.parent / "shared" / "data" / "vos"


def box(top: int, left: int, bottom: int, right: int, shape=(100, 200)) -> np.ndarray:
    mask = np.zeros(shape, bool)
    mask[top:bottom, left:right] = True
    return mask


def test_region_similarity() -> None:
    # 40x40 and a 40x40 shifted by 10 rows: intersection 30x40, union 50x40
    assert region_similarity(box(10, 10, 50, 50), box(20, 10, 60, 50)) == 0.6
    assert region_similarity(box(0, 0, 0, 0), box(0, 0, 0, 0)) == 1.0
    assert region_similarity(box(0, 0, 5, 5), box(0, 0, 0, 0)) == 0.0


def test_boundary_is_the_inner_edge() -> None:
    edge = boundary(box(10, 10, 14, 15))

    assert edge.sum() == 4 * 5 - 2 * 3
    assert not edge[11:13, 11:14].any()


def test_boundary_measure_tolerance() -> None:
    # the tolerance is ceil(0.008 * diagonal) = ceil(0.008 * 223.6) = 2 pixels
    truth = box(20, 20, 60, 120)

    assert boundary_measure(box(22, 20, 62, 120), truth) == 1.0  # 2 pixels off: matched
    # 3 pixels off: of 276 edge pixels, only the short sides (38 + 38) and the 3 top pixels at
    # each end of the long side lie within 2 pixels of the other edge; by symmetry P = R = F
    shifted = boundary_measure(box(23, 20, 63, 120), truth)
    assert math.isclose(shifted, 82 / 276, rel_tol=1e-12)
    assert boundary_measure(box(0, 0, 0, 0), box(0, 0, 0, 0)) == 1.0
    assert boundary_measure(box(0, 0, 0, 0), truth) == 0.0


def test_first_click_is_the_deepest_point() -> None:
    # a 21x41 box: the farthest points from its edge are the middle row, first in row order
    assert first_click(box(10, 10, 31, 51)) == Click(x=20, y=20, positive=True)
    with pytest.raises(ValueError, match="not on this frame"):
        first_click(box(0, 0, 0, 0))


def test_next_click_goes_to_the_largest_error() -> None:
    truth = box(10, 10, 50, 90)
    # the mask misses a 40x20 strip on the right and covers a 10x10 patch outside
    mask = box(10, 10, 50, 70) | box(60, 150, 70, 160)

    assert next_click(mask, truth) == Click(x=79, y=19, positive=True)
    # once the strip is found, the extra patch is what is left
    assert next_click(truth | box(60, 150, 70, 160), truth) == Click(x=154, y=64, positive=False)
    assert next_click(truth, truth) is None


def test_sequence_with_palette_annotations(video: Video, tmp_path: Path) -> None:
    sequence = Sequence.load(write_davis(video, tmp_path / "shapes"))

    assert sequence.name == "shapes"
    assert sequence.object_ids() == [1, 2]
    truth = sequence.truth(5)
    assert np.array_equal(truth[1], video.masks[5][1])
    assert np.array_equal(truth[2], video.masks[5][2])


def test_sequence_with_binary_annotations(video: Video, tmp_path: Path) -> None:
    sequence = Sequence.load(write_davis(video, tmp_path / "shapes", palette=False))

    assert sequence.object_ids() == [1]
    assert np.array_equal(sequence.truth(0)[1], video.masks[0][1] | video.masks[0][2])


def test_sequence_needs_every_annotation(video: Video, tmp_path: Path) -> None:
    folder = write_davis(video, tmp_path / "shapes")
    (folder / "Annotations" / "00011.png").unlink()

    with pytest.raises(SequenceError) as raised:
        Sequence.load(folder)

    assert (
        str(raised.value)
        == "shapes: 12 frames but 11 annotations; every frame needs its ground truth"
    )


def test_evaluate_vos_writes_the_figures(video: Video, tmp_path: Path) -> None:
    # given two sequences under one folder
    write_davis(video, tmp_path / "data" / "shapes")
    write_davis(video, tmp_path / "data" / "shapes-binary", palette=False)
    out = tmp_path / "out" / "scores.json"

    result = manage(
        "evaluate_vos",
        str(tmp_path / "data"),
        "--clicks",
        "1,2",
        "--option",
        "work_size=320",
        "--json",
        str(out),
        "--dump-masks",
        str(tmp_path / "masks"),
        env=project_env(tmp_path / "var"),
    )

    assert result.returncode == 0, result.stderr
    figures = json.loads(out.read_text())
    assert list(figures) == ["protocol", "clicks"]
    assert figures["protocol"] == "clicks"
    assert list(figures["clicks"]) == ["1", "2"]
    for per_clicks in figures["clicks"].values():
        assert list(per_clicks) == ["sequences", "mean"]
        assert list(per_clicks["sequences"]) == ["shapes", "shapes-binary"]
        for score in [*per_clicks["sequences"].values(), per_clicks["mean"]]:
            assert list(score) == ["J", "F", "JF", "fps", "click_ms"]
        assert per_clicks["sequences"]["shapes"]["J"] > 0.85
        assert per_clicks["sequences"]["shapes"]["JF"] > 0.85
    assert "mean                          2" in result.stdout
    assert result.stderr.splitlines() == [
        "0/48 frames  shapes, 1 click",
        "12/48 frames  shapes-binary, 1 click",
        "24/48 frames  shapes, 2 clicks",
        "36/48 frames  shapes-binary, 2 clicks",
    ]
    # the masks are palette PNGs whose values are the object IDs
    dumped = np.asarray(Image.open(tmp_path / "masks" / "2" / "shapes" / "00007.png"))
    assert sorted(np.unique(dumped)) == [0, 1, 2]
    assert len(list((tmp_path / "masks" / "1" / "shapes-binary").glob("*.png"))) == 12


class RowsEngine(Engine):
    """Answers each object with the first N rows of its true mask on frame 0, N growing by a
    fixed number of rows with every click: known J after each click."""

    name = "rows"

    def __init__(self, sequence: Sequence, rows_per_click: int) -> None:
        super().__init__()
        self.truth, self.rows_per_click = sequence.truth(0), rows_per_click

    def open(self, frames) -> VideoState:
        return RowsState(frames, self)


class RowsState(VideoState):
    def __init__(self, frames, engine: RowsEngine) -> None:
        super().__init__(frames)
        self.engine = engine

    def _segment(self, frame_index: int, object_id: int) -> Masks:
        return self._masks(frame_index)

    def _masks(self, frame_index: int) -> Masks:
        masks = {}
        for object_id, prompts in self.prompts.items():
            truth = self.engine.truth[object_id]
            rows = np.flatnonzero(truth.any(axis=1))
            shown = len(prompts[0].points) * self.engine.rows_per_click
            masks[object_id] = truth & (np.arange(truth.shape[0]) < rows[0] + shown)[:, None]
        return masks

    def _cleared(self, frame_index: int, object_id: int) -> Masks:
        raise NotImplementedError

    def _masked(self, frame_index: int, object_id: int, mask: np.ndarray) -> None:
        raise NotImplementedError

    def _reset(self) -> None:
        raise NotImplementedError

    def _removed(self, object_id: int) -> None:
        raise NotImplementedError

    def _start_pass(self, frame_index: int) -> None:
        raise NotImplementedError

    def _track(self, frame_index: int, *, reverse: bool) -> Masks:
        raise NotImplementedError


def test_clicks_needed() -> None:
    assert clicks_needed([0.5, 0.86, 0.91], 0.85) == 2
    assert clicks_needed([0.5, 0.86, 0.91], 0.90) == 3
    assert clicks_needed([0.5, 0.6], 0.85) == 2  # never reached: the most allowed
    assert clicks_needed((0.95,), 0.90) == 1


def test_interactive_measures_the_clicked_frame_after_each_click(
    video: Video, tmp_path: Path
) -> None:
    # given a sequence of two objects (69 and 57 rows tall on frame 0), and an engine that shows
    # 18 more rows of each with every click
    sequence = Sequence.load(write_davis(video, tmp_path / "shapes"))
    engine = RowsEngine(sequence, rows_per_click=18)

    result = interactive_sequence(engine, sequence, max_clicks=6)

    expected = (0.2596878403, 0.5797894737, 0.8957531760, 1.0, 1.0, 1.0)
    assert result.J_per_click == pytest.approx(expected, abs=1e-10)
    assert (result.NoC85, result.NoC90) == (3, 4)
    mean = interactive_mean([result, result])
    assert mean == {
        "J_per_click": [0.2597, 0.5798, 0.8958, 1.0, 1.0, 1.0],
        "NoC85": 3,
        "NoC90": 4,
        "click_ms": round(result.click_ms, 4),
    }


def evaluate_shapes(video: Video, tmp_path: Path, *arguments: str):
    """``evaluate_vos`` with ``arguments`` on the synthetic sequence: its run and its JSON."""
    write_davis(video, tmp_path / "shapes")
    out = tmp_path / "scores.json"
    result = manage(
        "evaluate_vos",
        str(tmp_path / "shapes"),
        *arguments,
        "--option",
        "work_size=320",
        "--json",
        str(out),
        env=project_env(tmp_path / "var"),
    )
    assert result.returncode == 0, result.stderr
    return result, json.loads(out.read_text())


def test_evaluate_vos_interactive(video: Video, tmp_path: Path) -> None:
    result, figures = evaluate_shapes(video, tmp_path, "--clicks", "1", "--interactive", "3")

    assert list(figures) == ["protocol", "clicks", "interactive"]
    interactive = figures["interactive"]
    assert interactive["max_clicks"] == 3
    assert list(interactive["sequences"]) == ["shapes"]
    shapes = interactive["sequences"]["shapes"]
    assert list(shapes) == ["J_per_click", "NoC85", "NoC90", "click_ms"]
    assert len(shapes["J_per_click"]) == 3
    assert shapes["NoC85"] == clicks_needed(shapes["J_per_click"], 0.85)
    assert interactive["mean"]["J_per_click"] == shapes["J_per_click"]
    assert "NoC@85 NoC@90" in result.stdout


def test_evaluate_vos_first_mask_protocol(video: Video, tmp_path: Path) -> None:
    result, figures = evaluate_shapes(video, tmp_path, "--protocol", "first-mask")

    assert list(figures) == ["protocol", "first-mask"]
    assert figures["protocol"] == "first-mask"
    assert list(figures["first-mask"]) == ["sequences", "mean"]
    score = figures["first-mask"]["sequences"]["shapes"]
    assert list(score) == ["J", "F", "JF", "fps", "click_ms"]
    assert score["J"] > 0.9
    assert result.stderr.splitlines() == ["0/12 frames  shapes, first mask"]


def test_rounds_needed() -> None:
    assert rounds_needed([0.5, 0.81, 0.9], 0.80) == 2
    assert rounds_needed((0.80,), 0.80) == 1
    assert rounds_needed([0.5, 0.6, 0.7], 0.80) == 4  # never reached: the rounds run + 1


def test_evaluate_vos_corrections_protocol(video: Video, tmp_path: Path) -> None:
    result, figures = evaluate_shapes(video, tmp_path, "--protocol", "corrections", "--rounds", "3")

    assert list(figures) == ["protocol", "corrections"]
    assert figures["protocol"] == "corrections"
    corrections = figures["corrections"]
    assert list(corrections) == ["rounds", "sequences", "mean"]
    assert corrections["rounds"] == 3
    shapes = corrections["sequences"]["shapes"]
    assert list(shapes) == [
        "J_per_round",
        "F_per_round",
        "JF_per_round",
        "rounds_to_80",
        "seconds_per_round",
        "slowest_fps",
    ]
    per_round = ("J_per_round", "F_per_round", "JF_per_round", "seconds_per_round")
    assert [len(shapes[key]) for key in per_round] == [3, 3, 3, 3]
    rounds = zip(shapes["J_per_round"], shapes["F_per_round"], shapes["JF_per_round"], strict=True)
    for j, f, jf in rounds:
        assert jf == pytest.approx((j + f) / 2, abs=1e-4)
    assert shapes["rounds_to_80"] == rounds_needed(shapes["JF_per_round"], 0.80)
    # two objects, one click each on frame 0 and a propagation: both found on every frame, and
    # the corrections of the last pixels keep them found
    assert min(shapes["JF_per_round"]) > 0.95
    assert corrections["mean"]["JF_per_round"] == shapes["JF_per_round"]
    # 12 frames, 2 objects: a propagation in round 1, one per object in each later round
    assert result.stderr.splitlines() == ["0/60 frames  shapes, 3 rounds of corrections"]
    assert "J&F after each round" in result.stdout


BAD_ARGUMENTS = [
    (["--interactive", "101"], "--interactive takes 0..100 clicks, got 101"),
    (["--rounds", "0"], "--rounds takes 1..100 rounds, got 0"),
    (["--engine", "magic"], "engine 'magic': unknown engine 'magic' (engines: classic, sam2)"),
    (["--option", "work_size"], "--option takes KEY=VALUE, got 'work_size'"),
    (["--option", "work_size=1"], "engine 'classic': work_size must be within 64..4096, got 1"),
    (["--clicks", "0"], "--clicks takes positive integers separated by commas, got '0'"),
    (["--clicks", "a,b"], "--clicks takes positive integers separated by commas, got 'a,b'"),
]

# Each command line given as manage.py runs it (execute_from_command_line, which prints a
# CommandError to stderr and exits 1), one after the other in one process: its exit status and
# stderr, as JSON, for each.
REFUSALS = """
import contextlib, io, json, os, sys
import django
django.setup()
from django.core.management import execute_from_command_line
seen = []
for argv in json.loads(sys.argv[1]):
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            execute_from_command_line(["manage.py", *argv])
            status = 0
        except SystemExit as exit:
            status = exit.code
    seen.append([status, stderr.getvalue()])
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def refusals(video: Video, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``evaluate_vos`` on the synthetic sequence with each of ``BAD_ARGUMENTS``, and on a
    folder without sequences (keyed ``"empty"``), in one process (each command line in its own
    process took about 2 s to start): ``{key: (exit status, stderr)}``."""
    folder = tmp_path_factory.mktemp("refusals")
    sequence = write_davis(video, folder / "shapes")
    empty = folder / "empty"
    empty.mkdir()
    runs = {
        str(arguments): ["evaluate_vos", str(sequence), *arguments]
        for arguments, _ in BAD_ARGUMENTS
    }
    runs["empty"] = ["evaluate_vos", str(empty)]
    done = subprocess.run(
        [sys.executable, "-c", REFUSALS, json.dumps(list(runs.values()))],
        cwd=ROOT,
        env=project_env(folder / "var"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    return {key: tuple(answer) for key, answer in zip(runs, seen, strict=True)} | {
        "empty folder": str(empty)
    }


@pytest.mark.parametrize(("arguments", "message"), BAD_ARGUMENTS)
def test_evaluate_vos_bad_arguments(refusals: dict, arguments: list[str], message: str) -> None:
    status, stderr = refusals[str(arguments)]

    assert status == 1
    assert stderr.strip() == f"CommandError: {message}"


def test_evaluate_vos_refuses_a_folder_without_sequences(refusals: dict) -> None:
    status, stderr = refusals["empty"]

    assert status == 1
    assert stderr.strip() == (
        f"CommandError: {refusals['empty folder']} holds no DAVIS-layout sequence"
        " (JPEGImages/, Annotations/)"
    )


# A ratchet (issue 16): floors a little under what the committed engine reaches on the 19
# sequences of ../shared/data/vos, so that a regression fails here; raise them with each
# improvement. Measured with `manage.py evaluate_vos ../shared/data/vos --clicks 3` (classic,
# about 2 minutes on 2 cores): mean 3-click J&F 0.593, worst 0.186 (dog-agility: its third
# click removes a part that is mostly dog, and the propagation loses the dog). The targets are
# 0.75 and 0.40. That sequence's near-total failure swings with small changes (0.068 and 0.186
# a few changes apart), so the worst case keeps a wider margin than the mean.
DAVIS_MEAN_JF_FLOOR = 0.57
DAVIS_WORST_JF_FLOOR = 0.10


# The evaluations on ../shared/data/vos run in the background from the start of the suite
# (tests/background_evaluations.py).
NO_DAVIS = not SHARED_VOS.is_dir()
WITHOUT_DAVIS = "../shared/data/vos (DAVIS) is not present"


@pytest.mark.skipif(NO_DAVIS, reason=WITHOUT_DAVIS)
@pytest.mark.evaluation(str(SHARED_VOS), "--clicks", "3")
def test_quality_on_davis(evaluation: dict) -> None:
    """The default engine on real video, 3 clicks: neither the mean J&F nor the worst
    sequence's falls below the floors above."""
    figures = evaluation["clicks"]["3"]
    per_sequence = {name: score["JF"] for name, score in figures["sequences"].items()}
    assert figures["mean"]["JF"] >= DAVIS_MEAN_JF_FLOOR, per_sequence
    assert min(per_sequence.values()) >= DAVIS_WORST_JF_FLOOR, per_sequence


# The corrections protocol's ratchet (issue 27), 3 rounds to keep the suite's time: floors a
# little under what the committed engine reaches on the 19 sequences after each round, measured
# with `manage.py evaluate_vos ../shared/data/vos --protocol corrections --rounds 3` (about a
# minute on 2 cores; the figures of 8 rounds are in docs/segmentation-quality.md). Every round
# must also keep the mean from falling, and no sequence may be wiped out by a correction (the
# issue's engine left 8 of 18 sequences at J&F 0.000-0.006 after one).
CORRECTIONS_JF_FLOORS = (0.47, 0.50, 0.50)
CORRECTIONS_WORST_FLOOR = 0.12


@pytest.mark.skipif(NO_DAVIS, reason=WITHOUT_DAVIS)
@pytest.mark.evaluation(str(SHARED_VOS), "--protocol", "corrections", "--rounds", "3")
def test_corrections_on_davis(evaluation: dict) -> None:
    figures = evaluation["corrections"]
    mean = figures["mean"]["JF_per_round"]
    per_sequence = {name: score["JF_per_round"] for name, score in figures["sequences"].items()}
    assert len(mean) == 3
    for after, floor in zip(mean, CORRECTIONS_JF_FLOORS, strict=True):
        assert after >= floor, mean
    assert mean[1] >= mean[0] - 0.005, mean
    assert mean[2] >= mean[1] - 0.005, mean
    assert min(min(rounds) for rounds in per_sequence.values()) >= CORRECTIONS_WORST_FLOOR, (
        per_sequence
    )
