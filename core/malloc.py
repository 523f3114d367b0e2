"""glibc's malloc, tuned for this project's processes: freed memory given back to the system
(:func:`memory_return`), threads kept to one arena (:func:`malloc_arenas_limit`), and a model's
tensors kept for reuse (:func:`malloc_keep_tensors`). Elsewhere (musl, macOS) each does nothing.

Giving memory back: glibc's allocator keeps memory freed by a thread for reuse, so a process
whose sessions held hundreds of MB of frames stays at its peak size after they end.
``malloc_trim`` returns what is free, but where it matters most only in the main arena: a thread
that allocates while another holds an arena's lock gets an arena of its own (up to eight per
core), and the free memory at the top of those arenas, up to twice the largest block freed
lately (a bound that grows to 64 MB), stays with them. Every export and import runs in a thread
of its own, and each left its arena so: an import and the three exports of a 7.4 MB annotation
file, five times over, left a server of 180 MB at 244 MB, trimmed; with the one arena of
:func:`malloc_arenas_limit`, at 190 MB, for the same CPU time (1.6 to 1.75 CPU-s a round either
way). Fixing glibc's thresholds instead, so that large blocks go back as they are freed,
returned as much but took the round 3.7 CPU-s.

Keeping a model's tensors: by default glibc serves any allocation over 128 KiB (its threshold
then grows up to 32 MiB) with a fresh ``mmap``, and gives it back on free; a model's activations
(EdgeTAM's are 1-32 MiB each, tens a frame) then cost a page fault per 4 KiB on every frame, all
over again. Measured on a 2-core slice: EdgeTAM's image encoder took 126 ms a frame that way
against 88 ms with freed memory kept for reuse, its memory attention 101 against 84 ms.
:func:`malloc_keep_tensors` keeps allocations up to ``largest_mb`` inside malloc's heap and lets
it hold up to ``keep_mb`` freed at its top, the working set of a frame; anything larger is still
mapped and unmapped as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util

# glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    # glibc's own: musl and macOS have neither
    if not hasattr(libc, "malloc_trim") or not hasattr(libc, "mallopt"):
        return None
    return libc


_glibc = _libc()


def memory_return() -> None:
    """Return the allocator's free memory to the system, where the allocator can."""
    if _glibc is not None:
        _glibc.malloc_trim(0)


def malloc_arenas_limit(*, arenas: int) -> bool:
    """Have every thread allocate from at most ``arenas`` arenas (see the module); whether the
    allocator could. Only arenas made after this are limited: call it before the process
    starts its threads."""
    return _glibc is not None and bool(_glibc.mallopt(M_ARENA_MAX, arenas))


def malloc_keep_tensors(*, largest_mb: int = 64, keep_mb: int = 256) -> bool:
    """Tune malloc for a process that runs a model on the CPU (see the module); whether the
    allocator could."""
    if _glibc is None:
        return False
    mib = 1024 * 1024
    return bool(
        _glibc.mallopt(M_MMAP_THRESHOLD, largest_mb * mib)
        and _glibc.mallopt(M_TRIM_THRESHOLD, keep_mb * mib)
    )
