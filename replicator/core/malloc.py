"""Process-wide allocator settings for the long-running entry points.

glibc gives each thread that allocates its own malloc arena (up to 8 per core), and memory
freed into one arena is not reused by another. Ingress runs a worker thread per partition
plus librdkafka's threads, which allocate records in one thread and free them in another:
measured on the ingress benchmark (8 partitions), peak RSS 512 MiB with the default arenas
and 426 MiB with two. ``MALLOC_ARENA_MAX`` in the environment, when set, wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

log = logging.getLogger(__name__)

M_ARENA_MAX = -8
"""glibc's mallopt parameter number for the arena limit (malloc.h)."""
DEFAULT_ARENAS = 2


def limit_malloc_arenas(arenas: int = DEFAULT_ARENAS) -> bool:
    """Cap glibc's malloc arenas for this process; False where that does not apply
    (not Linux/glibc, or the operator chose a value with ``MALLOC_ARENA_MAX``)."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other libcs have no mallopt
        return False
    if mallopt(M_ARENA_MAX, arenas) != 1:
        log.debug("mallopt(M_ARENA_MAX, %d) was refused", arenas)
        return False
    return True
