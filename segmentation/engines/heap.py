"""glibc's malloc, tuned for a process that runs a model on the CPU.

By default glibc serves any allocation over 128 KiB (its threshold then grows up to 32 MiB) with
a fresh ``mmap``, and gives it back on free; a model's activations (EdgeTAM's are 1-32 MiB each,
tens a frame) then cost a page fault per 4 KiB on every frame, all over again. Measured on a
2-core slice: EdgeTAM's image encoder took 126 ms a frame that way against 88 ms with freed
memory kept for reuse, its memory attention 101 against 84 ms.

:func:`heap_keep_tensors` keeps allocations up to ``largest_mb`` inside malloc's heap and lets
it hold up to ``keep_mb`` freed at its top, the working set of a frame; anything larger is still
mapped and unmapped as before. It changes nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import platform

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def heap_keep_tensors(*, largest_mb: int = 64, keep_mb: int = 256) -> bool:
    """Tune glibc's malloc as the module says; whether it could."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    mib = 1024 * 1024
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, largest_mb * mib)
        and libc.mallopt(M_TRIM_THRESHOLD, keep_mb * mib)
    )
