"""Python's cyclic garbage collector, tuned for the replay loops.

The loops that write records (ingress, the relay, restore) and egress's reader build a
list and a tuple or two per record, thousands per slice, all alive until the slice is
produced. With the default threshold (a young-generation pass every 700 net container
allocations) every one of them is scanned and promoted, and the promotions set off full
collections that scan the whole heap of the process: measured on one ingress partition
replaying 1,000,000 records, 35 % of the worker thread's CPU samples were the
collector's (937 samples; 609 with the collector off, 624 with the threshold below).
The records themselves hold no reference cycles, so collecting less often frees nothing
later that matters; cycles elsewhere are still found, within 100,000 allocations.
"""

from __future__ import annotations

import gc
import os

YOUNG_GENERATION_THRESHOLD = 100_000
"""Net container allocations between young-generation passes (CPython's default: 700)."""


def tune_collector() -> None:
    """Collect the young generation every ``YOUNG_GENERATION_THRESHOLD`` allocations,
    keeping the older generations' ratios; idempotent, process-wide."""
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, middle, old)


SETTLING_TASKS = 2
"""Tasks of a Spark Python worker at whose start what exists is frozen (see
:func:`settle_worker_heap`)."""
_tasks_started = 0


def settle_worker_heap() -> None:
    """In a reused Spark Python worker, at the start of each of its first
    ``SETTLING_TASKS`` tasks: move every object that exists now to the collector's
    permanent generation (``gc.freeze``).

    Why: PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker
    (``SPARK_REUSE_WORKER``), and a full collection scans every object of the process —
    the modules, classes and caches of pyspark, pyarrow, confluent-kafka, boto3 and the
    product, none of them garbage. Measured in a latency run (py-spy over egress's
    workers): 35-57 % of each Python worker's CPU was that line, 19.1 of their 50.7 s
    (2.6 of 29.5 s with this); one collection took 72-83 ms after the product's worker
    modules were imported, 15-21 ms more once a task had made a boto3 client, and
    nothing after ``gc.freeze``.

    The first task's start has the imports done; the second's has the caches the first
    task built (clients, service models), its garbage just collected by the daemon.
    Frozen objects are still freed when their reference count drops; only a reference
    cycle alive at one of these two moments and dropped later is never collected — once
    per worker, not per task. Objects the tasks make are collected as before. Outside a
    reused worker (a test, a driver) this does nothing."""
    global _tasks_started
    if not os.environ.get("SPARK_REUSE_WORKER") or _tasks_started >= SETTLING_TASKS:
        return
    _tasks_started += 1
    if _tasks_started == 1:
        gc.collect()  # what importing left: the daemon has not collected yet
    gc.freeze()
