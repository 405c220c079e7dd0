"""Liveness and readiness of a long-running service, served beside its metrics.

``/healthz`` (liveness) asks whether the process can still do its work: every thread it
depends on is alive and has come round its loop within ``stall_timeout``. Each loop's
own waits are bounded (network timeouts, back-off), so a loop silent for longer is hung,
and restarting the process is the cure. An unreachable broker or bucket is *not* a
liveness failure: the loops keep turning while they retry, and a restart would not help.

``/readyz`` (readiness) asks whether it is doing its work: it is live, owns what the
group gave it, and (egress) its query finishes triggers. Both answer 200 or 503 with a
JSON body that names every check and why it failed, so a probe's log says what is wrong.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_STALL_TIMEOUT = 120.0


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


Check = Callable[[], CheckResult]


def beat_age_check(
    name: str, last_beat: float | None, now: float, stall_timeout: float
) -> CheckResult:
    """A loop that beat ``last_beat`` (monotonic seconds; None: never) is healthy until
    ``stall_timeout`` has passed since."""
    if last_beat is None:
        return CheckResult(name, False, "not started")
    age = now - last_beat
    if age > stall_timeout:
        return CheckResult(name, False, f"no progress for {age:.1f}s (limit {stall_timeout:g}s)")
    return CheckResult(name, True, f"last progress {age:.1f}s ago")


def report(results: list[CheckResult]) -> tuple[int, bytes]:
    """The HTTP status (200 when every check passed, else 503) and JSON body."""
    ok = all(r.ok for r in results)
    body = {
        "status": "ok" if ok else "failing",
        "checks": {r.name: {"ok": r.ok, "detail": r.detail} for r in results},
    }
    return (200 if ok else 503), json.dumps(body, sort_keys=True).encode()


class Heartbeat:
    """The last time a loop came round (one float, one writer). Made when its owner is:
    start-up gets ``stall_timeout`` to reach the loop."""

    def __init__(self, name: str, stall_timeout: float) -> None:
        self.name = name
        self.stall_timeout = stall_timeout
        self._last: float | None = time.monotonic()

    def beat(self) -> None:
        self._last = time.monotonic()

    def check(self) -> CheckResult:
        return beat_age_check(self.name, self._last, time.monotonic(), self.stall_timeout)


class Health:
    """The checks of one process: liveness checks, and readiness checks that apply on top
    of them."""

    def __init__(self) -> None:
        self._live: list[Check] = []
        self._ready: list[Check] = []
        self._lock = threading.Lock()

    def add_liveness(self, check: Check) -> None:
        with self._lock:
            self._live.append(check)

    def add_readiness(self, check: Check) -> None:
        with self._lock:
            self._ready.append(check)

    def live(self) -> tuple[int, bytes]:
        return report(self._run(self._live))

    def ready(self) -> tuple[int, bytes]:
        return report(self._run(self._live + self._ready))

    def _run(self, checks: list[Check]) -> list[CheckResult]:
        with self._lock:
            chosen = list(checks)
        results = []
        for check in chosen:
            try:
                results.append(check())
            except Exception as exc:  # a check that fails to run is a failed check
                results.append(CheckResult(getattr(check, "__name__", "check"), False, str(exc)))
        return results


def thread_check(name: str, thread: Callable[[], threading.Thread | None]) -> Check:
    """Alive while the thread ``thread()`` returns (the current one, if replaced) runs."""

    def check() -> CheckResult:
        current = thread()
        if current is None or not current.is_alive():
            return CheckResult(name, False, "thread not running")
        return CheckResult(name, True, "running")

    return check
