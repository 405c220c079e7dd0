"""Reading the next item (a segment's row group) while the current one is worked on,
without letting memory grow past the read slots.

A replay loop alternates between reading a row group (a ranged S3 GET, decoding, the
checksum) and producing it, and the read used to start only after the produce ended: the
loop waited on S3 with the CPU idle. :class:`ReadAhead` starts the next read in a background
thread as soon as the current item is handed out, so the GET and the decode (both release
the GIL) overlap the produce loop.

Memory stays bounded by the process's read slots (``read_concurrency``), however many
partitions read: every item in memory holds one slot, the item handed out as well as the
one read ahead, and an item is read ahead only if a slot is free at that moment (never
waited for). A lone busy partition therefore uses two slots; many busy partitions take
the slots in turn as before, with no reading ahead.

Items come out in order, and an exception from the underlying iterator (a corrupt row
group, a removed object) is raised by :meth:`ReadAhead.next` at the item where it
happened, as if no reading ahead were done: nothing after it is handed out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Generic, TypeVar

Item = TypeVar("Item")


class ReadAhead(Generic[Item]):
    """``items`` handed out one at a time by :meth:`next`, the following one read ahead
    when a slot is free (see the module docstring). Close it when done."""

    def __init__(self, items: Iterator[Item], slots: threading.Semaphore) -> None:
        self._items = items
        self._slots = slots
        self._ahead: Future[Item | None] | None = None
        """The next item being read; it holds a slot of its own."""
        self._pool: ThreadPoolExecutor | None = None

    @contextmanager
    def next(self) -> Iterator[Item | None]:
        """The next item (None once ``items`` is exhausted), holding a slot until the block
        exits; waits for a slot unless the item was read ahead."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            self._slots.acquire()
        holds_slot = True
        try:
            if ahead is None:
                item = next(self._items, None)
            else:
                item = ahead.result()
                holds_slot = item is not None  # the reading thread gave the end's slot back
            if item is not None and self._slots.acquire(blocking=False):
                self._ahead = self._reader().submit(self._read_ahead)
            yield item
        finally:
            if holds_slot:
                self._slots.release()

    def _read_ahead(self) -> Item | None:
        """The next item, in the reading thread. Finding the end holds nothing in memory:
        its slot goes back at once, not when the caller next asks (its partition may be
        committing meanwhile while another partition waits for a slot)."""
        item = next(self._items, None)
        if item is None:
            self._slots.release()
        return item

    def close(self) -> None:
        """Wait for a read still running ahead, drop its item (or error) and its slot."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            try:
                holds_slot = ahead.result() is not None
            except Exception:  # the error belongs to an item never handed out
                holds_slot = True
            if holds_slot:
                self._slots.release()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> ReadAhead[Item]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _reader(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="read-ahead")
        return self._pool
