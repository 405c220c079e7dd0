"""Reading ahead into free read slots only: order, overlap, the slot bound, errors in place."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from replicator.core.read_ahead import ReadAhead

WAIT = 10.0


class Source:
    """An iterator of 0..count-1 that records which thread read each item and how many
    read items are alive (handed out or waiting), failing at ``fail_at`` if given."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.count = count
        self.fail_at = fail_at
        self.read_by: dict[int, str] = {}
        self.read = {i: threading.Event() for i in range(count)}

    def __iter__(self) -> Iterator[int]:
        for i in range(self.count):
            if i == self.fail_at:
                raise ValueError(f"item {i} is corrupt")
            self.read_by[i] = threading.current_thread().name
            self.read[i].set()
            yield i


def free_slots(slots: threading.BoundedSemaphore, total: int) -> int:
    """How many of ``total`` slots are free now (taken and given back at once)."""
    taken = 0
    while taken < total and slots.acquire(blocking=False):
        taken += 1
    for _ in range(taken):
        slots.release()
    return taken


def test_items_come_in_order_and_the_next_is_read_while_the_current_is_worked_on():
    source = Source(4)
    slots = threading.BoundedSemaphore(2)
    seen = []
    with ReadAhead(iter(source), slots) as ahead:
        while True:
            with ahead.next() as item:
                if item is None:
                    break
                if item < 3:  # read in the background while this one is held
                    assert source.read[item + 1].wait(WAIT)
                seen.append(item)
    assert seen == [0, 1, 2, 3]
    assert source.read_by[0] == threading.current_thread().name
    assert all(source.read_by[i].startswith("read-ahead") for i in (1, 2, 3))
    assert free_slots(slots, 2) == 2


def test_with_no_free_slot_nothing_is_read_ahead():
    source = Source(3)
    slots = threading.BoundedSemaphore(2)
    slots.acquire()  # another partition holds the other slot
    with ReadAhead(iter(source), slots) as ahead:
        with ahead.next() as item:
            assert item == 0
            assert not source.read[1].wait(0.3)
        with ahead.next() as item:
            assert item == 1
    assert source.read_by[1] == threading.current_thread().name
    slots.release()
    assert free_slots(slots, 2) == 2


def test_items_in_memory_never_exceed_the_slots():
    """Reader a holds item 0 and reads item 1 ahead into the second slot: reader b waits
    for a slot until a lets item 0 go."""
    slots = threading.BoundedSemaphore(2)
    source_a = Source(3)
    a, b = ReadAhead(iter(source_a), slots), ReadAhead(iter(Source(3)), slots)
    got: list[int | None] = []

    def read_b() -> None:
        with b.next() as item:
            got.append(item)

    with a.next() as item:
        assert item == 0 and source_a.read[1].wait(WAIT)
        assert free_slots(slots, 2) == 0
        reader = threading.Thread(target=read_b)
        reader.start()
        reader.join(0.3)
        assert reader.is_alive() and got == []  # no slot for b while a holds two items
    reader.join(WAIT)
    assert got == [0]
    a.close()
    b.close()
    assert free_slots(slots, 2) == 2


def test_an_error_is_raised_at_its_item_after_the_items_before_it():
    source = Source(4, fail_at=2)
    slots = threading.BoundedSemaphore(2)
    seen = []
    with pytest.raises(ValueError, match="item 2 is corrupt"), ReadAhead(iter(source), slots) as a:
        while True:
            with a.next() as item:
                if item is None:
                    break
                seen.append(item)
    assert seen == [0, 1]
    assert free_slots(slots, 2) == 2


def test_closing_with_a_read_ahead_pending_returns_its_slot():
    source = Source(5)
    slots = threading.BoundedSemaphore(2)
    ahead = ReadAhead(iter(source), slots)
    with ahead.next() as item:
        assert item == 0
        assert source.read[1].wait(WAIT)
    assert free_slots(slots, 2) == 1  # item 1 waits in a slot
    ahead.close()
    assert free_slots(slots, 2) == 2
    assert not source.read[2].is_set()


def test_an_exception_in_the_block_returns_the_slot():
    slots = threading.BoundedSemaphore(1)
    with ReadAhead(iter(Source(2)), slots) as ahead, pytest.raises(RuntimeError), ahead.next():
        raise RuntimeError("produce failed")
    assert free_slots(slots, 1) == 1


def test_reading_ahead_to_the_end_gives_its_slot_back_at_once():
    """The end holds nothing in memory: while the caller still works on its last item,
    only that item's slot is taken."""
    source = Source(1)
    slots = threading.BoundedSemaphore(2)
    with ReadAhead(iter(source), slots) as ahead:
        with ahead.next() as item:
            assert item == 0
            deadline = threading.Event()
            for _ in range(100):  # the reading thread finds the end and returns its slot
                if free_slots(slots, 2) == 1:
                    break
                deadline.wait(0.02)
            assert free_slots(slots, 2) == 1
        assert free_slots(slots, 2) == 2
        with ahead.next() as item:
            assert item is None
        assert free_slots(slots, 2) == 2
    assert free_slots(slots, 2) == 2
