"""The probes' decisions, and the endpoint that serves them beside the metrics."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time

from prometheus_client import CollectorRegistry, Counter, Gauge

from replicator.core import metrics
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


HALF_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: replicator\r\n"  # no blank line: never ends


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the server closes ``sock`` within ``within`` seconds."""
    deadline = time.monotonic() + within
    try:
        while True:  # an answer (an error status) before the close counts too
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            if sock.recv(4096) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_idle_half_requests_are_closed_in_time_and_hold_a_bounded_number_of_threads(
    monkeypatch,
):
    """Slowloris: many connections that send half a request and wait. Each is closed
    when its time is up, no more than the cap hold a thread at once, and a real scrape
    is answered while they wait."""
    monkeypatch.setattr(metrics, "REQUEST_TIMEOUT", 2.0, raising=False)
    monkeypatch.setattr(metrics, "MAX_CONNECTIONS", 8, raising=False)
    registry = CollectorRegistry()
    Counter("replicator_test_things", "Things", registry=registry).inc()
    threads_before = threading.active_count()
    server = serve(registry, 0, "test", "127.0.0.1")
    idle: list[socket.socket] = []
    try:
        port = server.server_port
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(HALF_REQUEST)
            idle.append(sock)
        last_opened = time.monotonic()
        time.sleep(0.5)
        held = threading.active_count() - threads_before
        assert held <= 8 + 2, f"{held} threads for 300 idle connections"
        status, body = get(port, "/metrics")
        assert status == 200 and b"replicator_test_things_total 1.0" in body
        # Each is closed 2 s after its accept at the latest (checked every 0.5 s).
        until = last_opened + 2.0 + 1.5
        still_open = [
            s for s in idle if not closed_by_server(s, max(0.1, until - time.monotonic()))
        ]
        assert still_open == [], f"{len(still_open)} of 300 idle connections still open"
        time.sleep(0.5)
        assert threading.active_count() - threads_before <= 2
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()


def test_a_request_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline(monkeypatch):
    monkeypatch.setattr(metrics, "REQUEST_TIMEOUT", 1.5, raising=False)
    server = serve(CollectorRegistry(), 0, "test", "127.0.0.1")
    try:
        sock = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
        started = time.monotonic()
        cut = False
        for byte in HALF_REQUEST * 10:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                cut = True
                break
            if time.monotonic() - started > 6:
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        assert cut or closed_by_server(sock, 0.5), f"still open after {elapsed:.1f}s of dripping"
        assert elapsed < 4.0, f"cut off after {elapsed:.1f}s (deadline 1.5 s)"
        sock.close()
    finally:
        server.shutdown()
        server.server_close()


def test_request_lines_are_logged_with_control_characters_escaped(caplog):
    server = serve(CollectorRegistry(), 0, "test", "127.0.0.1")
    try:
        with caplog.at_level(logging.DEBUG, logger="replicator.core.metrics"):
            sock = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
            sock.sendall(b"GET /\x1b[2J\x1b[31mowned\x07 HTTP/1.0\r\n\r\n")
            sock.recv(4096)
            sock.close()
            time.sleep(0.3)
    finally:
        server.shutdown()
        server.server_close()
    lines = [r.getMessage() for r in caplog.records if "owned" in r.getMessage()]
    assert lines, [r.getMessage() for r in caplog.records]
    assert all("\x1b" not in line and "\x07" not in line for line in lines), lines
    assert any("\\x1b[2J" in line for line in lines), lines


FULL_REQUEST = b"GET /metrics HTTP/1.1\r\nHost: replicator\r\n\r\n"


def test_clients_that_ask_and_never_read_leave_room_for_a_probe():
    """More clients than the cap send a whole request and never read the answer, one too
    large to sit in the sockets' buffers unread. A probe sent meanwhile is answered at
    once, not refused until the clients' 10 s deadline."""
    registry = CollectorRegistry()
    Gauge("replicator_test_padding", "Padding", ["label"], registry=registry).labels(
        "x" * 8 * 1024 * 1024
    ).set(1)
    server = serve(registry, 0, "test", "127.0.0.1")
    silent: list[socket.socket] = []
    try:
        port = server.server_port
        for _ in range(metrics.MAX_CONNECTIONS + 4):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(5)
            sock.connect(("127.0.0.1", port))
            sock.sendall(FULL_REQUEST)
            silent.append(sock)
        time.sleep(2.5)
        started = time.monotonic()
        status, _ = get(port, "/healthz")
        elapsed = time.monotonic() - started
        assert status == 200, f"probe refused ({status}) while {len(silent)} clients do not read"
        assert elapsed < 1.0, f"probe answered after {elapsed:.1f}s"
    finally:
        for sock in silent:
            sock.close()
        server.shutdown()
        server.server_close()
