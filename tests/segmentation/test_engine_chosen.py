"""The engine the process uses: ``SEGMENTATION_ENGINE`` when it names one; ``auto`` (unset), the
choice from the models folder, made by the segmentation app rather than the settings."""

from __future__ import annotations

from segmentation.engines.choice import EngineChoice
from segmentation.services.process_engine import engine_chosen, engine_chosen_options


def test_a_named_engine_is_used_with_its_options_as_given(settings, tmp_path):
    settings.SEGMENTATION_ENGINE = "classic"
    settings.SEGMENTATION_ENGINE_OPTIONS = {"band": "0.1"}
    settings.SAM2_ENGINE_OPTIONS = {"device": "cpu"}

    assert engine_chosen() == EngineChoice("classic", "", "SEGMENTATION_ENGINE is set")
    assert engine_chosen_options() == {"band": "0.1"}


def test_auto_chooses_from_the_models_folder_and_gives_sam2_its_options(settings, tmp_path):
    # given EdgeTAM's file in the models folder, no engine named, and options of both kinds
    (tmp_path / "edgetam.pt").write_bytes(b"x")
    settings.SEGMENTATION_ENGINE = "auto"
    settings.SAM2_MODELS_DIR = tmp_path
    settings.SAM2_ENGINE_OPTIONS = {"precision": "float32", "device": "cpu"}
    settings.SEGMENTATION_ENGINE_OPTIONS = {"device": "cuda"}

    # then sam2 answers with it, after the folder and the checkpoint chosen; the engine's own
    # options win over the SAM2_* variables
    assert engine_chosen() == EngineChoice("sam2", "edgetam", f"edgetam.pt in {tmp_path}")
    assert engine_chosen_options() == {
        "models_dir": str(tmp_path),
        "checkpoint": "edgetam",
        "precision": "float32",
        "device": "cuda",
    }


def test_auto_with_an_empty_models_folder_is_classic(settings, tmp_path):
    settings.SEGMENTATION_ENGINE = "auto"
    settings.SAM2_MODELS_DIR = tmp_path / "models"
    settings.SEGMENTATION_ENGINE_OPTIONS = {}

    assert engine_chosen() == EngineChoice(
        "classic", "", f"no learned checkpoint in {tmp_path / 'models'}"
    )
    assert engine_chosen_options() == {}
