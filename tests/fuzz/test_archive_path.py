"""The archive path on generated workloads and configs (see tests.fixtures.archive_path).

In ``make test`` a fixed seed and a few examples (``FUZZ_EXAMPLES``, default 2) keep it
within the suite's budget; ``make fuzz`` runs it with fresh seeds for as many examples as
asked. A failure prints the shrunk workload as Python (``Falsifying example: ...``): put it
in ``tests/fuzz/test_found_cases.py`` so the suite keeps checking it."""

from __future__ import annotations

import itertools
import os

from hypothesis import HealthCheck, Phase, given, settings

from tests.fixtures.archive_path import Workload, run_workload, workloads

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2"))
LONG_RUN = "FUZZ_EXAMPLES" in os.environ
_runs = itertools.count()
PHASES = list(Phase) if LONG_RUN else [Phase.explicit, Phase.generate]
"""Shrinking replays a slow example many times: the long run does it, the suite does not."""


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    print_blob=True,
    phases=PHASES,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(workload=workloads())
def test_every_source_offset_once_in_the_archive_the_destination_and_a_restore(
    local_stack, spark, tmp_path, unique, workload: Workload
):
    run = next(_runs)
    run_workload(local_stack, spark, tmp_path / f"run-{run}", unique(f"w{run}"), workload)
