"""SIGTERM and SIGINT as a stop request: the one way every long-running command stops.

A service checks its stop event between units of work (a micro-batch, a poll, a merge), so
a signal never interrupts a transaction or an upload half-way; what the unit guarantees
on a stop is the service's own docstring's business.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals(
    *events: threading.Event, then: str = "stopping", install: bool = True
) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT set every event in ``events`` and log
    ``received SIGTERM: <then>``; the previous handlers come back after it.

    Signal handlers can only be installed from the main thread: pass ``install=False``
    when the caller may run elsewhere (tests, embedding) and sets the events itself.
    """
    if not install:
        yield
        return

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: %s", signal.Signals(signum).name, then)
        for event in events:
            event.set()

    previous = {signum: signal.signal(signum, on_signal) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
