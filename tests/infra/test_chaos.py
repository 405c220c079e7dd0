"""The short chaos soak (`make chaos` runs the long one): every kind of fault injected
while the pipeline streams (the kinds production outlasted, while the destination catches
up), and afterwards nothing lost, nothing duplicated."""

import io
from collections import Counter

import pytest

from infra.chaos import FAULTS, Chaos, ChaosOptions, run_chaos


def test_kinds_not_injected_while_producing_are_injected_after_it_once_each(tmp_path):
    chaos = Chaos(ChaosOptions(workdir=tmp_path))
    kinds: list[str] = []
    during = [str(chaos._next_fault(kinds, production_done=False)) for _ in range(3)]
    assert len(set(during)) == 3 and set(during) <= set(FAULTS)  # a shuffled round
    chaos.result.faults.update(during)
    after = []
    while (kind := chaos._next_fault(kinds, production_done=True)) is not None:
        after.append(kind)
        chaos.result.faults[kind] += 1
    assert sorted(after) == sorted(set(FAULTS) - set(during))
    assert chaos.result.faults == Counter(dict.fromkeys(FAULTS, 1))


@pytest.mark.integration  # starts its own local stack
def test_a_short_chaos_soak_loses_and_duplicates_nothing(tmp_path):
    out = io.StringIO()
    result = run_chaos(
        ChaosOptions(
            workdir=tmp_path / "chaos", seconds=30, rate=1_000, max_pause=6, gap=(1.0, 3.0)
        ),
        out,
    )
    text = out.getvalue()
    assert result.passed, text
    assert set(FAULTS) | {"kill restore"} == set(result.faults), text  # every kind, once or more
    assert result.lost == 0 and result.duplicated == 0, text
    # Ingress's copy of both topics, the relay's of one, the restore's of the other.
    half = result.produced // 2
    assert result.copies["demo.clicks (relay)"] == result.copies["demo.clicks"] == half, text
    assert result.copies["demo.accounts (restore)"] == result.copies["demo.accounts"], text
    assert sum(result.copies.values()) == result.replayed == 2 * result.produced, text
