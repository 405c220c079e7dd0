"""One ingress instance, several replay processes (``[ingress] processes``).

Replay is CPU-bound Python (Parquet decode, the produce loop), so one process uses about
one core. Rather than have operators start an instance per core, an instance starts
``processes`` members, each a complete :class:`IngressService` and a member of the ingress
consumer group. Kafka shares the events partitions among them exactly as among instances,
so exactly-once needs nothing new: a member owns a source partition only through the
group, fences its previous owner when it takes it, and resumes from the destination. Each
member bounds its own memory (``read_concurrency`` row groups), as one process did.

The parent replays nothing. It

- starts the members (``spawn``: nothing inherited from the parent's threads) from its
  main thread and ties their lives to its own: a member dies with the parent
  (``PR_SET_PDEATHSIG``), so a kill -9 of the instance is a power cut of all of it, as it
  was with one process;
- restarts a member killed by a signal (the OOM killer, a crash), after a backoff; its
  partitions move to the other members through the group meanwhile;
- stops every member on SIGTERM/SIGINT, and all of them when one fails (exits with an
  error); with ``--stop-at-end`` it waits for each to finish its share;
- serves the instance's metrics port: ``/metrics`` merges the members' own (each serves
  on a loopback port of its own) with a ``process`` label added, ``/healthz`` and
  ``/readyz`` pass when every member's do.

Only member 0 reads the SQS notifications: one reader per instance, as before. The
members join the group together and, with ``--stop-at-end``, leave it together
(:mod:`ingress.siblings` says why: each needless rebalance stops and restarts every
worker).
"""

from __future__ import annotations

import ctypes
import enum
import http.client
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from ingress.service import IngressService
from ingress.siblings import InstanceMembers
from replicator.core.config import Config, required
from replicator.core.errors import ReplicatorError
from replicator.core.health import CheckResult, Health, Heartbeat
from replicator.core.logs import configure_logging, current_logging
from replicator.core.malloc import tune_process_memory
from replicator.core.metrics import serve
from replicator.core.signals import stop_on_signals

log = logging.getLogger(__name__)

MEMBER_FAILED = 3
"""A member's exit code when it stopped on an error (its log says which)."""
STOP_GRACE_SECONDS = 60.0
"""How long stopping members may take (a transaction in flight ends) before SIGKILL."""
MEMBER_PROBE_TIMEOUT = 2.0
_PR_SET_PDEATHSIG = 1


def run_ingress(config: Config, *, stop_at_end: bool = False) -> int:
    """``replicator ingress``: one process, or a parent and its members."""
    tune_process_memory()  # before the worker threads exist: see replicator.core.malloc
    count = required(config, "ingress").process_count()
    if count == 1:
        return IngressService(config, stop_at_end=stop_at_end).run()
    return IngressInstance(config, count, stop_at_end=stop_at_end).run()


# -- decisions (pure) -------------------------------------------------------------------


class Exit(enum.Enum):
    FINISHED = "finished"
    RESTART = "restart"
    FAILED = "failed"


def member_exit(exitcode: int, *, stop_at_end: bool, stopping: bool) -> Exit:
    """What a member's exit means. Killed by a signal: restart it (its partitions are
    safe: the next owner fences and resumes). Exited by itself: finished when it was
    asked to (a stop, or ``--stop-at-end`` with 0, or 1 for halted partitions), a failure
    otherwise (a member without ``--stop-at-end`` returns only when stopped)."""
    if stopping:
        return Exit.FINISHED
    if exitcode < 0:
        return Exit.RESTART
    if stop_at_end and exitcode in (0, 1):
        return Exit.FINISHED
    return Exit.FAILED


def restart_delay(quick_deaths: int, base: float = 1.0, cap: float = 30.0) -> float:
    """Seconds before restarting a member that died ``quick_deaths`` times in a row
    without running a minute (1, 2, 4 … 30 s)."""
    return min(cap, base * 2 ** max(0, quick_deaths - 1))


