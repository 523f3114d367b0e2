"""Which number format the model computes in: ``SAM2_PRECISION`` (``auto``, ``float32``,
``bfloat16``).

``auto`` is bfloat16 where the hardware computes it natively, float32 elsewhere:

- CUDA: bfloat16 (with TF32 matrix products where float32 remains), as SAM 2's demo runs;
- a CPU with AMX or AVX-512 BF16 (Intel's Sapphire Rapids and later, AMD's Zen 4 and later):
  bfloat16, whose matrix products run several times faster there (about 1 TFLOP/s against
  160 GFLOP/s in float32 on a 2-core AMX slice);
- any other CPU, and Apple's MPS: float32; bfloat16 emulated in AVX2 is slower than float32.

``ONEDNN_MAX_CPU_ISA`` set below AVX-512 BF16 (``AVX2``, ``AVX512_CORE``...) tells oneDNN not
to use those instructions; ``auto`` follows it, so a laptop without them can be measured on a
server that has them.
"""

from __future__ import annotations

import os

import torch

PRECISIONS = {"float32": torch.float32, "bfloat16": torch.bfloat16}
CHOICES = ("auto", *PRECISIONS)
# oneDNN's ISA names, lowest first; bfloat16 is native from AVX512_CORE_BF16 on
_ONEDNN_ISAS = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX10_1_512",
    "AVX512_CORE_FP16",
    "AVX10_1_512_AMX",
    "AVX512_CORE_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX512_CORE_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
    "ALL",
    "DEFAULT",
)
_FIRST_NATIVE = _ONEDNN_ISAS.index("AVX512_CORE_BF16")


def cpu_bfloat16_native() -> bool:
    """Whether this CPU computes bfloat16 matrix products in hardware, and oneDNN may use it."""
    cpu = torch.cpu
    native = cpu._is_amx_tile_supported() or cpu._is_avx512_bf16_supported()
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    if limit in _ONEDNN_ISAS and _ONEDNN_ISAS.index(limit) < _FIRST_NATIVE:
        return False
    return native


def precision_choose(requested: str, device: torch.device) -> torch.dtype:
    """The dtype ``requested`` (one of :data:`CHOICES`) means on ``device``."""
    if requested in PRECISIONS:
        return PRECISIONS[requested]
    if requested != "auto":
        raise ValueError(f"precision must be one of {', '.join(CHOICES)}, got {requested!r}")
    if device.type == "cuda":
        return torch.bfloat16
    if device.type == "cpu" and cpu_bfloat16_native():
        return torch.bfloat16
    return torch.float32


def precision_name(dtype: torch.dtype) -> str:
    return next(name for name, known in PRECISIONS.items() if known == dtype)
