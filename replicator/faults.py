"""Crash points, for tests that must kill a process at an exact step.

``REPLICATOR_CRASH_POINT=name[:n]`` makes the n-th (default first) arrival at the
named point kill the process group with SIGKILL, as a power cut would: a Spark driver,
its JVM and its Python workers die together (start the process in a session of its
own). Unset, a crash point costs one
environment look-up; it is placed only on per-transaction paths, never per record.
"""

from __future__ import annotations

import os
import signal

_arrivals: dict[str, int] = {}


def crash_point(name: str) -> None:
    spec = os.environ.get("REPLICATOR_CRASH_POINT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _arrivals[name] = _arrivals.get(name, 0) + 1
    if _arrivals[name] >= int(nth or 1):
        os.killpg(os.getpgid(0), signal.SIGKILL)
