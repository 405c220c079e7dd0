"""The alert rules and the dashboard cannot drift from the code: every metric they use is
exported by a service running on the local stack (scraped from its real endpoint), or by
compaction's run report (what it pushes to the Pushgateway). Each service's probes answer
on the same port."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from compaction.job import RunReport, export
from infra.deploy_checks import used_metric_names
from infra.ports import free_port
from ingress.service import IngressService
from relay.service import RelayService
from replicator.core.config import parse_config
from tests.fixtures.egress import one_partition_topic, start_egress
from tests.fixtures.ingress import segment_batch, wait_for
from tests.fixtures.probes import get
from tests.fixtures.relay import create_topic as create_relay_topic
from tests.fixtures.relay import produce
from tests.fixtures.spark import kill_group
from tests.fixtures.stack import SOURCE

SERIES_OF = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count"),
}


def exported_names(exposition: str) -> set[str]:
    """The series names a query can select, from the families an endpoint declares (a
    family declared before its first sample counts: a counter of lost segments has none
    until one is lost) and from the samples it holds."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        suffixes = SERIES_OF.get(family.type, ("",))
        names.update(family.name + suffix for suffix in suffixes)
        names.update(sample.name for sample in family.samples)
    return names


def serve_in_background(run: Callable[[], Any]) -> threading.Thread:
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def port_of(metrics: Any) -> int:
    wait_for(lambda: metrics._server is not None, "the metrics endpoint never came up")
    return int(metrics._server.server_port)


def scrape(port: int, timeout: float = 60) -> str:
    """/metrics once the service is ready (its first partitions owned or batch done)."""
    what = f"the service on :{port} never ready"
    wait_for(lambda: get(port, "/readyz")[0] == 200, what, timeout)
    assert get(port, "/healthz")[0] == 200
    status, body = get(port, "/metrics")
    assert status == 200
    return body.decode()


def test_every_metric_of_the_alerts_and_the_dashboard_is_exported(
    local_stack, egress_config, ingress_setup, relay_setup, unique, tmp_path
):
    topic = unique("monitored")
    one_partition_topic(local_stack, topic, [b"%d" % i for i in range(10)])
    egress_port = free_port()
    _, egress_path = egress_config(
        {topic: {"max_segment_age": "1s"}}, metrics_port=egress_port, metrics_host="127.0.0.1"
    )
    egress = start_egress(egress_path, tmp_path / "egress.log")  # a driver of its own

    ingress_cfg = ingress_setup()
    ingress_cfg.path.write_text(
        ingress_cfg.path.read_text().replace("[ingress]\n", "[ingress]\nmetrics_port = 0\n")
    )
    ingress_cfg.config = parse_config(ingress_cfg.path.read_text(), str(ingress_cfg.path), {})
    ingress_cfg.put_descriptor(1, export_start={0: 0})
    ingress_cfg.put_segment(0, 0, 9, segment_batch(0, 10))
    ingress = IngressService(ingress_cfg.config, handle_signals=False)

    relay_cfg = relay_setup(relay_options="metrics_port = 0")
    create_relay_topic(local_stack.bootstrap(SOURCE), relay_cfg.source, 1)
    produce([local_stack.bootstrap(SOURCE)], relay_cfg.source, [(0, b"k1", b"v1")])
    relay = RelayService(relay_cfg.config, handle_signals=False)

    threads = [serve_in_background(s.run) for s in (ingress, relay)]
    try:
        exported = exported_names(scrape(port_of(ingress.metrics)))
        exported |= exported_names(scrape(port_of(relay.metrics)))
        # Egress is ready after its first batch: a Spark driver of its own starting on a
        # busy machine takes minutes, not seconds.
        assert egress.poll() is None, (tmp_path / "egress.log").read_text()[-3000:]
        exported |= exported_names(scrape(egress_port, timeout=240))
    finally:
        for service in (ingress, relay):
            service.request_stop()
        kill_group(egress)
        for thread in threads:
            thread.join(120)
    compaction_cfg = parse_config(
        f'[regions.{SOURCE}]\nbucket = "archive"\nkafka.bootstrap_servers = "127.0.0.1:1"\n'
        f'[compaction]\nregion = "{SOURCE}"\n',
        "compaction.toml",
        {},
    )
    report = export(RunReport(listed_by_level={0: 3}), compaction_cfg)
    exported |= exported_names(generate_latest(report).decode())

    used = used_metric_names()
    missing = {name: sorted(where) for name, where in used.items() if name not in exported}
    assert not missing, f"used by the rules or the dashboard, exported by no service: {missing}"
    # The comparison has substance: the rules and the dashboard use every stage's metrics.
    assert {n.split("_")[1] for n in used} == {"egress", "ingress", "relay", "compaction"}
