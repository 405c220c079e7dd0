"""Process-wide allocator settings for the long-running entry points.

glibc gives each thread that allocates its own malloc arena (up to 8 per core), and memory
freed into one arena is not reused by another. Ingress runs a worker thread per partition
plus librdkafka's threads, which allocate records in one thread and free them in another:
measured on the ingress benchmark (8 partitions), peak RSS 512 MiB with the default arenas
and 426 MiB with two. ``MALLOC_ARENA_MAX`` in the environment, when set, wins.

Arrow's own allocations (decoded row groups, S3 reads on its I/O threads) go through
jemalloc instead of the wheel's default mimalloc: mimalloc keeps each thread's freed pages
for reuse by that thread, and ingress decodes on a thread per partition. Measured on the
ingress benchmark with one replay process (8 partitions, 2,000,000 records): peak RSS
518-533 MiB with mimalloc, 397-408 MiB with jemalloc (and no slower).
``ARROW_DEFAULT_MEMORY_POOL`` in the environment, when set, wins.

jemalloc keeps freed pages for reuse and gives them back to the OS after a decay time.
With Arrow's setting, a thread's freed row groups stayed resident for 1.7 to 2.2 s
(``tests/core/test_malloc.py``), and ingress frees row groups at tens of MiB a second. A
decay of :data:`ARROW_DECAY_MS` gives them back within about 0.4 s. Measured on the
ingress benchmark with one replay process (8 partitions, 4,000,000 records): peak RSS
561-569 MiB before (three runs), 493-544 MiB with the decay (six runs). The
decay applies to the arenas jemalloc creates after it is set (a thread's first allocation
takes an arena of its own while there are fewer than four per core), which is why it is
set before a service starts its threads.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

import pyarrow as pa

from replicator.core.collector import tune_collector

log = logging.getLogger(__name__)

ARROW_DECAY_MS = 100
"""How long jemalloc keeps Arrow's freed pages before giving them back to the OS."""
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


def use_jemalloc_for_arrow() -> bool:
    """Make jemalloc Arrow's default memory pool for this process, giving freed pages back
    after :data:`ARROW_DECAY_MS`; False where the operator chose a pool with
    ``ARROW_DEFAULT_MEMORY_POOL`` or pyarrow lacks jemalloc."""
    if "ARROW_DEFAULT_MEMORY_POOL" in os.environ:
        return False
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        return False
    pa.set_memory_pool(pool)
    pa.jemalloc_set_decay_ms(ARROW_DECAY_MS)
    # The decay holds for arenas created from now on. The calling thread allocates once
    # so that it, not a worker started later, holds the arena created before.
    pa.allocate_buffer(1, memory_pool=pool)
    return True


def tune_process_memory() -> None:
    """Every allocator setting above and the collector's (:mod:`replicator.core.collector`),
    for a long-running service process; call before its threads start."""
    limit_malloc_arenas()
    use_jemalloc_for_arrow()
    tune_collector()
