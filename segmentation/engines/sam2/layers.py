"""Layers shared by SAM 2's parts: MLPs, channel-first layer norm, attention with optional rotary
position encoding, and the three position encodings (2D sine for feature maps, random Fourier
features for prompts, 1D sine for temporal offsets).

Attribute names follow the official checkpoints' keys, so their state dicts load unchanged.
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

# Attention to memories, whose count changes from frame to frame (it grows over the first frames
# of a pass, and with every clicked frame), on a GPU: every fused kernel but cuDNN's, which
# builds an execution plan on the host for each new length. On an H100 a first pass of SAM 2.1
# tiny with three objects spent 812 ms of 24 frames' host time there, and ran at 32 frames/s
# where the second, its plans cached, ran at 50 (docs/benchmarks.md, "SAM 2 on a GPU").
ANY_LENGTH_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class MLP(nn.Module):
    """``num_layers`` linear layers with an activation between them (none after the last)."""

    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        output_dim: int,
        num_layers: int,
        activation: type[nn.Module] = nn.ReLU,
        sigmoid_output: bool = False,
    ) -> None:
        super().__init__()
        widths = [input_dim, *[hidden_dim] * (num_layers - 1), output_dim]
        self.layers = nn.ModuleList(
            nn.Linear(width_in, width_out) for width_in, width_out in itertools.pairwise(widths)
        )
        self.act = activation()
        self.sigmoid_output = sigmoid_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        last = len(self.layers) - 1
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < last:
                x = self.act(x)
        return torch.sigmoid(x) if self.sigmoid_output else x


class LayerNorm2d(nn.Module):
    """Layer norm over the channels of a ``B x C x H x W`` map."""

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the fused kernel over the last axis; on a channels-last map both permutes are free
        channels_last = x.permute(0, 2, 3, 1)
        normed = F.layer_norm(channels_last, (x.shape[1],), self.weight, self.bias, self.eps)
        return normed.permute(0, 3, 1, 2)


class Attention(nn.Module):
    """Multi-head attention whose inner width may be smaller than its input (``downsample_rate``)
    and whose keys and values may come from another width (``kv_in_dim``). Batch first."""

    def __init__(
        self,
        embedding_dim: int,
        num_heads: int,
        downsample_rate: int = 1,
        kv_in_dim: int | None = None,
    ) -> None:
        super().__init__()
        inner = embedding_dim // downsample_rate
        if inner % num_heads:
            raise ValueError(f"{num_heads} heads do not divide the width {inner}")
        kv_in_dim = kv_in_dim or embedding_dim
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embedding_dim, inner)
        self.k_proj = nn.Linear(kv_in_dim, inner)
        self.v_proj = nn.Linear(kv_in_dim, inner)
        self.out_proj = nn.Linear(inner, embedding_dim)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, width = x.shape
        return x.reshape(batch, tokens, self.num_heads, width // self.num_heads).transpose(1, 2)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        out = F.scaled_dot_product_attention(q, k, v)
        batch, heads, tokens, width = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(batch, tokens, heads * width))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self._attend(
            self._heads(self.q_proj(q)), self._heads(self.k_proj(k)), self._heads(self.v_proj(v))
        )


class RoPEAttention(Attention):
    """Attention with 2D axial rotary position encoding over a square grid of queries.

    The keys are either the queries' own grid, or (``repeat_keys``) several memories one after
    another, each ``key_prefix`` unrotated tokens then a ``key_grid`` x ``key_grid`` rotated
    grid (SAM 2: no prefix, the queries' grid; EdgeTAM: 256 global latents, then 16 x 16),
    followed by ``keys_without_rope`` tokens that are not rotated (object pointers).
    """

    def __init__(
        self,
        *args: object,
        grid: int,
        key_grid: int | None = None,
        key_prefix: int = 0,
        rope_theta: float = 10000.0,
        repeat_keys: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.repeat_keys = repeat_keys
        self.key_prefix = key_prefix
        head_width = self.q_proj.out_features // self.num_heads
        # made once, outside any compiled graph; not part of the checkpoints
        rotation = axial_rotation(head_width, grid, grid, rope_theta)
        self.register_buffer("rotation", rotation, persistent=False)
        key_grid = key_grid or grid
        key_rotation = axial_rotation(head_width, key_grid, key_grid, rope_theta)
        self.register_buffer("key_rotation", key_rotation, persistent=False)

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keys_without_rope: int = 0
    ) -> torch.Tensor:
        q = self._heads(self.q_proj(q))
        k = self._heads(self.k_proj(k))
        v = self._heads(self.v_proj(v))
        if q.shape[-2] != self.rotation.shape[0]:
            raise ValueError(
                f"rotary encoding made for {self.rotation.shape[0]} tokens, got {q.shape[-2]}"
            )
        rotated = k.shape[-2] - keys_without_rope
        if rotated != q.shape[-2] and not self.repeat_keys:
            raise ValueError("keys differ in length from the queries")
        q = rotate(q, self.rotation)
        if rotated > 0:
            k = torch.cat([self._keys_rotated(k[:, :, :rotated]), k[:, :, rotated:]], dim=2)
        if self.repeat_keys and q.is_cuda:
            with sdpa_kernel(ANY_LENGTH_BACKENDS):
                return self._attend(q, k, v)
        return self._attend(q, k, v)

    def _keys_rotated(self, k: torch.Tensor) -> torch.Tensor:
        batch, heads, tokens, width = k.shape
        per_memory = self.key_prefix + self.key_rotation.shape[0]
        if tokens % per_memory:
            raise ValueError(f"{tokens} keys are not whole memories of {per_memory} tokens")
        k = k.reshape(batch, heads, tokens // per_memory, per_memory, width)
        grid = rotate(k[..., self.key_prefix :, :], self.key_rotation)  # broadcast over memories
        if self.key_prefix:
            grid = torch.cat([k[..., : self.key_prefix, :], grid], dim=-2)
        return grid.reshape(batch, heads, tokens, width)


def axial_rotation(width: int, grid_x: int, grid_y: int, theta: float) -> torch.Tensor:
    """Unit complex rotations (``grid_x * grid_y`` x ``width / 2``): the first half of each row
    turns with the token's column, the second with its row."""
    frequencies = 1.0 / (theta ** (torch.arange(0, width, 4)[: width // 4].float() / width))
    index = torch.arange(grid_x * grid_y, dtype=torch.float32)
    column, row = index % grid_x, torch.div(index, grid_x, rounding_mode="floor")
    angles = torch.cat([torch.outer(column, frequencies), torch.outer(row, frequencies)], dim=-1)
    return torch.polar(torch.ones_like(angles), angles)


def rotate(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Rotate consecutive channel pairs of ``x`` (``... x tokens x width``) by ``rotation``."""
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * rotation).flatten(-2).type_as(x)


class SinePositionGrid(nn.Module):
    """The 2D sine/cosine encoding of a feature map's positions, ``channels`` deep (half for the
    row, half for the column), with coordinates normalized to (0, 2π]."""

    def __init__(self, channels: int, temperature: float = 10000.0) -> None:
        super().__init__()
        if channels % 2:
            raise ValueError("the sine encoding needs an even number of channels")
        self.half = channels // 2
        self.temperature = temperature
        self._grids: dict[tuple[int, int, torch.device], torch.Tensor] = {}

    def _axis(self, length: int, device: torch.device) -> torch.Tensor:
        position = torch.arange(1, length + 1, dtype=torch.float32, device=device)
        position = position / (length + 1e-6) * (2 * math.pi)
        steps = torch.arange(self.half, dtype=torch.float32, device=device)
        angles = position[:, None] / self.temperature ** (2 * (steps // 2) / self.half)
        return torch.stack([angles[:, 0::2].sin(), angles[:, 1::2].cos()], dim=2).flatten(1)

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[-2:]
        key = (height, width, x.device)
        grid = self._grids.get(key)
        if grid is None:
            rows = self._axis(height, x.device)[:, None, :].expand(height, width, self.half)
            columns = self._axis(width, x.device)[None, :, :].expand(height, width, self.half)
            grid = torch.cat([rows, columns], dim=-1).permute(2, 0, 1).contiguous()
            if not torch.compiler.is_compiling():  # a compiled graph's output may be reused
                self._grids[key] = grid
        return grid[None].expand(x.shape[0], -1, -1, -1).to(x.dtype)


class PositionEmbeddingRandom(nn.Module):
    """Random Fourier features of normalized 2D coordinates (the prompt encoder's encoding)."""

    def __init__(self, num_pos_feats: int) -> None:
        super().__init__()
        self.register_buffer("positional_encoding_gaussian_matrix", torch.randn(2, num_pos_feats))

    def encode(self, coords: torch.Tensor) -> torch.Tensor:
        """Coordinates in [0, 1] (``... x 2``, x then y) to features (``... x 2F``)."""
        angles = (2 * coords - 1) @ self.positional_encoding_gaussian_matrix * (2 * math.pi)
        return torch.cat([angles.sin(), angles.cos()], dim=-1)

    def grid(self, height: int, width: int) -> torch.Tensor:
        """The encoding of every cell centre of a ``height x width`` grid, ``C x H x W``."""
        device = self.positional_encoding_gaussian_matrix.device
        ys = (torch.arange(height, device=device, dtype=torch.float32) + 0.5) / height
        xs = (torch.arange(width, device=device, dtype=torch.float32) + 0.5) / width
        coords = torch.stack(
            [xs[None, :].expand(height, width), ys[:, None].expand(height, width)], dim=-1
        )
        return self.encode(coords).permute(2, 0, 1)


def sine_1d(positions: torch.Tensor, width: int, temperature: float = 10000.0) -> torch.Tensor:
    """Sines then cosines of ``positions`` at ``width / 2`` frequencies each."""
    half = width // 2
    steps = torch.arange(half, dtype=torch.float32, device=positions.device)
    angles = positions[:, None] / temperature ** (2 * (steps // 2) / half)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)
