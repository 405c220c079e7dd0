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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the stack are integration tests (``make unit`` skips them)."""
    for item in items:
        if "local_stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)
