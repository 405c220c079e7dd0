"""Shared fixtures come from the plugins under ``tests/fixtures`` (one per area); their
helpers are imported from there too, so no test module imports another.

Integration tests use real services only; nothing here mocks Kafka, S3 or SQS.
"""

from __future__ import annotations

import pytest

pytest_plugins = [
    "tests.fixtures.jvm",
    "tests.fixtures.stack",
    "tests.fixtures.spark",
    "tests.fixtures.egress",
    "tests.fixtures.ingress",
    "tests.fixtures.compaction",
    "tests.fixtures.relay",
    "tests.fixtures.restore",
    "tests.fixtures.secured",
]


LONGEST_FIRST = (
    "tests/egress/test_crash_points.py",
    "tests/infra/test_chaos.py",
    "tests/egress/test_crash_safety.py",
    "tests/compaction/test_crash_safety.py",
    "tests/test_growth_end_to_end.py",
    "tests/infra/test_drill.py",
    "tests/restore/test_restore.py",
    "tests/ingress/test_processes.py",
    "tests/security/test_secured_stack.py",
    "tests/core/test_spark_environment.py",
    "tests/failover/test_failback_drill.py",
    "tests/egress/test_spark_cluster.py",
    "tests/compaction/test_merges.py",
    "tests/core/test_spark_class_archive.py",
    "tests/failover/test_group_failover.py",
    "tests/fuzz/test_archive_path.py",
)
"""Modules holding the suite's longest tests (one to three minutes each on two cores, by
``make test``'s ``--durations``), most first. They run first, the many short tests after
them: xdist's work stealing can share out only tests not yet started, so a long test
started last keeps one worker busy while the others have nothing left to take. A module
missing from the list (or renamed) only runs in its usual place."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the stack are integration tests (``make unit`` skips them); the
    modules of :data:`LONGEST_FIRST` go first, whole, each keeping its own order (its
    module-scoped fixtures start once), every other module after them in its place."""
    for item in items:
        if "local_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
    rank = {module: index for index, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
