"""librdkafka's log, through Python logging.

Every client the project makes gets ``logger`` (see
:func:`replicator.core.kafka.clients.client_config`), so librdkafka's lines go to the
``librdkafka`` logger at the mapped level, in the service's format (JSON mode stays all
JSON), instead of raw ``%3|…|FAIL|…`` lines on stderr. A client's lines reach the logger
when it is polled (consumers and producers are; an admin client's are dropped, and what
it failed at reaches the caller as an error).

A broker that is down is reported by each client every time it retries, dozens of lines a
second. :class:`RepeatFilter` lets the first line of each kind through, then at most one
per ``interval`` seconds with the count of those held back: a kind is the client-less
text (the client's name and the retry's timing taken out), so every client failing to
reach the same broker with the same error counts as one.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

CLIENT_LOGGER = "librdkafka"
REPEAT_INTERVAL = 60.0
_CLIENT_NAME = re.compile(r"\[rdkafka#[a-z]+-\d+\] ")
_TIMING = re.compile(r"\d+(\.\d+)?ms")


def repeat_kind(message: str) -> str:
    """The part of a librdkafka line that names what happened and where, without the
    client's name or timings. Pure."""
    return _TIMING.sub("Nms", _CLIENT_NAME.sub("", message))


class RepeatFilter(logging.Filter):
    """Lets a kind of line through once per ``interval``, counting the ones held back."""

    def __init__(
        self, interval: float = REPEAT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}
        """kind -> (when it was last let through, how many were held back since)"""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = repeat_kind(record.getMessage())
        now = self._clock()
        with self._lock:
            last = self._seen.get(kind)
            if last is not None and now - last[0] < self.interval:
                self._seen[kind] = (last[0], last[1] + 1)
                return False
            held = last[1] if last is not None else 0
            self._seen[kind] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} (and {held} more like it in {self.interval:.0f} s)"
            record.args = ()
        return True


def client_logger() -> logging.Logger:
    """The logger every client is given, with its repeat filter (installed once)."""
    logger = logging.getLogger(CLIENT_LOGGER)
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
    return logger
