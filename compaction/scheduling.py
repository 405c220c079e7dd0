"""Running a run's merges: at most ``slots`` at once, the next started as soon as any ends.

Merges used to run in waves of ``parallelism`` (one Spark job each), so every wave waited
for its slowest merge while the other slots stood idle: one large partition held back all
the small ones beside it. Here each merge is its own job and a slot is refilled the moment
it frees.

A stop request (SIGTERM) starts no further merge and interrupts none: the merges running
when it arrives finish, their results are yielded, and the rest are left for the next run
(each merge is crash-safe anyway, but a stopped run should not leave work half done).
Results are yielded in the order merges end, and the caller handles each before the next
merge starts in that slot: a stop set while handling one result is seen before any
further start.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_bounded(
    items: Iterable[Item],
    run: Callable[[Item], Result],
    slots: int,
    stop: threading.Event,
) -> Iterator[tuple[Item, Result]]:
    """``run`` each item in a thread, at most ``slots`` at once, yielding ``(item, result)``
    as each ends; once ``stop`` is set no item starts. An exception from ``run`` is raised
    here after the items still running have ended (their results are not yielded)."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, not {slots}")
    waiting = deque(items)
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="merge") as pool:
        running: dict[Future[Result], Item] = {}
        while True:
            while waiting and len(running) < slots and not stop.is_set():
                item = waiting.popleft()
                running[pool.submit(run, item)] = item
            if not running:
                return
            ended, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ended:
                item = running.pop(future)
                yield item, future.result()
