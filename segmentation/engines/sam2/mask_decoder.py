"""SAM's prompt encoder and mask decoder, as SAM 2 uses them.

The prompt encoder turns clicks into tokens (a Fourier encoding of the point plus a learned
embedding per label) and an optional mask into a dense map. The decoder runs a two-way
transformer between output tokens (object score, IoU, four mask tokens) plus the prompt tokens
and the image features, then upsamples the features, mixing in the stride-4 and stride-8 maps,
and turns each mask token into a mask by a dot product with them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from segmentation.engines.sam2.layers import MLP, Attention, LayerNorm2d, PositionEmbeddingRandom

LABEL_PADDING = -1


class PromptEncoder(nn.Module):
    def __init__(self, embed_dim: int, feature_size: int, image_size: int) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.feature_size = feature_size
        self.image_size = image_size
        self.pe_layer = PositionEmbeddingRandom(embed_dim // 2)
        # negative, positive, box top-left, box bottom-right
        self.point_embeddings = nn.ModuleList(nn.Embedding(1, embed_dim) for _ in range(4))
        self.not_a_point_embed = nn.Embedding(1, embed_dim)
        self.mask_downscaling = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=2, stride=2),
            LayerNorm2d(4),
            nn.GELU(),
            nn.Conv2d(4, 16, kernel_size=2, stride=2),
            LayerNorm2d(16),
            nn.GELU(),
            nn.Conv2d(16, embed_dim, kernel_size=1),
        )
        self.no_mask_embed = nn.Embedding(1, embed_dim)

    @property
    def mask_size(self) -> int:
        return self.feature_size * 4

    def dense_position(self) -> torch.Tensor:
        return self.pe_layer.grid(self.feature_size, self.feature_size)[None]

    def forward(
        self, points: torch.Tensor, labels: torch.Tensor, masks: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Point tokens (``B x N+1 x C``, a padding token added) and the dense map."""
        batch = points.shape[0]
        points = torch.cat([points + 0.5, points.new_zeros(batch, 1, 2)], dim=1)
        labels = torch.cat([labels, labels.new_full((batch, 1), LABEL_PADDING)], dim=1)
        tokens = self.pe_layer.encode(points / self.image_size)
        tokens = torch.where(
            (labels == LABEL_PADDING)[..., None],
            torch.zeros_like(tokens) + self.not_a_point_embed.weight,
            tokens,
        )
        for label, embedding in enumerate(self.point_embeddings):
            tokens = torch.where((labels == label)[..., None], tokens + embedding.weight, tokens)
        if masks is not None:
            dense = self.mask_downscaling(masks)
        else:
            size = self.feature_size
            dense = self.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(batch, -1, size, size)
        return tokens, dense


