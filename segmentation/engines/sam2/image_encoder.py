"""The image encoder: a Hiera backbone (windowed attention, pooled queries between its four
stages; EdgeTAM's RepViT in its place, :mod:`.repvit`) and a feature-pyramid neck that brings
every stage to the model width.

The encoder returns the stride-4, stride-8 and stride-16 maps; the stride-32 map only feeds the
stride-16 one from above and is then dropped.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.engines.sam2.config import TrunkConfig
from segmentation.engines.sam2.layers import MLP, SinePositionGrid


def windows_split(x: torch.Tensor, size: int) -> tuple[torch.Tensor, tuple[int, int]]:
    """``B x H x W x C`` to ``B·n x size x size x C`` windows, padding the bottom and right."""
    batch, height, width, channels = x.shape
    pad_h, pad_w = -height % size, -width % size
    if pad_h or pad_w:
        x = F.pad(x, (0, 0, 0, pad_w, 0, pad_h))
    padded = (height + pad_h, width + pad_w)
    x = x.view(batch, padded[0] // size, size, padded[1] // size, size, channels)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, size, size, channels), padded


def windows_merge(
    windows: torch.Tensor, size: int, padded: tuple[int, int], shape: tuple[int, int]
) -> torch.Tensor:
    """The inverse of :func:`windows_split`, cropping the padding away."""
    rows, columns = padded[0] // size, padded[1] // size
    batch = windows.shape[0] // (rows * columns)
    x = windows.reshape(batch, rows, columns, size, size, -1)
    x = x.permute(0, 1, 3, 2, 4, 5).reshape(batch, padded[0], padded[1], -1)
    return x[:, : shape[0], : shape[1]]


def _pool(x: torch.Tensor, pool: nn.Module | None) -> torch.Tensor:
    """Max-pool a channels-last map."""
    if pool is None:
        return x
    return pool(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


class PatchEmbed(nn.Module):
    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=7, stride=4, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).permute(0, 2, 3, 1)


class MultiScaleAttention(nn.Module):
    """Self-attention whose queries may be max-pooled (the first block of a stage)."""

    def __init__(self, dim: int, dim_out: int, num_heads: int, q_pool: nn.Module | None) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.q_pool = q_pool
        self.qkv = nn.Linear(dim, dim_out * 3)
        self.proj = nn.Linear(dim_out, dim_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, height, width, _ = x.shape
        q, k, v = self.qkv(x).reshape(batch, height * width, 3, self.num_heads, -1).unbind(2)
        if self.q_pool is not None:
            q = _pool(q.reshape(batch, height, width, -1), self.q_pool)
            height, width = q.shape[1:3]
            q = q.reshape(batch, height * width, self.num_heads, -1)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        )
        return self.proj(out.transpose(1, 2).reshape(batch, height, width, -1))


class MultiScaleBlock(nn.Module):
    def __init__(
        self, dim: int, dim_out: int, num_heads: int, window_size: int, pool_queries: bool
    ) -> None:
        super().__init__()
        self.dim, self.dim_out = dim, dim_out
        self.window_size = window_size
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.pool = nn.MaxPool2d(kernel_size=2, stride=2) if pool_queries else None
        self.attn = MultiScaleAttention(dim, dim_out, num_heads, self.pool)
        self.norm2 = nn.LayerNorm(dim_out, eps=1e-6)
        self.mlp = MLP(dim_out, dim_out * 4, dim_out, num_layers=2, activation=nn.GELU)
        if dim != dim_out:
            self.proj = nn.Linear(dim, dim_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.norm1(x)
        if self.dim != self.dim_out:
            shortcut = _pool(self.proj(x), self.pool)
        window = self.window_size
        if window:
            x, padded = windows_split(x, window)
        x = self.attn(x)
        if window:
            if self.pool is not None:  # the windows shrank with the queries
                window //= 2
                height, width = shortcut.shape[1:3]
                padded = (height + -height % window, width + -width % window)
            x = windows_merge(x, window, padded, shortcut.shape[1:3])
        x = shortcut + x
        return x + self.mlp(self.norm2(x))


class Hiera(nn.Module):
    def __init__(self, config: TrunkConfig) -> None:
        super().__init__()
        self.stage_ends = [sum(config.stages[: i + 1]) - 1 for i in range(len(config.stages))]
        pooled = {end + 1 for end in self.stage_ends[:-1]}
        self.patch_embed = PatchEmbed(config.embed_dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, config.embed_dim, *config.background_size))
        window = config.window_spec[0]
        self.pos_embed_window = nn.Parameter(torch.zeros(1, config.embed_dim, window, window))
        self._positions: dict[tuple, torch.Tensor] = {}
        dim, heads, stage = config.embed_dim, config.num_heads, 0
        blocks = []
        for index in range(sum(config.stages)):
            # A stage's first block pools its queries and still works in the previous stage's
            # windows, which the pooling halves.
            dim_out = dim
            window = 0 if index in config.global_att_blocks else config.window_spec[stage]
            if index - 1 in self.stage_ends:
                dim_out, heads, stage = dim * 2, heads * 2, stage + 1
            blocks.append(MultiScaleBlock(dim, dim_out, heads, window, index in pooled))
            dim = dim_out
        self.blocks = nn.ModuleList(blocks)
        self.channels = [self.blocks[end].dim_out for end in self.stage_ends]

    def _position(self, height: int, width: int) -> torch.Tensor:
        # the same for every frame: made once per size and weights (their versions count their
        # in-place changes, as loading a state dict makes), not 27 ms of bicubic every frame
        window = self.pos_embed_window
        key = (height, width, self.pos_embed._version, window._version, window.device)
        reuse = not torch.is_grad_enabled() and not torch.compiler.is_compiling()
        if reuse and key in self._positions:
            return self._positions[key]
        background = F.interpolate(self.pos_embed, size=(height, width), mode="bicubic")
        tiles = (height // window.shape[-2], width // window.shape[-1])
        position = (background + window.tile(1, 1, *tiles)).permute(0, 2, 3, 1)
        if reuse:
            self._positions = {key: position}
        return position

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.patch_embed(x)
        x = x + self._position(*x.shape[1:3])
        stages = []
        for index, block in enumerate(self.blocks):
            x = block(x)
            if index in self.stage_ends:
                stages.append(x.permute(0, 3, 1, 2))
        return stages


class FpnNeck(nn.Module):
    """1x1 convolutions to ``d_model`` per stage; the two coarsest levels also take the level
    above, upsampled (nearest)."""

    TOP_DOWN_LEVELS = (2, 3)

    def __init__(self, d_model: int, channels: list[int]) -> None:
        super().__init__()
        # convs[0] serves the coarsest stage.
        self.convs = nn.ModuleList(
            nn.Sequential() for _ in channels
        )  # named ``convs.N.conv`` as in the checkpoints
        for sequence, width in zip(self.convs, reversed(channels), strict=True):
            sequence.add_module("conv", nn.Conv2d(width, d_model, kernel_size=1))
        self.position_encoding = SinePositionGrid(d_model)

    def forward(self, stages: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        last = len(stages) - 1
        features: list[torch.Tensor] = [torch.empty(0)] * len(stages)
        above = None
        for level in range(last, -1, -1):
            lateral = self.convs[last - level](stages[level])
            if level in self.TOP_DOWN_LEVELS and above is not None:
                above = lateral + F.interpolate(above.float(), scale_factor=2.0, mode="nearest")
            else:
                above = lateral
            features[level] = above
        return features, [self.position_encoding(f) for f in features]


class ImageEncoder(nn.Module):
    """A trunk (Hiera, or EdgeTAM's RepViT: any module with ``channels`` that returns its four
    stages' maps) and the neck."""

    def __init__(self, trunk: nn.Module, d_model: int) -> None:
        super().__init__()
        self.trunk = trunk
        self.neck = FpnNeck(d_model, trunk.channels)

    def forward(self, images: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Feature maps at strides 4, 8 and 16 and their position encodings."""
        features, positions = self.neck(self.trunk(images))
        return features[:-1], positions[:-1]
