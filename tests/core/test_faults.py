"""Crash points: the arrival counted and the marker left are the ones a test relies on,
however many threads or processes reach the point together."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import pytest

from replicator.core import faults

POINT = faults.WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT


@pytest.fixture
def kills(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """Crash points armed with a job-wide directory; kills recorded instead of done."""
    killed: list[int] = []
    monkeypatch.setattr(faults, "_kill_session", lambda: killed.append(threading.get_ident()))
    monkeypatch.setattr(faults, "_LATE_ARRIVAL_WAIT_SECONDS", 0.01)
    monkeypatch.setenv("REPLICATOR_CRASH_DIR", str(tmp_path))
    return killed


def test_a_later_arrival_does_not_cut_the_counted_one_short(
    kills: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLICATOR_CRASH_POINT", f"{POINT}:1")
    counted_is_flushing = threading.Event()
    second_done = threading.Event()

    def slow_flush() -> None:  # the counted arrival makes its state true meanwhile
        counted_is_flushing.set()
        second_done.wait(5)

    first = threading.Thread(target=faults.crash_point, args=(POINT, slow_flush, "first"))
    first.start()
    assert counted_is_flushing.wait(5)
    faults.crash_point(POINT, lambda: None, "second")  # arrives while the first flushes
    second_done.set()
    first.join(5)

    hit = faults.marker(tmp_path, POINT)
    assert hit is not None
    assert (hit["arrival"], hit["where"]) == (1, "first")
    assert len(kills) == 2  # the late one still dies, after waiting for the counted one
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{POINT}.arrivals", f"{POINT}.hit"]


def test_arrivals_racing_each_other_get_distinct_numbers(tmp_path: Path) -> None:
    numbers: list[int] = []
    start = threading.Barrier(16)

    def arrive() -> None:
        start.wait()
        numbers.append(faults._arrive(POINT, tmp_path))

    threads = [threading.Thread(target=arrive) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(numbers) == list(range(1, 17))


def test_arrivals_before_the_counted_one_pass(
    kills: list[int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("REPLICATOR_CRASH_POINT", f"{POINT}:3")
    flushed: list[int] = []
    for n in range(2):
        faults.crash_point(POINT, partial(flushed.append, n))
    assert (kills, flushed, faults.marker(tmp_path, POINT)) == ([], [], None)
    faults.crash_point(POINT, lambda: flushed.append(2), "partition 7")
    assert flushed == [2] and len(kills) == 1
    hit = faults.marker(tmp_path, POINT)
    assert hit is not None and (hit["arrival"], hit["where"]) == (3, "partition 7")


def test_other_points_and_an_unarmed_process_pass(
    kills: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLICATOR_CRASH_POINT", raising=False)
    faults.crash_point(POINT)
    monkeypatch.setenv("REPLICATOR_CRASH_POINT", faults.COMPACTION_AFTER_OUTPUT)
    faults.crash_point(POINT)
    assert kills == []
