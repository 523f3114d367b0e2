"""RepViT-M1, EdgeTAM's image trunk: a mobile CNN whose blocks are re-parameterizable.

EdgeTAM builds it with ``timm.create_model("repvit_m1.dist_in1k", features_only=True)``; this
module builds the same network under the same parameter names (``stem.conv1.c.weight``,
``stages_2.blocks.5.token_mixer.conv.bn.running_var``...), so ``edgetam.pt`` loads unchanged.
timm itself is not a dependency: ``import timm`` imports torchvision, and PyPI's torchvision
is built against CUDA PyTorch: beside a CPU build of PyTorch, the very machines EdgeTAM is
for, it fails at import (``operator torchvision::nms does not exist``). The parity benchmark
checks this trunk against timm's, through the official EdgeTAM predictor.

Trained with batch norms after every convolution; :func:`repvit_fold` folds them, and each
block's three parallel branches (3x3 depth-wise, 1x1 depth-wise, identity), into single
convolutions, RepViT's own re-parameterization for inference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

WIDTHS = (48, 96, 192, 384)  # per stage; strides 4, 8, 16, 32
DEPTHS = (2, 2, 14, 2)
MLP_RATIO = 2
SE_RATIO, SE_DIVISOR = 0.25, 8


class ConvNorm(nn.Sequential):
    """A bias-free convolution and its batch norm (``c``, ``bn``)."""

    def __init__(
        self, in_dim: int, out_dim: int, kernel: int = 1, stride: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        padding = (kernel - 1) // 2
        conv = nn.Conv2d(in_dim, out_dim, kernel, stride, padding, groups=groups, bias=False)
        self.add_module("c", conv)
        self.add_module("bn", nn.BatchNorm2d(out_dim))

    def folded(self) -> nn.Conv2d:
        conv, norm = self.c, self.bn
        scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)
        fused = nn.Conv2d(
            conv.in_channels,
            conv.out_channels,
            conv.kernel_size,
            conv.stride,
            conv.padding,
            groups=conv.groups,
            device=conv.weight.device,
        )
        fused.weight.data.copy_(conv.weight * scale[:, None, None, None])
        fused.bias.data.copy_(norm.bias - norm.running_mean * scale)
        return fused


class TokenMixer(nn.Module):
    """``x + dw3x3(x) + dw1x1(x)``, each convolution with its norm (timm's ``RepVggDw``)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv = ConvNorm(dim, dim, 3, groups=dim)
        self.conv1 = ConvNorm(dim, dim, 1, groups=dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + self.conv1(x) + x

    def folded(self) -> nn.Conv2d:
        fused = self.conv.folded()
        pointwise = self.conv1.folded()
        identity = torch.ones_like(pointwise.weight)
        fused.weight.data += F.pad(pointwise.weight + identity, (1, 1, 1, 1))
        fused.bias.data += pointwise.bias
        return fused


class SqueezeExcite(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = max(SE_DIVISOR, int(dim * SE_RATIO + SE_DIVISOR / 2) // SE_DIVISOR * SE_DIVISOR)
        self.fc1 = nn.Conv2d(dim, hidden, 1)
        self.fc2 = nn.Conv2d(hidden, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # pooling, not mean(): on channels-last maps it runs several times faster on the CPU
        gate = self.fc2(F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1))))
        return x * torch.sigmoid(gate)


class Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv1 = ConvNorm(dim, dim * MLP_RATIO)
        self.act = nn.GELU()
        self.conv2 = ConvNorm(dim * MLP_RATIO, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.act(self.conv1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, squeeze: bool) -> None:
        super().__init__()
        self.token_mixer: nn.Module = TokenMixer(dim)
        self.se = SqueezeExcite(dim) if squeeze else nn.Identity()
        self.channel_mixer = Mlp(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.se(self.token_mixer(x))
        return x + self.channel_mixer(x)


class Downsample(nn.Module):
    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.pre_block = Block(in_dim, squeeze=False)
        self.spatial_downsample = ConvNorm(in_dim, in_dim, 3, stride=2, groups=in_dim)
        self.channel_downsample = ConvNorm(in_dim, out_dim)
        self.ffn = Mlp(out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.channel_downsample(self.spatial_downsample(self.pre_block(x)))
        return x + self.ffn(x)


class Stage(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, depth: int) -> None:
        super().__init__()
        self.downsample = Downsample(in_dim, out_dim) if in_dim != out_dim else nn.Identity()
        # squeeze-and-excite on every other block, starting with the first
        self.blocks = nn.Sequential(*(Block(out_dim, squeeze=i % 2 == 0) for i in range(depth)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.downsample(x))


class Stem(nn.Module):
    def __init__(self, out_dim: int) -> None:
        super().__init__()
        self.conv1 = ConvNorm(3, out_dim // 2, 3, stride=2)
        self.act1 = nn.GELU()
        self.conv2 = ConvNorm(out_dim // 2, out_dim, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.act1(self.conv1(x)))


class RepViT(nn.Module):
    """The four stages' maps (strides 4, 8, 16, 32), as timm's ``features_only`` model."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = Stem(WIDTHS[0])
        previous = WIDTHS[0]
        for index, (width, depth) in enumerate(zip(WIDTHS, DEPTHS, strict=True)):
            self.add_module(f"stages_{index}", Stage(previous, width, depth))
            previous = width
        self.channels = list(WIDTHS)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        stages = []
        for index in range(len(WIDTHS)):
            x = getattr(self, f"stages_{index}")(x)
            stages.append(x)
        return stages


class RepViTTrunk(nn.Module):
    """EdgeTAM's trunk: the network under ``body``, as in its checkpoint."""

    def __init__(self) -> None:
        super().__init__()
        self.body = RepViT()
        self.channels = self.body.channels

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return self.body(x)


@torch.no_grad()
def repvit_fold(module: nn.Module) -> int:
    """Replace, in place, every convolution-and-norm and every token mixer under ``module`` by
    the single convolution it computes (eval mode: the norms' running statistics); returns how
    many modules were replaced."""
    replaced = 0
    for name, child in list(module.named_children()):
        if isinstance(child, ConvNorm | TokenMixer):
            setattr(module, name, child.folded())
            replaced += 1
        else:
            replaced += repvit_fold(child)
    return replaced
