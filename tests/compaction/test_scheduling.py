"""The merges' runner: bounded, refilled as soon as a slot frees, stopped between starts."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from compaction.scheduling import run_bounded

WAIT = 10.0


class Tasks:
    """Tasks that each block until the test releases them, recording what ran when."""

    def __init__(self, names: list[str]) -> None:
        self.release = {name: threading.Event() for name in names}
        self.started = {name: threading.Event() for name in names}
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0

    def __call__(self, name: str) -> str:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.started[name].set()
        assert self.release[name].wait(WAIT), f"{name} was never released"
        with self.lock:
            self.running -= 1
        return name.upper()


def test_a_freed_slot_starts_the_next_item_while_a_slow_one_still_runs():
    """With waves, c would wait for the slow a to end."""
    tasks = Tasks(["a", "b", "c"])
    results = run_bounded(["a", "b", "c"], tasks, 2, threading.Event())
    tasks.release["b"].set()
    tasks.release["c"].set()
    assert next(results) == ("b", "B")
    assert next(results) == ("c", "C")  # started and ended while a still runs
    assert tasks.started["a"].is_set() and not tasks.release["a"].is_set()
    tasks.release["a"].set()
    assert list(results) == [("a", "A")]
    assert tasks.most_at_once == 2


def test_never_more_than_the_slots_at_once():
    names = [f"t{i}" for i in range(12)]
    tasks = Tasks(names)
    for event in tasks.release.values():
        event.set()
    results = dict(run_bounded(names, tasks, 3, threading.Event()))
    assert results == {name: name.upper() for name in names}
    assert 1 <= tasks.most_at_once <= 3


def test_a_stop_starts_nothing_more_and_lets_the_running_items_end():
    tasks = Tasks(["a", "b", "c", "d"])
    stop = threading.Event()
    results = run_bounded(["a", "b", "c", "d"], tasks, 2, stop)
    tasks.release["a"].set()
    assert next(results) == ("a", "A")
    stop.set()  # while b runs, before c could start in a's slot
    tasks.release["b"].set()
    assert list(results) == [("b", "B")]
    assert not tasks.started["c"].is_set() and not tasks.started["d"].is_set()


def test_a_stop_before_the_start_runs_nothing():
    stop = threading.Event()
    stop.set()
    ran: list[int] = []
    assert list(run_bounded([1, 2], ran.append, 2, stop)) == []
    assert ran == []


def test_a_failure_is_raised_after_the_running_items_end():
    tasks = Tasks(["slow"])
    ended: list[str] = []

    def run(name: str) -> str:
        if name == "bad":
            raise RuntimeError("bad input")
        result = tasks(name)
        ended.append(name)
        return result

    results = run_bounded(["slow", "bad"], run, 2, threading.Event())
    releaser = threading.Timer(0.2, tasks.release["slow"].set)
    releaser.start()
    with pytest.raises(RuntimeError, match="bad input"):
        list(results)
    assert ended == ["slow"]  # it was not abandoned mid-run


@pytest.mark.parametrize("slots", [0, -1])
def test_slots_must_be_positive(slots: int):
    run: Callable[[int], int] = int
    with pytest.raises(ValueError, match="slots"):
        list(run_bounded([1], run, slots, threading.Event()))
