"""The multi-process instance's decisions, without processes."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ingress.instance import Exit, member_exit, merged_families, restart_delay


@pytest.mark.parametrize(
    ("code", "stop_at_end", "stopping", "expected"),
    [
        (-9, False, False, Exit.RESTART),  # killed: restart
        (-11, True, False, Exit.RESTART),
        (-15, False, True, Exit.FINISHED),  # asked to stop
        (0, True, False, Exit.FINISHED),
        (1, True, False, Exit.FINISHED),  # halted partitions: reported, not restarted
        (3, True, False, Exit.FAILED),
        (0, False, False, Exit.FAILED),  # a service never returns by itself
        (1, False, False, Exit.FAILED),
        (3, False, True, Exit.FINISHED),
    ],
)
def test_what_a_members_exit_means(code, stop_at_end, stopping, expected) -> None:
    assert member_exit(code, stop_at_end=stop_at_end, stopping=stopping) is expected


def test_restarts_back_off_and_are_capped() -> None:
    assert [restart_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_members_metrics_merge_into_one_family_per_name_with_a_process_label() -> None:
    member = """# HELP replicator_ingress_records_total Records produced
# TYPE replicator_ingress_records_total counter
replicator_ingress_records_total{region="w",topic="t",partition="%d"} %d.0
# HELP replicator_ingress_owned_partitions Source partitions
# TYPE replicator_ingress_owned_partitions gauge
replicator_ingress_owned_partitions{region="w"} %d.0
"""
    families = merged_families({1: member % (3, 30, 2), 0: member % (1, 10, 1)})

    class Fixed:
        def collect(self):
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    text = generate_latest(registry).decode()
    assert text.count("# TYPE replicator_ingress_records_total counter") == 1
    parsed = {
        (s.name, s.labels["process"], s.labels.get("partition")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert parsed == {
        ("replicator_ingress_records_total", "0", "1"): 10.0,
        ("replicator_ingress_records_total", "1", "3"): 30.0,
        ("replicator_ingress_owned_partitions", "0", None): 1.0,
        ("replicator_ingress_owned_partitions", "1", None): 2.0,
    }
