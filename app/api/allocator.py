"""glibc's malloc, set for a server whose many threads allocate and free large buffers.

glibc serves a large allocation from mmap, and gives it back when it is freed, only above a threshold it
raises each time such a block is freed (up to 32 MB). Soon the 64 KB buffers a request reads into come from
the arenas of whichever threads ran it, and what is freed there stays scattered through them: under waves of
300 requests at once, `moa-chat api` held 10 MB more free memory after each wave. Fixing the threshold at
64 KB (mallopt M_MMAP_THRESHOLD, which also stops the raising) gives those blocks back when they are freed.
Elsewhere than glibc (macOS, musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>
THRESHOLD = 64 * 1024


def fix_mmap_threshold(threshold: int = THRESHOLD) -> bool:
    """Set glibc's mmap threshold once and for all; whether it was (False where there is no glibc)."""
    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))
