"""Give freed heap memory back to the operating system between pipeline stages.

Bulk reads allocate in reader threads' malloc arenas; once converted, that memory is
free but glibc keeps it (hundreds of MB on a million-kernel trace), so the next stage
would grow the process further instead of reusing it. ``malloc_trim(0)`` returns it.
Elsewhere (macOS, musl) this is a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> None:
    """Return free heap pages to the OS (glibc only)."""
    trim = _trim()
    if trim is not None:
        trim(0)