class TwoWayAttentionBlock(nn.Module):
    """Tokens attend to themselves, tokens to the image, an MLP on the tokens, the image to the
    tokens; position encodings are added to queries and keys at every step but the first."""

    def __init__(self, dim: int, heads: int, mlp_dim: int, skip_first_layer_pe: bool) -> None:
        super().__init__()
        self.self_attn = Attention(dim, heads)
        self.norm1 = nn.LayerNorm(dim)
        self.cross_attn_token_to_image = Attention(dim, heads, downsample_rate=2)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, mlp_dim, dim, num_layers=2)
        self.norm3 = nn.LayerNorm(dim)
        self.norm4 = nn.LayerNorm(dim)
        self.cross_attn_image_to_token = Attention(dim, heads, downsample_rate=2)
        self.skip_first_layer_pe = skip_first_layer_pe

    def forward(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        query_pe: torch.Tensor,
        key_pe: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.skip_first_layer_pe:
            queries = self.self_attn(queries, queries, queries)
        else:
            q = queries + query_pe
            queries = queries + self.self_attn(q, q, queries)
        queries = self.norm1(queries)
        queries = queries + self.cross_attn_token_to_image(queries + query_pe, keys + key_pe, keys)
        queries = self.norm2(queries)
        queries = self.norm3(queries + self.mlp(queries))
        keys = keys + self.cross_attn_image_to_token(keys + key_pe, queries + query_pe, queries)
        return queries, self.norm4(keys)


class TwoWayTransformer(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int, depth: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            TwoWayAttentionBlock(dim, heads, mlp_dim, skip_first_layer_pe=index == 0)
            for index in range(depth)
        )
        self.final_attn_token_to_image = Attention(dim, heads, downsample_rate=2)
        self.norm_final_attn = nn.LayerNorm(dim)

    def forward(
        self, image: torch.Tensor, image_pe: torch.Tensor, tokens: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys = image.flatten(2).permute(0, 2, 1)
        key_pe = image_pe.flatten(2).permute(0, 2, 1)
        queries = tokens
        for layer in self.layers:
            queries, keys = layer(queries, keys, tokens, key_pe)
        queries = queries + self.final_attn_token_to_image(queries + tokens, keys + key_pe, keys)
        return self.norm_final_attn(queries), keys


@dataclass(frozen=True)
class Decoded:
    masks: torch.Tensor  # B x M x 4H x 4W logits (M = 3 when several, else 1)
    ious: torch.Tensor  # B x M predicted IoU
    tokens: torch.Tensor  # B x M x C, the mask tokens behind the masks (for object pointers)
    object_scores: torch.Tensor  # B x 1 logit that the object is in the frame


class MaskDecoder(nn.Module):
    MASKS = 3  # candidate masks for an ambiguous prompt, beside the single-mask token
    STABILITY_DELTA = 0.05
    STABILITY_THRESHOLD = 0.98

    def __init__(self, dim: int, heads: int, mlp_dim: int) -> None:
        super().__init__()
        tokens = self.MASKS + 1
        self.transformer = TwoWayTransformer(dim, heads, mlp_dim)
        self.iou_token = nn.Embedding(1, dim)
        self.mask_tokens = nn.Embedding(tokens, dim)
        self.obj_score_token = nn.Embedding(1, dim)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(dim, dim // 4, kernel_size=2, stride=2),
            LayerNorm2d(dim // 4),
            nn.GELU(),
            nn.ConvTranspose2d(dim // 4, dim // 8, kernel_size=2, stride=2),
            nn.GELU(),
        )
        self.conv_s0 = nn.Conv2d(dim, dim // 8, kernel_size=1)
        self.conv_s1 = nn.Conv2d(dim, dim // 4, kernel_size=1)
        self.output_hypernetworks_mlps = nn.ModuleList(
            MLP(dim, dim, dim // 8, num_layers=3) for _ in range(tokens)
        )
        self.iou_prediction_head = MLP(dim, 256, tokens, num_layers=3, sigmoid_output=True)
        self.pred_obj_score_head = MLP(dim, dim, 1, num_layers=3)

    def forward(
        self,
        image: torch.Tensor,
        image_pe: torch.Tensor,
        sparse: torch.Tensor,
        dense: torch.Tensor,
        high_res: tuple[torch.Tensor, torch.Tensor],
        multimask: bool,
    ) -> Decoded:
        batch = sparse.shape[0]
        output_tokens = torch.cat(
            [self.obj_score_token.weight, self.iou_token.weight, self.mask_tokens.weight]
        )
        tokens = torch.cat([output_tokens[None].expand(batch, -1, -1), sparse], dim=1)
        src = image + dense
        hidden, src = self.transformer(src, image_pe.expand(batch, -1, -1, -1), tokens)
        mask_tokens = hidden[:, 2 : 2 + self.MASKS + 1]
        _, channels, height, width = image.shape
        src = src.transpose(1, 2).reshape(batch, channels, height, width)
        up1, norm, act1, up2, act2 = self.output_upscaling
        stride4, stride8 = high_res
        upscaled = act1(norm(up1(src) + stride8))
        upscaled = act2(up2(upscaled) + stride4)
        weights = torch.stack(
            [mlp(mask_tokens[:, i]) for i, mlp in enumerate(self.output_hypernetworks_mlps)], dim=1
        )
        b, c, h, w = upscaled.shape
        masks = (weights @ upscaled.view(b, c, h * w)).view(b, -1, h, w)
        ious = self.iou_prediction_head(hidden[:, 1])
        object_scores = self.pred_obj_score_head(hidden[:, 0])
        if multimask:
            return Decoded(masks[:, 1:], ious[:, 1:], mask_tokens[:, 1:], object_scores)
        masks, ious = self._stable_single(masks, ious)
        return Decoded(masks, ious, mask_tokens[:, :1], object_scores)

    def _stable_single(
        self, masks: torch.Tensor, ious: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The single-mask output, unless it is unstable (its area changes by more than 2% when
        the threshold moves by ±0.05): then the candidate with the best predicted IoU."""
        single, single_iou = masks[:, :1], ious[:, :1]
        best = ious[:, 1:].argmax(dim=-1)
        rows = torch.arange(masks.shape[0], device=masks.device)
        best_mask = masks[:, 1:][rows, best][:, None]
        best_iou = ious[:, 1:][rows, best][:, None]
        flat = single.flatten(-2)
        inner = (flat > self.STABILITY_DELTA).sum(-1).float()
        outer = (flat > -self.STABILITY_DELTA).sum(-1).float()
        stable = torch.where(outer > 0, inner / outer, 1.0) >= self.STABILITY_THRESHOLD
        return (
            torch.where(stable[..., None, None], single, best_mask),
            torch.where(stable, single_iou, best_iou),
        )
