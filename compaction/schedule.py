"""Running compaction on a cron schedule (5 fields, or 6 with seconds last; croniter).

Runs never overlap: the next run is the first fire time after the previous run ended, and
fire times that passed during a run are skipped (and logged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from croniter import croniter

log = logging.getLogger(__name__)


def next_fire(schedule: str, after: float) -> float:
    return float(croniter(schedule, datetime.fromtimestamp(after, UTC)).get_next(float))


def run_on_schedule(
    schedule: str,
    run: Callable[[], object],
    stop: threading.Event,
    clock: Callable[[], float] = time.time,
) -> int:
    """Call ``run`` at each fire time until ``stop`` is set; returns how many runs ran."""
    runs = 0
    due = next_fire(schedule, clock())
    while not stop.is_set():
        log.info(
            "next compaction run at %s",
            datetime.fromtimestamp(due, UTC).isoformat(timespec="seconds"),
        )
        if stop.wait(max(0.0, due - clock())):
            break
        run()
        runs += 1
        finished = clock()
        following = next_fire(schedule, due)
        skipped = 0
        while following <= finished:
            skipped += 1
            following = next_fire(schedule, following)
        if skipped:
            log.warning(
                "the run took past %d fire times of %r; they were skipped, not overlapped",
                skipped,
                schedule,
            )
        due = following
    return runs