def merged_families(expositions: Mapping[int, str]) -> list[Metric]:
    """The members' Prometheus expositions (member index → text) as one set of
    families, each sample labelled with its member's ``process``."""
    families: dict[str, Metric] = {}
    for index, text in sorted(expositions.items()):
        for family in text_string_to_metric_families(text):
            merged = families.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            for sample in family.samples:
                labels = {**sample.labels, "process": str(index)}
                merged.add_sample(sample.name, labels, sample.value, sample.timestamp)
    return list(families.values())


# -- the members --------------------------------------------------------------------------


def _die_with_parent(parent: int) -> None:
    """SIGKILL this process when the parent dies (Linux), as if it were the parent."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request
        os._exit(1)


def _member_main(
    config: Config,
    index: int,
    stop_at_end: bool,
    logging_setup: tuple[str, str],
    parent: int,
    ports: Connection,
    members: InstanceMembers,
) -> None:
    _die_with_parent(parent)
    configure_logging(*logging_setup)
    tune_process_memory()
    ingress = required(config, "ingress")
    local: dict[str, object] = {"processes": 1}
    if ingress.metrics_port is not None:  # the parent serves the instance's port
        local |= {"metrics_port": 0, "metrics_host": "127.0.0.1"}
    member_config = config.model_copy(update={"ingress": ingress.model_copy(update=local)})
    service = IngressService(
        member_config,
        stop_at_end=stop_at_end,
        read_notifications=index == 0,
        serving=ports.send,
        members=(members, index),
    )
    try:
        code = service.run()
    except ReplicatorError as exc:
        log.error("ingress process %d stopped: %s", index, exc)
        code = MEMBER_FAILED
    sys.exit(code)


@dataclass
class _Member:
    index: int
    process: BaseProcess | None = None
    ports: Connection | None = None
    port: int | None = None
    started: float = 0.0
    quick_deaths: int = 0
    restart_at: float | None = None
    finished_code: int | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()


class IngressInstance:
    """The parent of an instance's members (see the module docstring)."""

    def __init__(self, config: Config, count: int, *, stop_at_end: bool = False) -> None:
        self.config = config
        self.ingress = required(config, "ingress")
        self.region = self.ingress.region
        self.stop_at_end = stop_at_end
        self.members = [_Member(i) for i in range(count)]
        self._context = multiprocessing.get_context("spawn")
        self._siblings = InstanceMembers(self._context, count)
        self._stop = threading.Event()
        self._beat = Heartbeat("processes-loop", self.ingress.stall_timeout)
        self.registry = CollectorRegistry()
        self.registry.register(_MembersCollector(self._member_ports))
        self._restarts = Counter(
            "replicator_ingress_process_restarts",
            "Replay processes of this instance restarted after being killed",
            ["region"],
            registry=self.registry,
        )
        self._running = Gauge(
            "replicator_ingress_processes",
            "Replay processes of this instance running",
            ["region"],
            registry=self.registry,
        )

    def run(self) -> int:
        server = None
        if self.ingress.metrics_port is not None:
            server = serve(
                self.registry,
                self.ingress.metrics_port,
                "ingress",
                self.ingress.metrics_host,
                self._health(),
            )
        log.info("ingress instance: %d replay processes", len(self.members))
        try:
            with stop_on_signals(self._stop):
                failed = self._supervise()
        finally:
            self._stop_members()
            if server is not None:
                server.shutdown()
                server.server_close()
        if failed is not None:
            raise ReplicatorError(
                f"ingress process {failed.index} exited with {failed.finished_code}; "
                "its log above says why (the instance stopped)"
            )
        return max((m.finished_code or 0 for m in self.members), default=0)

    # -- supervision ------------------------------------------------------------------------

    def _supervise(self) -> _Member | None:
        """Keep the members running until stopped or (``--stop-at-end``) all finished;
        the member that failed, if one did."""
        for member in self.members:
            self._start(member)
        while not self._stop.is_set():
            self._beat.beat()
            for member in self.members:
                self._receive_port(member)
                failed = self._check(member)
                if failed is not None:
                    return failed
            self._running.labels(self.region).set(sum(m.alive for m in self.members))
            if all(m.finished_code is not None for m in self.members):
                break
            self._stop.wait(0.2)
        return None

    def _check(self, member: _Member) -> _Member | None:
        now = time.monotonic()
        if member.restart_at is not None:
            if now >= member.restart_at:
                self._start(member)
            return None
        process = member.process
        if process is None or process.is_alive() or member.finished_code is not None:
            return None
        code = process.exitcode if process.exitcode is not None else -1
        verdict = member_exit(code, stop_at_end=self.stop_at_end, stopping=self._stop.is_set())
        self._siblings.exited(member.index, restarting=verdict is Exit.RESTART)
        if verdict is Exit.RESTART:
            member.quick_deaths = member.quick_deaths + 1 if now - member.started < 60 else 1
            delay = restart_delay(member.quick_deaths)
            member.restart_at = now + delay
            member.port = None
            self._restarts.labels(self.region).inc()
            log.error(
                "ingress process %d (pid %s) was killed by %s; restarting it in %.0fs "
                "(its partitions move to the other processes meanwhile)",
                member.index,
                process.pid,
                _signal_name(-code),
                delay,
            )
            return None
        member.finished_code = code
        return member if verdict is Exit.FAILED else None

    def _start(self, member: _Member) -> None:
        receive, send = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=_member_main,
            args=(
                self.config,
                member.index,
                self.stop_at_end,
                current_logging(),
                os.getpid(),
                send,
                self._siblings,
            ),
            name=f"ingress-{member.index}",
        )
        process.start()
        send.close()
        member.process, member.ports, member.port = process, receive, None
        member.started, member.restart_at = time.monotonic(), None
        log.info("ingress process %d started (pid %s)", member.index, process.pid)

    def _receive_port(self, member: _Member) -> None:
        if member.ports is None:
            return
        try:
            if member.ports.poll():
                member.port = int(member.ports.recv())
        except (EOFError, OSError):  # the member is gone; its exit is handled by _check
            member.ports = None

    def _stop_members(self) -> None:
        running = [m.process for m in self.members if m.process is not None and m.alive]
        for process in running:
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for process in running:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.error("ingress process %s did not stop in time: killing it", process.pid)
                process.kill()
                process.join(5)
        for member in self.members:
            if member.finished_code is None and member.process is not None:
                member.finished_code = member.process.exitcode
        self._running.labels(self.region).set(0)

    # -- endpoints --------------------------------------------------------------------------

    def _member_ports(self) -> list[tuple[int, int]]:
        return [(m.index, m.port) for m in self.members if m.port is not None and m.alive]

    def _health(self) -> Health:
        health = Health()
        health.add_liveness(self._beat.check)
        health.add_liveness(lambda: self._members_check("/healthz", "processes-live"))
        health.add_readiness(lambda: self._members_check("/readyz", "processes-ready"))
        return health

    def _members_check(self, path: str, name: str) -> CheckResult:
        """Every running member passes ``path``. For liveness a member waiting to be
        restarted does not count against the instance (the restart is under way); for
        readiness it does."""
        failing = []
        for member in self.members:
            if member.finished_code is not None:
                continue
            if not member.alive or member.port is None:
                if path == "/readyz":
                    failing.append(f"process {member.index}: not running")
                continue
            status, detail = _probe(member.port, path)
            if status != 200:
                failing.append(f"process {member.index}: {detail}")
        if failing:
            return CheckResult(name, False, "; ".join(failing))
        return CheckResult(name, True, f"{len(self.members)} processes")


class _MembersCollector:
    """The members' metrics, scraped when the instance is (a member restarting, or
    ending mid-answer, is absent from that scrape; the others are in it)."""

    def __init__(self, ports: Callable[[], Iterable[tuple[int, int]]]) -> None:
        self._ports = ports

    def collect(self) -> Iterator[Metric]:
        expositions = {}
        for index, port in self._ports():
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/metrics", timeout=MEMBER_PROBE_TIMEOUT
                ) as answer:
                    expositions[index] = answer.read().decode()
            except (OSError, http.client.HTTPException) as exc:
                log.debug("ingress process %d metrics: %s", index, exc)
        yield from merged_families(expositions)


def _probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}{path}", timeout=MEMBER_PROBE_TIMEOUT
        ) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:  # a member ending mid-answer
        return 0, str(exc) or type(exc).__name__


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
