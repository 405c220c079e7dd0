"""The probes' decisions, and the endpoint that serves them beside the metrics."""

from __future__ import annotations

import json
import threading

from prometheus_client import CollectorRegistry, Counter

from replicator.core.health import (
    CheckResult,
    Health,
    Heartbeat,
    beat_age_check,
    report,
    thread_check,
)
from replicator.core.metrics import serve
from tests.fixtures.probes import get


def test_a_loop_is_healthy_until_its_stall_timeout_passes():
    assert beat_age_check("loop", 100.0, 104.9, 5.0).ok
    late = beat_age_check("loop", 100.0, 105.5, 5.0)
    assert not late.ok and late.detail == "no progress for 5.5s (limit 5s)"
    assert beat_age_check("loop", None, 1.0, 5.0) == CheckResult("loop", False, "not started")


def test_a_new_heartbeat_gives_start_up_its_stall_timeout():
    assert Heartbeat("loop", 60.0).check().ok
    assert not Heartbeat("loop", -1.0).check().ok


def test_the_report_fails_when_one_check_fails_and_names_it():
    status, body = report([CheckResult("a", True, "fine"), CheckResult("b", False, "stuck")])
    assert status == 503
    assert json.loads(body) == {
        "status": "failing",
        "checks": {"a": {"ok": True, "detail": "fine"}, "b": {"ok": False, "detail": "stuck"}},
    }
    assert report([CheckResult("a", True)])[0] == 200


def test_readiness_includes_liveness_and_a_check_that_raises_fails():
    health = Health()
    health.add_liveness(lambda: CheckResult("loop", True))

    def broken() -> CheckResult:
        raise RuntimeError("no state yet")

    health.add_readiness(broken)
    assert health.live()[0] == 200
    status, body = health.ready()
    assert status == 503
    assert json.loads(body)["checks"]["broken"] == {"ok": False, "detail": "no state yet"}


def test_a_thread_check_follows_the_current_thread():
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    current: list[threading.Thread | None] = [None]
    check = thread_check("reader", lambda: current[0])
    assert not check().ok
    current[0] = thread
    thread.start()
    assert check().ok
    done.set()
    thread.join()
    assert check() == CheckResult("reader", False, "thread not running")


def test_one_port_serves_metrics_and_both_probes():
    registry = CollectorRegistry()
    Counter("replicator_test_things", "Things", registry=registry).inc(3)
    health = Health()
    ready = threading.Event()
    health.add_readiness(lambda: CheckResult("assigned", ready.is_set()))
    server = serve(registry, 0, "test", "127.0.0.1", health)
    try:
        port = server.server_port
        status, body = get(port, "/metrics")
        assert status == 200 and b"replicator_test_things_total 3.0" in body
        assert get(port, "/healthz")[0] == 200
        assert get(port, "/readyz")[0] == 503
        ready.set()
        assert get(port, "/readyz") == (
            200,
            b'{"checks": {"assigned": {"detail": "", "ok": true}}, "status": "ok"}',
        )
        assert get(port, "/nothing")[0] == 404
    finally:
        server.shutdown()
        server.server_close()
