"""The short chaos soak (`make chaos` runs the long one): every kind of fault injected
while the pipeline streams, and afterwards nothing lost, nothing duplicated."""

import io

import pytest

from infra.chaos import FAULTS, ChaosOptions, run_chaos

pytestmark = pytest.mark.integration  # starts its own local stack


def test_a_short_chaos_soak_loses_and_duplicates_nothing(tmp_path):
    out = io.StringIO()
    result = run_chaos(
        ChaosOptions(
            workdir=tmp_path / "chaos", seconds=90, rate=1_000, max_pause=6, gap=(1.5, 4.0)
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
