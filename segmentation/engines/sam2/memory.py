"""SAM 2's memory: the encoder that turns a frame's features and mask into a memory, and the
attention that conditions a new frame's features on the memories and object pointers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.engines.sam2.layers import LayerNorm2d, RoPEAttention, SinePositionGrid


@dataclass(frozen=True)
class MemoryLayout:
    """The tokens of one memory: ``prefix`` tokens without a position, then a ``grid`` x
    ``grid`` map (SAM 2: the frame's feature map; EdgeTAM: its perceiver's latents)."""

    prefix: int
    grid: int


class MaskDownSampler(nn.Module):
    """Four stride-2 convolutions (x4 channels each) and a 1x1 projection: mask to feature size."""

    def __init__(self, embed_dim: int, steps: int = 4) -> None:
        super().__init__()
        self.encoder = nn.Sequential()
        channels = 1
        for _ in range(steps):
            self.encoder.append(nn.Conv2d(channels, channels * 4, 3, stride=2, padding=1))
            self.encoder.append(LayerNorm2d(channels * 4))
            self.encoder.append(nn.GELU())
            channels *= 4
        self.encoder.append(nn.Conv2d(channels, embed_dim, kernel_size=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


class CXBlock(nn.Module):
    """A ConvNeXt block: depth-wise 7x7, layer norm, pointwise MLP, layer scale, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm2d(dim)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dwconv(x)).permute(0, 2, 3, 1)
        y = self.gamma * self.pwconv2(self.act(self.pwconv1(y)))
        return x + y.permute(0, 3, 1, 2)


class Fuser(nn.Module):
    def __init__(self, dim: int, depth: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(CXBlock(dim) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class MemoryEncoder(nn.Module):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.mask_downsampler = MaskDownSampler(in_dim)
        self.pix_feat_proj = nn.Conv2d(in_dim, in_dim, kernel_size=1)
        self.fuser = Fuser(in_dim)
        self.out_proj = nn.Conv2d(in_dim, out_dim, kernel_size=1)
        self.position_encoding = SinePositionGrid(out_dim)

    def forward(
        self, features: torch.Tensor, masks: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``masks``: image-size maps already squashed into [-10, 10]; the memory and its
        position encoding."""
        x = self.pix_feat_proj(features) + self.mask_downsampler(masks)
        x = self.out_proj(self.fuser(x))
        return x, self.position_encoding(x)


class MemoryAttentionLayer(nn.Module):
    def __init__(
        self, d_model: int, mem_dim: int, feedforward: int, grid: int, memory_layout: MemoryLayout
    ) -> None:
        super().__init__()
        self.self_attn = RoPEAttention(d_model, 1, grid=grid)
        self.cross_attn_image = RoPEAttention(
            d_model,
            1,
            grid=grid,
            key_grid=memory_layout.grid,
            key_prefix=memory_layout.prefix,
            kv_in_dim=mem_dim,
            repeat_keys=True,
        )
        self.linear1 = nn.Linear(d_model, feedforward)
        self.linear2 = nn.Linear(feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_pos: torch.Tensor, pointers: int
    ) -> torch.Tensor:
        y = self.norm1(x)
        x = x + self.self_attn(y, y, y)
        x = x.expand(memory.shape[0], -1, -1)  # the frame's tokens, met by each object's memories
        y = self.norm2(x)
        x = x + self.cross_attn_image(y, memory + memory_pos, memory, keys_without_rope=pointers)
        y = self.norm3(x)
        return x + self.linear2(F.relu(self.linear1(y)))


class MemoryAttention(nn.Module):
    """Batch-first: the current frame's ``B x HW x C`` tokens (a ``grid x grid`` map) attend to
    ``B x M x mem_dim`` memory tokens (whole memories laid out as ``memory_layout`` says),
    followed by ``pointers`` object-pointer tokens."""

    def __init__(
        self,
        d_model: int,
        mem_dim: int,
        feedforward: int,
        depth: int,
        grid: int,
        memory_layout: MemoryLayout,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            MemoryAttentionLayer(d_model, mem_dim, feedforward, grid, memory_layout)
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self,
        current: torch.Tensor,
        current_pos: torch.Tensor,
        memory: torch.Tensor,
        memory_pos: torch.Tensor,
        pointers: int,
    ) -> torch.Tensor:
        if current.shape[0] > 1 and current.stride(0) == 0 and current_pos.stride(0) == 0:
            # objects tracked together share the frame's tokens until they meet their memories:
            # the first self-attention is the same for all of them, and runs once
            current, current_pos = current[:1], current_pos[:1]
        x = current + 0.1 * current_pos
        for layer in self.layers:
            x = layer(x, memory, memory_pos, pointers)
        return self.norm(x)
