"""SAM 2's model sizes and EdgeTAM, defined in Python, and how to tell a checkpoint's model from
its weights.

The four sizes (tiny, small, base_plus, large) differ only in the Hiera trunk. SAM 2.1 adds three
things over SAM 2.0, all visible in the weights: a learned "no object" memory embedding and a
projected, signed temporal encoding of the object pointers. EdgeTAM is SAM 2.0's design with a
RepViT-M1 trunk, a perceiver that compresses each memory to 512 tokens, and a memory attention
of 2 layers in place of 4.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class TrunkConfig:
    embed_dim: int = 96
    num_heads: int = 1
    stages: tuple[int, ...] = (1, 2, 7, 2)
    global_att_blocks: tuple[int, ...] = (5, 7, 9)
    background_size: tuple[int, int] = (7, 7)  # the interpolated part of the position embedding
    window_spec: tuple[int, ...] = (8, 4, 14, 7)


@dataclass(frozen=True)
class ModelConfig:
    trunk: TrunkConfig = field(default_factory=TrunkConfig)
    version: str = "2.1"
    image_size: int = 1024
    d_model: int = 256  # width of the image features, prompts and mask decoder
    mem_dim: int = 64  # width of the memories
    memory_layers: int = 4
    memory_feedforward: int = 2048
    decoder_mlp_dim: int = 2048
    decoder_heads: int = 8
    num_maskmem: int = 7  # the conditioning frame and six previous ones
    max_obj_ptrs: int = 16
    backbone: str = "hiera"  # or "repvit_m1" (EdgeTAM; ``trunk`` is then unused)
    perceiver_latents: int = 0  # EdgeTAM: 256 global + 256 on a grid per memory; 0: none

    @property
    def signed_pointer_positions(self) -> bool:
        """SAM 2.1: object pointers carry a projected, signed temporal encoding and a memory of
        "no object here" is learned; SAM 2.0 has neither."""
        return self.version == "2.1"

    @property
    def feature_size(self) -> int:
        return self.image_size // 16

    @property
    def family(self) -> str:
        return "EdgeTAM" if self.backbone == "repvit_m1" else f"SAM {self.version}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ModelConfig:
        values = dict(raw)
        trunk = {k: tuple(v) if isinstance(v, list) else v for k, v in values.pop("trunk").items()}
        return cls(trunk=TrunkConfig(**trunk), **values)


TRUNKS = {
    "tiny": TrunkConfig(),
    "small": TrunkConfig(stages=(1, 2, 11, 2), global_att_blocks=(7, 10, 13)),
    "base_plus": TrunkConfig(
        embed_dim=112,
        num_heads=2,
        stages=(2, 3, 16, 3),
        global_att_blocks=(12, 16, 20),
        background_size=(14, 14),
    ),
    "large": TrunkConfig(
        embed_dim=144,
        num_heads=2,
        stages=(2, 6, 36, 4),
        global_att_blocks=(23, 33, 43),
        background_size=(7, 7),
        window_spec=(8, 4, 16, 8),
    ),
}

# Official file names: sam2.1_hiera_tiny.pt, sam2_hiera_base_plus.pt, ...
MODEL_SIZES = {
    f"{prefix}_hiera_{name}": ModelConfig(trunk=trunk, version=version)
    for name, trunk in TRUNKS.items()
    for prefix, version in (("sam2.1", "2.1"), ("sam2", "2.0"))
}
EDGETAM = ModelConfig(version="2.0", memory_layers=2, backbone="repvit_m1", perceiver_latents=256)
MODEL_SIZES["edgetam"] = EDGETAM
SIZE_ALIASES = {name: f"sam2.1_hiera_{name}" for name in TRUNKS}


def size_config(name: str) -> ModelConfig:
    """The config named ``name``: an official stem (``sam2_hiera_small``) or a bare size
    (``small``, meaning SAM 2.1); :class:`KeyError` for anything else."""
    return MODEL_SIZES[SIZE_ALIASES.get(name, name)]


def size_infer(state: Mapping[str, torch.Tensor]) -> str | None:
    """The official model whose shapes these weights have, or ``None``."""
    if (
        "image_encoder.trunk.body.stem.conv1.c.weight" in state
        and "spatial_perceiver.latents" in state
    ):
        return "edgetam"
    embed = state.get("image_encoder.trunk.pos_embed")
    if embed is None:
        return None
    blocks = {key.split(".")[3] for key in state if key.startswith("image_encoder.trunk.blocks.")}
    version = "2.1" if "no_obj_embed_spatial" in state else "2.0"
    for name, config in MODEL_SIZES.items():
        trunk = config.trunk
        if (
            config.backbone == "hiera"
            and config.version == version
            and trunk.embed_dim == embed.shape[1]
            and tuple(embed.shape[2:]) == trunk.background_size
            and sum(trunk.stages) == len(blocks)
        ):
            return name
    return None
