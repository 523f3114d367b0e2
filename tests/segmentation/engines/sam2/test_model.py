"""The SAM 2 network and its checkpoints, on the CPU with a small random configuration.

Numerical parity with the reference implementation (``sam2==1.1.0``) is measured outside the
repository (benchmarks/sam2_parity.py, docs/engines.md); these tests hold the shapes, the file
format and the errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from segmentation.engines.sam2.checkpoint import CheckpointError, checkpoint_load
from segmentation.engines.sam2.config import MODEL_SIZES, size_infer
from segmentation.engines.sam2.layers import RoPEAttention
from segmentation.engines.sam2.model import Sam2Model
from segmentation.engines.sam2.tracker import Tracker
from tests.segmentation.engines.sam2.small import SMALL, small_checkpoint, small_model

# The published parameter counts, in millions: 38.9, 46, 80.8 and 224.4.
PARAMETERS = {
    "sam2.1_hiera_tiny": 38_962_498,
    "sam2.1_hiera_small": 46_060_354,
    "sam2.1_hiera_base_plus": 80_850_178,
    "sam2.1_hiera_large": 224_446_642,
    "sam2_hiera_tiny": 38_945_986,
    "sam2_hiera_small": 46_043_842,
    "sam2_hiera_base_plus": 80_833_666,
    "sam2_hiera_large": 224_430_130,
    "edgetam": 13_895_794,  # as EdgeTAM's own predictor counts its parameters
}


@pytest.mark.parametrize("name", sorted(MODEL_SIZES))
def test_official_sizes_have_the_published_parameter_counts_and_are_recognised(name: str) -> None:
    with torch.device("meta"):
        model = Sam2Model(MODEL_SIZES[name])

    assert sum(p.numel() for p in model.parameters()) == PARAMETERS[name]
    assert size_infer(model.state_dict()) == name


def test_official_key_layout() -> None:
    with torch.device("meta"):
        state = Sam2Model(MODEL_SIZES["sam2.1_hiera_tiny"]).state_dict()

    assert len(state) == 471
    shapes = {
        "image_encoder.trunk.pos_embed": (1, 96, 7, 7),
        "image_encoder.trunk.blocks.11.mlp.layers.1.weight": (768, 3072),
        "image_encoder.neck.convs.0.conv.weight": (256, 768, 1, 1),
        "memory_attention.layers.3.cross_attn_image.k_proj.weight": (256, 64),
        "memory_encoder.mask_downsampler.encoder.12.weight": (256, 256, 1, 1),
        "memory_encoder.fuser.layers.1.gamma": (256,),
        "sam_prompt_encoder.pe_layer.positional_encoding_gaussian_matrix": (2, 128),
        # a box's corners (labels 2 and 3) have learned embeddings of their own
        "sam_prompt_encoder.point_embeddings.2.weight": (1, 256),
        "sam_prompt_encoder.point_embeddings.3.weight": (1, 256),
        "sam_mask_decoder.pred_obj_score_head.layers.2.weight": (1, 256),
        "maskmem_tpos_enc": (7, 1, 1, 64),
        "obj_ptr_tpos_proj.weight": (64, 256),
        "no_obj_embed_spatial": (1, 64),
    }
    assert {key: tuple(state[key].shape) for key in shapes} == shapes


def test_edgetam_key_layout() -> None:
    with torch.device("meta"):
        state = Sam2Model(MODEL_SIZES["edgetam"]).state_dict()

    assert len(state) == 982  # what EdgeTAM's predictor's state dict holds, timm's keys included
    shapes = {
        "image_encoder.trunk.body.stem.conv1.c.weight": (24, 3, 3, 3),
        "image_encoder.trunk.body.stages_0.blocks.0.se.fc1.weight": (16, 48, 1, 1),
        "image_encoder.trunk.body.stages_2.blocks.13.token_mixer.conv1.bn.running_var": (192,),
        "image_encoder.trunk.body.stages_3.downsample.channel_downsample.c.weight": (
            384,
            192,
            1,
            1,
        ),
        "image_encoder.neck.convs.0.conv.weight": (256, 384, 1, 1),
        "memory_attention.layers.1.cross_attn_image.k_proj.weight": (256, 64),
        "spatial_perceiver.latents": (256, 64),
        "spatial_perceiver.latents_2d": (256, 64),
        "spatial_perceiver.layers.1.attn.to_kv.weight": (128, 64),
        "spatial_perceiver.layers.1.self_ff.3.weight": (64, 256),
        "maskmem_tpos_enc": (7, 1, 1, 64),
    }
    assert {key: tuple(state[key].shape) for key in shapes} == shapes
    assert "memory_attention.layers.2.norm1.weight" not in state
    assert "no_obj_embed_spatial" not in state


def test_edgetam_norms_fold_into_the_same_function() -> None:
    # given EdgeTAM's trunk with trained-looking batch-norm statistics
    torch.manual_seed(0)
    model = Sam2Model(MODEL_SIZES["edgetam"]).eval()
    trunk = model.image_encoder.trunk
    for norm in trunk.modules():
        if isinstance(norm, torch.nn.BatchNorm2d):
            norm.running_mean.normal_(0, 0.1)
            norm.running_var.uniform_(0.5, 1.5)
            norm.weight.data.normal_(1, 0.1)
            norm.bias.data.normal_(0, 0.1)
    image = torch.randn(1, 3, 128, 128)
    with torch.inference_mode():
        before = trunk(image)

    # when
    model.fold_norms()

    # then no norm is left, and every stage computes what it did
    with torch.inference_mode():
        after = trunk(image)
    assert [m for m in trunk.modules() if isinstance(m, torch.nn.BatchNorm2d)] == []
    assert [tuple(t.shape) for t in after] == [
        (1, 48, 32, 32),
        (1, 96, 16, 16),
        (1, 192, 8, 8),
        (1, 384, 4, 4),
    ]
    assert max((a - b).abs().max().item() for a, b in zip(after, before, strict=True)) < 1e-4


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    original = small_model(seed=3)
    path = small_checkpoint(tmp_path / "small.pt", seed=3)

    loaded = checkpoint_load(path)

    assert loaded.config == SMALL
    assert not loaded.training
    expected, found = original.state_dict(), loaded.state_dict()
    assert list(found) == list(expected)
    assert all(torch.equal(found[key], expected[key]) for key in expected)
    assert list(tmp_path.iterdir()) == [path]  # no partial file left behind


def test_official_layout_without_config_is_sized_from_its_weights(tmp_path: Path) -> None:
    with torch.device("meta"):
        shapes = Sam2Model(MODEL_SIZES["sam2_hiera_tiny"]).state_dict()
    state = {key: torch.zeros(value.shape) for key, value in shapes.items()}
    torch.save({"model": state}, tmp_path / "sam2_hiera_tiny.pt")

    model = checkpoint_load(tmp_path / "sam2_hiera_tiny.pt")

    assert model.config == MODEL_SIZES["sam2_hiera_tiny"]
    assert model.no_obj_embed_spatial is None


def test_missing_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as error:
        checkpoint_load(tmp_path / "absent.pt")

    assert str(error.value) == f"{tmp_path / 'absent.pt'}: no such checkpoint file"


def test_truncated_checkpoint(tmp_path: Path) -> None:
    path = small_checkpoint(tmp_path / "cut.pt")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    with pytest.raises(CheckpointError) as error:
        checkpoint_load(path)

    assert str(error.value).startswith(
        "cut.pt: cannot be read as a PyTorch checkpoint (truncated or not one?): "
    )


def test_not_a_state_dict(tmp_path: Path) -> None:
    torch.save({"model": {"weights": [1, 2, 3]}}, tmp_path / "odd.pt")

    with pytest.raises(CheckpointError) as error:
        checkpoint_load(tmp_path / "odd.pt")

    assert str(error.value) == "odd.pt: not a SAM 2 checkpoint (no state dict of tensors)"


def test_mismatched_checkpoint_names_the_first_offending_keys(tmp_path: Path) -> None:
    state = small_model().state_dict()
    del state["no_obj_ptr"]
    del state["no_mem_embed"]
    state["image_encoder.extra"] = torch.zeros(1)
    state["maskmem_tpos_enc"] = torch.zeros(3, 1, 1, 8)
    torch.save({"model": state, "config": SMALL.as_dict()}, tmp_path / "bad.pt")

    with pytest.raises(CheckpointError) as error:
        checkpoint_load(tmp_path / "bad.pt")

    assert str(error.value) == (
        "bad.pt does not fit the model: missing keys: no_mem_embed, no_obj_ptr; "
        "unexpected keys: image_encoder.extra; "
        "mismatched shapes: maskmem_tpos_enc (3, 1, 1, 8) instead of (7, 1, 1, 8)"
    )


def test_unsized_weights_ask_for_a_model_size(tmp_path: Path) -> None:
    torch.save({"model": small_model().state_dict()}, tmp_path / "mine.pt")

    with pytest.raises(CheckpointError) as error:
        checkpoint_load(tmp_path / "mine.pt")

    assert str(error.value) == (
        "mine.pt: its weights match no SAM 2 model size nor EdgeTAM; name one with SAM2_MODEL_SIZE"
    )


def test_image_features_shapes() -> None:
    model = small_model()

    with torch.inference_mode():
        features = model.encode_image(torch.zeros(2, 3, 128, 128))

    assert tuple(features.stride4.shape) == (2, 4, 32, 32)
    assert tuple(features.stride8.shape) == (2, 8, 16, 16)
    assert tuple(features.top.shape) == (2, 32, 8, 8)
    assert tuple(features.top_pos.shape) == (2, 32, 8, 8)


def _frames(count: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    return torch.randn(count, 3, 128, 128, generator=generator)


def _track(model: Sam2Model, images: torch.Tensor) -> list[dict[int, torch.Tensor]]:
    def features(index: int):
        return model.encode_image(images[index : index + 1])

    tracker = Tracker(model, len(images), features, storage=torch.device("cpu"))
    with torch.inference_mode():
        tracker.add_clicks(0, 1, np.array([[40.0, 50.0]]), np.array([1]))
        tracker.add_clicks(0, 2, np.array([[90.0, 60.0], [40.0, 50.0]]), np.array([1, 0]))
        results = [tracker.logits(0)]
        tracker.prepare()
        results += [tracker.track(frame, reverse=False) for frame in range(len(images))]
    return results


def test_tracking_shapes_and_memory_bank() -> None:
    model = small_model()

    results = _track(model, _frames(4))

    assert len(results) == 5
    assert all(list(result) == [1, 2] for result in results)
    assert all(tuple(v.shape) == (1, 1, 32, 32) for r in results for v in r.values())
    assert torch.equal(results[0][1], results[1][1])  # the clicked frame keeps its result


def test_tracking_is_deterministic() -> None:
    model, images = small_model(), _frames(3)

    first, second = _track(model, images), _track(model, images)

    assert all(torch.equal(a[k], b[k]) for a, b in zip(first, second, strict=True) for k in a)


def test_weights_kept_in_bfloat16_track_exactly_as_autocast_casting_them_each_call() -> None:
    # given one model whose weights autocast casts on every call, and one that keeps them cast
    images = _frames(3)
    cast_each_call, kept_cast = small_model(), small_model()
    kept_cast.weights_cast(torch.bfloat16)

    # when both track under bfloat16 autocast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected, kept = _track(cast_each_call, images), _track(kept_cast, images)

    # then every mask is the same to the bit
    assert all(torch.equal(a[k], b[k]) for a, b in zip(expected, kept, strict=True) for k in a)


def test_objects_batched_or_alone_agree() -> None:
    """Two objects clicked on the same frame are tracked as one batch; each alone gives the
    same logits (to float rounding)."""
    model, images = small_model(), _frames(3)

    together = _track(model, images)

    def features(index: int):
        return model.encode_image(images[index : index + 1])

    alone = Tracker(model, 3, features, storage=torch.device("cpu"))
    with torch.inference_mode():
        alone.add_clicks(0, 2, np.array([[90.0, 60.0], [40.0, 50.0]]), np.array([1, 0]))
        alone.prepare()
        tracked = [alone.track(frame, reverse=False)[2] for frame in range(3)]
    gaps = [(t - r[2]).abs().max().item() for t, r in zip(tracked, together[1:], strict=True)]
    assert max(gaps) < 1e-4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="this machine has no CUDA device")
def test_attention_to_memories_on_a_gpu_takes_no_cudnn_kernel() -> None:
    # given a memory attention layer on a GPU, in bfloat16 (where cuDNN's attention is eligible)
    layer = RoPEAttention(256, 1, grid=64, kv_in_dim=64, repeat_keys=True).cuda().bfloat16()
    queries = torch.randn(1, 64 * 64, 256, device="cuda", dtype=torch.bfloat16)

    # when it attends to 1 to 3 memories and 4 object pointers
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for memories in (1, 2, 3):
            keys = torch.randn(1, memories * 64 * 64 + 4, 64, device="cuda", dtype=torch.bfloat16)
            layer(queries, keys, keys, keys_without_rope=4)
    torch.cuda.synchronize()

    # then it runs a fused kernel each time, never cuDNN's (which plans each new length anew)
    names = [event.key for event in profile.key_averages()]
    assert not [name for name in names if "cudnn_attention" in name]
    fused = [n for n in names if "flash_attention" in n or "efficient_attention" in n]
    assert fused, names
