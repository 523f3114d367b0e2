"""Giving freed memory back to the system.

glibc's allocator keeps memory freed by a thread in that thread's arena for reuse, so a process
whose sessions held hundreds of MB of frames in many threads stays at its peak size after they
end. ``malloc_trim`` returns what is free. Elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util


def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_trim = _malloc_trim()


def memory_return() -> None:
    """Return the allocator's free memory to the system, where the allocator can."""
    if _trim is not None:
        _trim(0)
