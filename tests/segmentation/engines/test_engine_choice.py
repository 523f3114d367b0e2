"""Which engine answers when none is named: the official files in the models folder, and whether
there is a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from segmentation.engines.choice import EngineChoice, engine_choose


def folder(tmp_path: Path, *names: str) -> Path:
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    return tmp_path


def no_gpu_asked() -> bool:
    raise AssertionError("the GPU was asked about with no SAM 2 file there")


def test_a_fresh_machine_gets_classic(tmp_path: Path) -> None:
    assert engine_choose(tmp_path / "missing", gpu=no_gpu_asked) == EngineChoice(
        "classic", "", f"no learned checkpoint in {tmp_path / 'missing'}"
    )
    assert engine_choose(folder(tmp_path, "notes.txt"), gpu=no_gpu_asked).engine == "classic"


def test_edgetam_answers_where_it_is(tmp_path: Path) -> None:
    assert engine_choose(folder(tmp_path, "edgetam.pt"), gpu=no_gpu_asked) == EngineChoice(
        "sam2", "edgetam", f"edgetam.pt in {tmp_path}"
    )


@pytest.mark.parametrize(
    ("files", "checkpoint"),
    [
        (("sam2.1_hiera_tiny.pt",), "tiny"),
        (("sam2.1_hiera_tiny.pt", "sam2.1_hiera_large.pt", "sam2_hiera_large.pt"), "large"),
        (("sam2_hiera_base_plus.pt", "sam2.1_hiera_small.pt"), "small"),
        (("sam2_hiera_base_plus.pt", "edgetam.pt"), "sam2_hiera_base_plus"),
    ],
)
def test_on_a_gpu_the_largest_sam_2_1_file_wins(
    tmp_path: Path, files: tuple[str, ...], checkpoint: str
) -> None:
    chosen = engine_choose(folder(tmp_path, *files), gpu=lambda: True)

    assert (chosen.engine, chosen.checkpoint) == ("sam2", checkpoint)
    assert chosen.reason.startswith("a GPU, and ")


def test_without_a_gpu_sam_2_files_wait_and_edgetam_answers(tmp_path: Path) -> None:
    models = folder(tmp_path, "sam2.1_hiera_small.pt")
    assert engine_choose(models, gpu=lambda: False) == EngineChoice(
        "classic",
        "",
        f"sam2.1_hiera_small.pt is in {models}, but there is no GPU to run SAM 2 at interactive"
        " speed; fetch EdgeTAM for a CPU (manage.py sam2_weights fetch edgetam)",
    )

    folder(tmp_path, "edgetam.pt")
    assert engine_choose(models, gpu=lambda: False) == EngineChoice(
        "sam2",
        "edgetam",
        f"edgetam.pt in {models} (and sam2.1_hiera_small.pt, left for a GPU)",
    )
