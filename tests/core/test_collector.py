"""The collector setting the replay loops run with."""

import gc
from collections.abc import Iterator

import pytest

from replicator.core import collector
from replicator.core.collector import (
    YOUNG_GENERATION_THRESHOLD,
    settle_worker_heap,
    tune_collector,
)


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_the_young_generation_is_collected_less_often_and_the_older_ratios_kept(
    thresholds: tuple[int, int, int],
) -> None:
    tune_collector()
    tune_collector()
    assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, thresholds[1], thresholds[2])
    assert gc.isenabled()


@pytest.fixture
def fresh_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process that has not settled its heap yet; unfrozen again afterwards."""
    monkeypatch.setattr(collector, "_tasks_started", 0)
    yield
    gc.unfreeze()


def test_a_reused_spark_worker_freezes_what_its_first_two_tasks_find(
    fresh_worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    settle_worker_heap()
    after_first = gc.get_freeze_count()
    assert after_first > 1000  # the modules and classes of this process
    assert len(gc.get_objects()) < after_first  # a full collection scans only the rest
    cache = [[i] for i in range(5000)]  # what a first task leaves: a client's caches
    settle_worker_heap()
    assert gc.get_freeze_count() >= after_first + len(cache)
    made_later = [[i] for i in range(100)]
    settle_worker_heap()  # the third task's start: no longer frozen
    assert all(gc.is_tracked(d) and not _frozen(d) for d in made_later)


def test_outside_a_reused_spark_worker_nothing_is_frozen(
    fresh_worker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    before = gc.get_freeze_count()
    settle_worker_heap()
    assert gc.get_freeze_count() == before


def _frozen(obj: object) -> bool:
    """Whether ``obj`` is in the permanent generation (not among what gc scans)."""
    return not any(o is obj for o in gc.get_objects())
