"""A SAM 2 configuration small enough to run in the tests on a CPU: every part, a fraction of
the width and depth, at 128x128 pixels."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from segmentation.engines.sam2.checkpoint import checkpoint_save
from segmentation.engines.sam2.config import ModelConfig, TrunkConfig
from segmentation.engines.sam2.model import Sam2Model

SMALL = ModelConfig(
    trunk=TrunkConfig(
        embed_dim=8,
        num_heads=1,
        stages=(1, 1, 2, 1),
        global_att_blocks=(3,),
        background_size=(4, 4),
        window_spec=(4, 4, 4, 4),
    ),
    image_size=128,
    d_model=32,
    mem_dim=8,
    memory_layers=2,
    memory_feedforward=64,
    decoder_mlp_dim=64,
    decoder_heads=2,
)


def small_model(seed: int = 0, config: ModelConfig = SMALL) -> Sam2Model:
    torch.manual_seed(seed)
    model = Sam2Model(config).eval()
    with torch.no_grad():  # random weights seldom see an object; lean them towards one
        model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(2.0)
    return model


def small_checkpoint(path: Path, seed: int = 0, config: ModelConfig = SMALL) -> Path:
    checkpoint_save(small_model(seed, config), path)
    return path


# EdgeTAM's parts around its fixed RepViT trunk, narrowed; 256 pixels, so that the memories'
# 16 x 16 map is the perceiver's grid.
SMALL_EDGETAM = dataclasses.replace(
    SMALL, version="2.0", image_size=256, backbone="repvit_m1", perceiver_latents=16
)
