"""The SAM 2 network: its parts and the four computations tracking is made of.

- :meth:`Sam2Model.encode_image`: a frame (``B x 3 x S x S``, normalized) to its features.
- :meth:`Sam2Model.condition`: the frame's top features attend to the memories of other frames
  and to object pointers (or, on a first prompted frame, just take the "no memory" embedding).
- :meth:`Sam2Model.segment`: prompt encoder and mask decoder on the (conditioned) features:
  mask logits at a quarter of the input size, the object pointer and the object score.
- :meth:`Sam2Model.encode_memory`: the frame's features and its mask become a memory (for
  EdgeTAM, compressed to 512 tokens by its perceiver).

Which frames' memories to use is the tracker's business (:mod:`.tracker`); this module only does
the arithmetic. Parameter names follow the official checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from segmentation.engines.sam2.config import ModelConfig
from segmentation.engines.sam2.image_encoder import Hiera, ImageEncoder
from segmentation.engines.sam2.layers import MLP, sine_1d
from segmentation.engines.sam2.mask_decoder import LABEL_PADDING, MaskDecoder, PromptEncoder
from segmentation.engines.sam2.memory import MemoryAttention, MemoryEncoder, MemoryLayout
from segmentation.engines.sam2.perceiver import SpatialPerceiver
from segmentation.engines.sam2.repvit import RepViTTrunk, repvit_fold

NO_OBJECT_LOGIT = -1024.0  # the mask logits of an object judged absent from the frame
MEMORY_MASK_SCALE, MEMORY_MASK_BIAS = 20.0, -10.0  # masks enter the memory encoder in [-10, 10]
PROMPT_MASK_LIMIT = 32.0  # a previous mask fed back as a prompt is clamped to ±this


@dataclass(frozen=True)
class FrameFeatures:
    stride4: torch.Tensor  # B x C/8 x 4h x 4w, for the mask decoder's upsampling
    stride8: torch.Tensor  # B x C/4 x 2h x 2w
    top: torch.Tensor  # B x C x h x w
    top_pos: torch.Tensor  # B x C x h x w

    def expand(self, batch: int) -> FrameFeatures:
        maps = (self.stride4, self.stride8, self.top, self.top_pos)
        return FrameFeatures(*(t.expand(batch, -1, -1, -1) for t in maps))


@dataclass(frozen=True)
class Segmented:
    mask_logits: torch.Tensor  # B x 1 x S/4 x S/4, float32
    object_pointer: torch.Tensor  # B x C
    object_score: torch.Tensor  # B x 1


class Sam2Model(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self._input_format = torch.contiguous_format
        d, mem = config.d_model, config.mem_dim
        if d % mem:
            raise ValueError(f"the memory width {mem} must divide the model width {d}")
        trunk = RepViTTrunk() if config.backbone == "repvit_m1" else Hiera(config.trunk)
        self.image_encoder = ImageEncoder(trunk, d)
        self.spatial_perceiver: SpatialPerceiver | None = None
        layout = MemoryLayout(prefix=0, grid=config.feature_size)
        if config.perceiver_latents:
            self.spatial_perceiver = SpatialPerceiver(mem, latents=config.perceiver_latents)
            grid = self.spatial_perceiver.grid
            if config.feature_size % grid:
                raise ValueError(
                    f"EdgeTAM's perceiver needs an image size that is a multiple of {16 * grid},"
                    f" got {config.image_size}"
                )
            layout = MemoryLayout(self.spatial_perceiver.global_tokens, grid)
        self.memory_attention = MemoryAttention(
            d, mem, config.memory_feedforward, config.memory_layers, config.feature_size, layout
        )
        self.memory_encoder = MemoryEncoder(d, mem)
        self.sam_prompt_encoder = PromptEncoder(d, config.feature_size, config.image_size)
        self.sam_mask_decoder = MaskDecoder(d, config.decoder_heads, config.decoder_mlp_dim)
        self.maskmem_tpos_enc = nn.Parameter(torch.zeros(config.num_maskmem, 1, 1, mem))
        self.no_mem_embed = nn.Parameter(torch.zeros(1, 1, d))
        self.no_mem_pos_enc = nn.Parameter(torch.zeros(1, 1, d))  # kept for the checkpoints
        self.mask_downsample = nn.Conv2d(1, 1, kernel_size=4, stride=4)  # for mask prompts
        self.obj_ptr_proj = MLP(d, d, d, num_layers=3)
        self.no_obj_ptr = nn.Parameter(torch.zeros(1, d))
        if config.signed_pointer_positions:
            self.obj_ptr_tpos_proj: nn.Module = nn.Linear(d, mem)
            self.no_obj_embed_spatial = nn.Parameter(torch.zeros(1, mem))
        else:
            self.obj_ptr_tpos_proj = nn.Identity()
            self.no_obj_embed_spatial = None
        for parameter in (
            self.maskmem_tpos_enc,
            self.no_mem_embed,
            self.no_mem_pos_enc,
            self.no_obj_ptr,
            self.no_obj_embed_spatial,
        ):
            if parameter is not None:
                nn.init.trunc_normal_(parameter, std=0.02)

    def channels_last(self) -> None:
        """Keep every convolution's weights, and the frames given to :meth:`encode_image`,
        channels-last: oneDNN's native layout on the CPU, where a bfloat16 convolution given
        channels-first maps reorders them on every call (EdgeTAM's encoder: 329 ms a frame
        against 112 at 1024 pixels, on 2 cores with AMX)."""
        self.to(memory_format=torch.channels_last)
        self._input_format = torch.channels_last

    def weights_cast(self, dtype: torch.dtype) -> None:
        """Keep the weights of every linear layer and convolution in ``dtype``: what autocast
        to ``dtype`` casts them to on every call, on any device (in inference mode it keeps no
        cache: 700 casts a frame for EdgeTAM), so the results are the same to the bit; norms,
        embeddings and encodings stay float32."""
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Conv2d | nn.ConvTranspose2d):
                module.to(dtype)

    def fold_norms(self) -> None:
        """For inference: fold the trunk's batch norms into its convolutions (EdgeTAM's RepViT;
        Hiera has none). The state dict no longer matches the checkpoint's afterwards."""
        if isinstance(self.image_encoder.trunk, RepViTTrunk):
            repvit_fold(self.image_encoder.trunk)

    @property
    def device(self) -> torch.device:
        return self.no_obj_ptr.device

    def encode_image(self, images: torch.Tensor) -> FrameFeatures:
        features, positions = self.image_encoder(
            images.contiguous(memory_format=self._input_format)
        )
        decoder = self.sam_mask_decoder
        return FrameFeatures(
            decoder.conv_s0(features[0]), decoder.conv_s1(features[1]), features[2], positions[2]
        )

    def memory_position(self) -> torch.Tensor:
        """Every memory's position encoding, ``1 x tokens x mem_dim`` (the same for all)."""
        if self.spatial_perceiver is not None:
            return self.spatial_perceiver.position(torch.float32)
        size = self.config.feature_size
        probe = torch.empty(1, 1, size, size, device=self.device)
        return self.memory_encoder.position_encoding(probe).flatten(2).transpose(1, 2).float()

    def condition(
        self,
        features: FrameFeatures,
        memories: Sequence[tuple[int, torch.Tensor]],
        pointers: Sequence[tuple[int, torch.Tensor]],
        pointer_span: int,
    ) -> torch.Tensor:
        """The top features after attending to ``memories`` (``(age slot, B x tokens x mem)``:
        slot 0 for prompted frames, 1..6 for the frames 6..1 before) and ``pointers``
        (``(signed frame distance, B x C)``); with neither, the "no memory" embedding is added
        instead (a first prompted frame)."""
        top = features.top
        batch, channels, height, width = top.shape
        if not memories and not pointers:
            return top + self.no_mem_embed.view(1, channels, 1, 1)
        mem = self.config.mem_dim
        spatial = self.memory_position()
        tokens, positions = [], []
        for slot, memory in memories:
            tokens.append(memory.float())
            age = self.maskmem_tpos_enc[self.config.num_maskmem - slot - 1]
            positions.append((spatial + age).expand(batch, -1, -1))
        pointer_tokens = 0
        if pointers:
            distances, vectors = zip(*pointers, strict=True)
            stacked = torch.stack(vectors, dim=1)  # B x P x C
            if self.config.signed_pointer_positions:
                offsets = torch.tensor(distances, dtype=torch.float32, device=top.device)
                encoding = sine_1d(offsets / max(pointer_span - 1, 1), channels)
                encoding = self.obj_ptr_tpos_proj(encoding)
            else:
                encoding = stacked.new_zeros(len(vectors), mem)
            split = channels // mem  # each pointer becomes several memory-width tokens
            tokens.append(stacked.reshape(batch, -1, mem))
            positions.append(encoding.repeat_interleave(split, dim=0)[None].expand(batch, -1, -1))
            pointer_tokens = len(vectors) * split
        current = top.flatten(2).transpose(1, 2)
        current_pos = features.top_pos.flatten(2).transpose(1, 2)
        out = self.memory_attention(
            current,
            current_pos,
            torch.cat(tokens, dim=1),
            torch.cat(positions, dim=1),
            pointer_tokens,
        )
        return out.transpose(1, 2).reshape(batch, channels, height, width)

    def segment(
        self,
        conditioned: torch.Tensor,
        features: FrameFeatures,
        points: torch.Tensor | None,
        labels: torch.Tensor | None,
        mask_prompt: torch.Tensor | None,
        multimask: bool,
    ) -> Segmented:
        """Masks from prompts: ``points`` (``B x N x 2``, pixels of the model's input) with
        ``labels`` (1 positive, 0 negative), and/or earlier mask logits as ``mask_prompt``. With
        ``multimask``, the best of three candidate masks by predicted IoU."""
        batch = conditioned.shape[0]
        if points is None:
            points = conditioned.new_zeros(batch, 1, 2, dtype=torch.float32)
            labels = torch.full((batch, 1), LABEL_PADDING, dtype=torch.int32, device=points.device)
        encoder = self.sam_prompt_encoder
        if mask_prompt is not None and mask_prompt.shape[-1] != encoder.mask_size:
            size = (encoder.mask_size, encoder.mask_size)
            mask_prompt = F.interpolate(
                mask_prompt.float(), size, mode="bilinear", align_corners=False, antialias=True
            )
        sparse, dense = encoder(points, labels, mask_prompt)
        decoded = self.sam_mask_decoder(
            conditioned,
            encoder.dense_position(),
            sparse,
            dense,
            (features.stride4, features.stride8),
            multimask,
        )
        appearing = decoded.object_scores > 0
        masks = torch.where(appearing[:, None, None], decoded.masks, NO_OBJECT_LOGIT).float()
        tokens = decoded.tokens[:, 0]
        if multimask:
            rows = torch.arange(batch, device=masks.device)
            best = decoded.ious.argmax(dim=-1)
            masks, tokens = masks[rows, best][:, None], decoded.tokens[rows, best]
        present = appearing.float()
        pointer = present * self.obj_ptr_proj(tokens) + (1 - present) * self.no_obj_ptr
        return Segmented(masks, pointer, decoded.object_scores)

    def mask_logits(self, mask: torch.Tensor) -> torch.Tensor:
        """A mask (``B x 1 x S x S``, 0 or 1) as the logits of a result: ±10, downsampled to
        the decoder's size (``B x 1 x S/4 x S/4``)."""
        size = self.config.image_size // 4
        logits = mask * MEMORY_MASK_SCALE + MEMORY_MASK_BIAS
        return F.interpolate(
            logits, (size, size), mode="bilinear", align_corners=False, antialias=True
        )

    def mask_as_result(self, features: FrameFeatures, mask: torch.Tensor) -> Segmented:
        """A given mask (``B x 1 x S x S``, 0 or 1) taken as the frame's result, as SAM 2 takes
        a mask prompt: logits of ±10 (downsampled to the decoder's size), present exactly when
        the mask is not empty, and an object pointer from the decoder prompted with the mask on
        the frame's own features (no memory)."""
        low = self.mask_logits(mask)
        decoded = self.segment(
            features.top, features, None, None, self.mask_downsample(mask), multimask=False
        )
        present = mask.flatten(1).amax(dim=1, keepdim=True)  # B x 1
        pointer = present * decoded.object_pointer + (1 - present) * self.no_obj_ptr
        score = present * MEMORY_MASK_SCALE + MEMORY_MASK_BIAS
        return Segmented(low.float(), pointer, score)

    def encode_memory(
        self,
        features: FrameFeatures,
        mask_logits: torch.Tensor,
        object_score: torch.Tensor,
        from_clicks: bool,
    ) -> torch.Tensor:
        """The memory of a frame (``B x tokens x mem``) from its unconditioned top features and
        its mask logits (any size; binarized when they came from clicks, so the memory holds
        exactly what the user saw)."""
        size = self.config.image_size
        logits = F.interpolate(mask_logits, (size, size), mode="bilinear", align_corners=False)
        mask = (logits > 0).float() if from_clicks else torch.sigmoid(logits)
        mask = mask * MEMORY_MASK_SCALE + MEMORY_MASK_BIAS
        memory, position = self.memory_encoder(features.top, mask)
        if self.no_obj_embed_spatial is not None:
            absent = 1 - (object_score > 0).float()
            memory = memory + absent[..., None, None] * self.no_obj_embed_spatial[..., None, None]
        if self.spatial_perceiver is not None:
            return self.spatial_perceiver(memory, position)[0]
        return memory.flatten(2).transpose(1, 2)
