"""Crash points, for tests that must kill a process at an exact step.

``REPLICATOR_CRASH_POINT=name[:n]`` makes the n-th (default first) arrival at the
named point SIGKILL every process of the caller's session, as a power cut would: a Spark
driver, its JVM and its Python workers (which PySpark puts in a process group of their
own, in the same session) die together. Start the process in a session of its own.

With ``REPLICATOR_CRASH_DIR=<directory>`` as well, arrivals are counted for the whole job
(every process of it appends to one file there: under Spark, ``name:3`` is the third
arrival in any executor or worker), and the arrival that crashes first writes
``<name>.hit`` there (the point, the arrival, the process): a test checks the marker to
prove its kill hit the moment it claims, not merely that the process died.

``REPLICATOR_CRASH_ACTION=stop`` freezes instead of killing: the counted arrival leaves
its marker and stops its own process (SIGSTOP, every thread at once, as a long pause of a
machine or a process does) until the test sends SIGCONT; then it carries on from the point,
as a "zombie" would. Later arrivals pass.

Unset, a crash point costs one environment look-up; it is placed only on per-transaction
or per-segment paths, never per record.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT = "writer-after-produce-before-checkpoint"
"""Records of a transaction are flushed; its checkpoint and commit are not done."""
WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT = "writer-after-checkpoint-before-commit"
"""Records and the checkpoint of a transaction are flushed to the broker; not committed."""
SQS_AFTER_ACK_BEFORE_DELETE = "sqs-after-ack-before-delete"
"""Kafka acknowledged the segment events of a receive; the SQS messages are not deleted."""
COMPACTION_DURING_MERGE = "compaction-during-merge"
"""A merged segment is being written (reached after each input segment)."""
COMPACTION_AFTER_OUTPUT = "compaction-after-output"
"""A merged segment is complete in S3; its inputs are all still there."""
COMPACTION_DURING_DELETES = "compaction-during-deletes"
"""Some of a merge's inputs are deleted, others not (reached before each delete)."""
COMPACTION_DURING_CLEANUP = "compaction-during-cleanup"
"""A run's clean-up (inputs an earlier run's verified output covers) is under way:
reached before each batch of deletes."""
S3_MID_MULTIPART_UPLOAD = "s3-mid-multipart-upload"
"""A segment's multipart upload has a part in S3 and is not completed (reached after each
part)."""
EGRESS_AFTER_UPLOAD_BEFORE_COMMITS = "egress-after-upload-before-commits"
"""A micro-batch's segments are all complete in S3; neither the egress consumer group's
offsets nor Spark's commit log have it."""
EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT = "egress-after-group-commit-before-spark-commit"
"""The consumer group's offsets include a micro-batch; Spark's commit log does not (Spark
writes it after the sink's commit returns)."""
CRASH_POINTS = frozenset(
    {
        WRITER_AFTER_PRODUCE_BEFORE_CHECKPOINT,
        WRITER_AFTER_CHECKPOINT_BEFORE_COMMIT,
        SQS_AFTER_ACK_BEFORE_DELETE,
        COMPACTION_DURING_MERGE,
        COMPACTION_AFTER_OUTPUT,
        COMPACTION_DURING_DELETES,
        COMPACTION_DURING_CLEANUP,
        S3_MID_MULTIPART_UPLOAD,
        EGRESS_AFTER_UPLOAD_BEFORE_COMMITS,
        EGRESS_AFTER_GROUP_COMMIT_BEFORE_SPARK_COMMIT,
    }
)

_arrivals: dict[str, int] = {}
_arrivals_lock = threading.Lock()
_LATE_ARRIVAL_WAIT_SECONDS = 60.0
"""How long an arrival after the counted one waits for the counted one's kill (it is
making the claimed state true, then writing the marker) before killing by itself."""


def crash_point(name: str, before: Callable[[], object] | None = None, where: str = "") -> None:
    """Die here if ``REPLICATOR_CRASH_POINT`` names this point (one of
    :data:`CRASH_POINTS`) and this is the arrival it counts. ``before`` runs first, only
    then: what makes the claimed state true on the broker (a flush). ``where`` goes into
    the marker (which partition, which object), for the test to look at.

    Arrivals after the counted one (another thread or worker reaching the point while the
    counted one runs ``before``) wait for its kill instead of cutting it short: the state
    the marker claims is the counted arrival's, complete."""
    spec = os.environ.get("REPLICATOR_CRASH_POINT")
    if not spec:
        return
    point, _, nth = spec.partition(":")
    if point != name:
        return
    directory = os.environ.get("REPLICATOR_CRASH_DIR")
    arrival = _arrive(name, Path(directory) if directory else None)
    counted = int(nth or 1)
    if arrival < counted:
        return
    freeze = os.environ.get("REPLICATOR_CRASH_ACTION") == "stop"
    if arrival > counted:
        if freeze:
            return
        time.sleep(_LATE_ARRIVAL_WAIT_SECONDS)
    else:
        if before is not None:
            before()
        if directory:
            _leave_marker(Path(directory), name, arrival, where)
        if freeze:
            # Sent to this thread, not the process: a process-directed SIGSTOP may be
            # taken up by another thread while this one runs on past the point.
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)
            return
    _kill_session()


def marker(directory: Path, name: str) -> dict[str, object] | None:
    """What the crash at ``name`` wrote in ``directory``; None if it did not happen."""
    path = directory / f"{name}.hit"
    return json.loads(path.read_text()) if path.exists() else None


def _arrive(name: str, directory: Path | None) -> int:
    """This arrival's number: per process without a directory, per job with one (the
    position of this arrival's own line in the shared file, not the file's length, which
    a concurrent arrival may already have grown)."""
    if directory is None:
        with _arrivals_lock:
            _arrivals[name] = _arrivals.get(name, 0) + 1
            return _arrivals[name]
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.arrivals"
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, f"{os.getpid()}\n".encode())  # one write: atomic with O_APPEND
        mine_end = os.lseek(descriptor, 0, os.SEEK_CUR)
        return os.pread(descriptor, mine_end, 0).count(b"\n")
    finally:
        os.close(descriptor)


def _leave_marker(directory: Path, name: str, arrival: int, where: str) -> None:
    """Written whole under a name of its own, then linked into place: a reader never sees
    a marker half written, whenever the kill comes."""
    path = directory / f"{name}.hit"
    draft = directory / f"{name}.hit.{os.getpid()}.{threading.get_ident()}"
    hit = {"point": name, "arrival": arrival, "where": where, "pid": os.getpid()}
    with draft.open("w") as out:
        json.dump({**hit, "time": time.time()}, out)
        out.flush()
        os.fsync(out.fileno())
    try:
        os.link(draft, path)
    except FileExistsError:  # another process of the job got there first
        pass
    finally:
        draft.unlink()


def _kill_session() -> None:
    session = os.getsid(0)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.getsid(int(entry)) == session:
                os.kill(int(entry), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    os.kill(os.getpid(), signal.SIGKILL)
