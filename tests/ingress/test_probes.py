"""Ingress's probes on the metrics port: a reader that stops turning fails ``/healthz``
(naming itself), and the probe recovers when the reader does."""

from __future__ import annotations

import re
import threading

from ingress.service import IngressService
from replicator.core.config import load_config
from tests.fixtures import probes
from tests.fixtures.ingress import segment_batch, wait_for


def probe(service: IngressService, path: str) -> tuple[int, dict]:
    """The probe's status and body; (0, {}) before the endpoint is up."""
    if service.metrics._server is None:
        return 0, {}
    return probes.probe(service.metrics._server.server_port, path)


def test_a_blocked_sqs_reader_fails_liveness_and_recovers(local_stack, ingress_setup):
    setup = ingress_setup()
    setup.path.write_text(
        setup.path.read_text().replace(
            "[ingress]\n", '[ingress]\nstall_timeout = "3s"\nmetrics_port = 0\n'
        )
    )
    setup.config = load_config(setup.path)
    setup.put_descriptor(1, export_start={0: 0})
    setup.put_segment(0, 0, 9, segment_batch(0, 10))
    service = IngressService(setup.config, handle_signals=False)
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: probe(service, "/readyz")[0] == 200, "never ready")
        status, body = probe(service, "/healthz")
        assert status == 200, body
        assert set(body["checks"]) == {"events-loop", "sqs-reader", "group-sync"}
        assert probe(service, "/readyz")[1]["checks"]["partitions"]["detail"] == (
            "1 source partitions owned, 0 halted"
        )
        with local_stack.paused("s3"):  # the reader's receive hangs (and so does S3)
            wait_for(lambda: probe(service, "/healthz")[0] == 503, "never unhealthy", 30)
            reader = probe(service, "/healthz")[1]["checks"]["sqs-reader"]
            silent = re.fullmatch(r"no progress for ([\d.]+)s \(limit 3s\)", reader["detail"])
            assert not reader["ok"] and silent, reader
            assert float(silent.group(1)) >= 3  # failed for the stall, not before it
        wait_for(lambda: probe(service, "/healthz")[0] == 200, "never healthy again", 60)
    finally:
        service.request_stop()
        runner.join(60)
