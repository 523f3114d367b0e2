"""EdgeTAM's spatial perceiver: a memory (``B x mem x h x w``, 4096 tokens at 1024 pixels)
compressed to 512 tokens before the memory attention reads it.

- 256 global latents cross-attend to the whole map (its position encoding added to keys and
  values); they carry no position of their own.
- 256 2D latents, one per cell of a 16 x 16 grid over the map, each attending only to its
  own cell's tokens; they take the grid's sine encoding as their position, and the memory
  attention rotates their keys on that grid.

Both go through the same layers: cross-attention, feed-forward, self-attention, feed-forward,
each residual. Parameter names follow EdgeTAM's checkpoint. EdgeTAM's own code reshapes the
2D latents with ``view`` after ``expand``, which fails for more than one object (its issue
15); here objects are a batch like any other.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.engines.sam2.layers import SinePositionGrid


def feed_forward(dim: int, mult: int = 4) -> nn.Sequential:
    return nn.Sequential(
        nn.LayerNorm(dim),
        nn.Linear(dim, dim * mult, bias=False),
        nn.GELU(),
        nn.Linear(dim * mult, dim, bias=False),
    )


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Single-head attention of ``B x N x C`` tensors, given to the fused kernel with their head
    axis (with three axes it takes the slower unfused path on the CPU)."""
    return F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]


class CrossAttention(nn.Module):
    """Single-head attention of normalized latents to normalized inputs."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm_x = nn.LayerNorm(dim)
        self.norm_latents = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(
        self, latents: torch.Tensor, x: torch.Tensor, pos: torch.Tensor | None
    ) -> torch.Tensor:
        q = self.to_q(self.norm_latents(latents))
        k, v = self.to_kv(self.norm_x(x)).chunk(2, dim=-1)
        if pos is not None:
            k, v = k + pos, v + pos
        return self.to_out(_attend(q, k, v))


class SelfAttention(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.to_out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        if x.shape[-2] == 1:  # one token attends to itself alone: its value
            return self.to_out(F.linear(x, self.to_kv.weight[x.shape[-1] :]))
        k, v = self.to_kv(x).chunk(2, dim=-1)
        return self.to_out(_attend(self.to_q(x), k, v))


class PerceiverLayer(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.attn = CrossAttention(dim)
        self.ff = feed_forward(dim)
        self.self_attn = SelfAttention(dim)
        self.self_ff = feed_forward(dim)

    def forward(
        self, latents: torch.Tensor, x: torch.Tensor, pos: torch.Tensor | None = None
    ) -> torch.Tensor:
        latents = latents + self.attn(latents, x, pos)
        latents = latents + self.ff(latents)
        latents = latents + self.self_attn(latents)
        return latents + self.self_ff(latents)


class SpatialPerceiver(nn.Module):
    def __init__(self, dim: int, latents: int = 256, grid: int = 16, depth: int = 2) -> None:
        super().__init__()
        self.grid = grid
        self.latents = nn.Parameter(torch.randn(latents, dim))
        self.latents_2d = nn.Parameter(torch.randn(grid * grid, dim))
        self.layers = nn.ModuleList(PerceiverLayer(dim) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.position_encoding = SinePositionGrid(dim)

    @property
    def global_tokens(self) -> int:
        """How many leading tokens of each compressed memory have no position (not rotated)."""
        return self.latents.shape[0]

    def forward(self, memory: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``B x C x h x w`` memory and position to ``B x tokens x C`` latents and their
        position encoding (zero for the global latents)."""
        batch, channels, height, _ = memory.shape
        x = memory.flatten(2).transpose(1, 2)
        global_latents = self.latents.expand(batch, -1, -1)
        key_pos = pos.flatten(2).transpose(1, 2)
        for layer in self.layers:
            global_latents = layer(global_latents, x, key_pos)
        cell = height // self.grid
        windows = (
            memory.permute(0, 2, 3, 1)
            .reshape(batch, self.grid, cell, self.grid, cell, channels)
            .transpose(2, 3)
            .reshape(batch * self.grid * self.grid, cell * cell, channels)
        )
        local = self.latents_2d.repeat(batch, 1)[:, None]  # B·cells x 1 x C
        for layer in self.layers:
            local = layer(local, windows)
        local = local.reshape(batch, self.grid * self.grid, channels)
        latents = self.norm(torch.cat([global_latents, local], dim=1))
        return latents, self.position(memory.dtype).expand(batch, -1, -1)

    def position(self, dtype: torch.dtype) -> torch.Tensor:
        """The latents' position encoding, ``1 x tokens x C``: zero for the global ones."""
        probe = self.latents_2d.new_empty(1, 1, self.grid, self.grid)
        grid = self.position_encoding(probe).flatten(2).transpose(1, 2)
        zeros = grid.new_zeros(1, self.global_tokens, grid.shape[-1])
        return torch.cat([zeros, grid], dim=1).to(dtype)
