"""Where a stage's time goes: py-spy samples of the benchmark's process and every process
it starts (the product's services, Spark's JVM-forked Python workers, replay processes)
while the stage's product phase runs, the baselines and the set-up left out.

``python -m bench.run --only STAGE --profile STAGE`` (``make bench-profile STAGE=…``)
turns it on: each benchmark wraps its product phase in :func:`profiled`, which does
nothing unless its stage was asked for, and then only the first time (one profile per
stage and invocation). It writes, under ``bench/results/profiles/``:

- ``STAGE.txt``: py-spy's collapsed stacks (``frame;frame;… samples``, one line per
  distinct stack, each stack's root the process and its ancestors), the input of any
  flame-graph tool (flamegraph.pl, inferno, speedscope);
- ``STAGE-summary.txt``: per process, its samples and the functions with the most own
  and the most inclusive samples (:func:`summarise`).

py-spy reads other processes' memory (ptrace): it needs the permission to (root, or
``kernel.yama.ptrace_scope = 0`` for one's own processes, or CAP_SYS_PTRACE in a
container). Idle threads are not sampled, so a process waiting on I/O shows its time only
as the wall clock it took. py-spy tries a process a handful of times just after it appears
and never again: one whose interpreter takes longer than that to start (a loaded machine)
is left out of the profile — profile on a quiet machine, as ``make bench`` asks anyway.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

PROFILES = Path(__file__).parent / "results" / "profiles"
RATE = 100
"""Samples a second of each process."""

STARTUP_SECONDS = 1.0
"""How long py-spy has to fail (no permission to trace, say) before the stage starts."""
NO_PTRACE = (
    "py-spy needs the permission to trace this process (root, kernel.yama.ptrace_scope = 0, "
    "or CAP_SYS_PTRACE); without it, python -m bench.profile_egress and "
    "python -m bench.profile_ingress profile in one process with cProfile"
)

_wanted: set[str] = set()
_done: set[str] = set()


_directory = PROFILES


def enable(stages: Iterable[str], directory: Path = PROFILES) -> None:
    """Profile ``stages`` from now on, into ``directory``; fails at once when py-spy is
    missing rather than after the benchmark's set-up."""
    global _directory
    if stages and py_spy() is None:
        raise SystemExit("py-spy is not installed: pip install -e '.[dev]'")
    _directory = directory
    _wanted.update(stages)


def py_spy() -> str | None:
    """The py-spy program beside this Python, or on the PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@contextmanager
def profiled(stage: str) -> Iterator[None]:
    """Sample this process and its descendants while the block runs, if ``stage`` is to
    be profiled and has not been yet; py-spy is stopped (and its output written) on the
    way out, whatever happened in the block."""
    if stage not in _wanted or stage in _done:
        yield
        return
    _done.add(stage)
    _directory.mkdir(parents=True, exist_ok=True)
    stacks = _directory / f"{stage}.txt"
    program = py_spy()
    assert program is not None
    command = [program, "record", "--pid", str(os.getpid()), "--subprocesses"]
    command += ["--rate", str(RATE), "--format", "raw", "--output", str(stacks)]
    log_path = _directory / f"{stage}.py-spy.log"
    log = log_path.open("w")
    recorder = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        recorder.wait(STARTUP_SECONDS)
    except subprocess.TimeoutExpired:
        pass  # sampling
    else:
        log.close()
        raise RuntimeError(f"py-spy stopped at once: {log_path.read_text().strip()}\n{NO_PTRACE}")
    try:
        yield
    finally:
        # py-spy writes its output when interrupted.
        if recorder.poll() is None:
            recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(120)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()
        log.close()
    if not stacks.exists():
        raise RuntimeError(f"py-spy wrote no profile; see {log_path}\n{NO_PTRACE}")
    summary = summarise(stacks.read_text().splitlines())
    (_directory / f"{stage}-summary.txt").write_text(summary)


PROCESS = re.compile(r'process (\d+):"(.*?)";', re.DOTALL)
"""A process frame as py-spy writes it with ``--subprocesses``: each stack starts with the
frames of the process and its ancestors, outermost first (a command line may span lines
and hold semicolons; it is taken to hold no ``";``)."""


def parse_collapsed(lines: Iterable[str]) -> Iterator[tuple[str, list[str], int]]:
    """(innermost process as ``pid command``, its frames outermost first, samples) of each
    stack in py-spy's collapsed output; a command line broken over lines is joined back.
    Pure."""
    pending = ""
    for line in lines:
        text = pending + line.rstrip("\n")
        stack, _, count = text.rpartition(" ")
        if not (stack and count.isdigit()):
            pending = text + "\n" if text.strip() else ""
            continue
        pending = ""
        process, end = "?", 0
        while match := PROCESS.match(stack, end):
            process, end = f"{match[1]} {' '.join(match[2].split())}", match.end()
        yield process, [f for f in stack[end:].split(";") if f], int(count)


WAITING = frozenset(
    {"select", "poll", "wait", "readinto", "recv", "recv_into", "accept", "sleep", "acquire"}
)
"""Leaf functions that wait rather than work: py-spy leaves idle threads out by their
state in the kernel, which on a busy machine lets some waits through."""


def waiting(frame: str) -> bool:
    """Whether ``frame`` (``Class.function (file:line)``) is a call that waits. Pure."""
    function = frame.split(" (", 1)[0].rsplit(".", 1)[-1]
    return function in WAITING or function.startswith("_wait")


def summarise(lines: Iterable[str], top: int = 15) -> str:
    """Per process, its samples and the ``top`` functions by own samples (the leaf frame)
    and by inclusive samples (anywhere in the stack, counted once per stack), as a text
    report. Pure."""
    total: Counter[str] = Counter()
    own: dict[str, Counter[str]] = defaultdict(Counter)
    inclusive: dict[str, Counter[str]] = defaultdict(Counter)
    for process, frames, samples in parse_collapsed(lines):
        calls = [f for f in frames if not f.startswith("thread ")]
        total[process] += samples
        if calls:
            own[process][calls[-1]] += samples
        for frame in set(calls):
            inclusive[process][frame] += samples
    out = [f"{sum(total.values()):,} samples at {RATE}/s in {len(total)} processes", ""]
    for process, samples in total.most_common():
        waits = sum(n for frame, n in own[process].items() if waiting(frame))
        out.append(
            f"== {process}: {samples:,} samples ({samples / RATE:,.1f} s on a core), "
            f"{waits / samples:.0%} of them in calls that wait"
        )
        for title, counts in (("own", own[process]), ("inclusive", inclusive[process])):
            out.append(f"  -- {title} --")
            for frame, n in counts.most_common(top):
                mark = "  [waits]" if title == "own" and waiting(frame) else ""
                out.append(f"  {n / samples:6.1%}  {frame}{mark}")
        out.append("")
    return "\n".join(out)


def cprofile_report(title: str, stats: pstats.Stats, sort: str, top: int) -> str:
    """``stats``' ``top`` functions by ``sort`` as text under ``title``."""
    stream = io.StringIO()
    stats.stream = stream  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(top)
    return f"== {title} ==\n{stream.getvalue()}"


def keep_cprofile(name: str, report: str, profile: cProfile.Profile, directory: Path) -> None:
    """Print ``report`` and keep it, and ``profile``'s raw statistics (for pstats or
    snakeviz), as ``NAME-cprofile.txt`` and ``NAME.pstats`` in ``directory``."""
    print(report)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}-cprofile.txt").write_text(report)
    profile.dump_stats(directory / f"{name}.pstats")
    print(f"kept in {directory / f'{name}-cprofile.txt'} and {name}.pstats")
