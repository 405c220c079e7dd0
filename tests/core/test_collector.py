"""The collector setting the replay loops run with."""

import gc
from collections.abc import Iterator

import pytest

from replicator.core.collector import YOUNG_GENERATION_THRESHOLD, tune_collector


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
