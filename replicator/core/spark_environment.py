"""The Python environment a Spark cluster's executors run the replicator's tasks in.

On a cluster, executors start Python workers on machines that need not have this project,
pyarrow, confluent-kafka or boto3. Unless told the cluster has them, a job ships them: the
project's packages and every installed distribution its requirements reach (PySpark and
py4j excepted: Spark gives its workers its own) are packed into one archive, named by a
hash of its content and kept in a cache, so it is built once per version of the code and
dependencies. Spark sends it with ``spark.archives``; executors unpack it into their
working directory and find it on ``PYTHONPATH``.

What is packed are the driver's installed files, compiled extensions included: executors
must run the same operating system, architecture and Python minor version as the driver.
The executors' interpreter is pinned to that minor version by name (``python3.11``), and a
mismatch is reported as such (:func:`explain_executor_failure`).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import platform
import re
import shlex
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from replicator.core.config import SparkConfig

log = logging.getLogger(__name__)

PROJECT_DISTRIBUTION = "kafka-s3-replicator"
PROJECT_PACKAGES = ("replicator", "egress", "ingress", "compaction", "relay", "restore")
"""The project's own top-level packages that tasks import (``infra`` and the tests stay)."""
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
ARCHIVE_ALIAS = "replicator-env"
"""The directory executors unpack the archive into (``archive#alias``)."""


@dataclass(frozen=True)
class PackedFile:
    archive_path: str
    """Path inside the archive (relative to the directory put on ``PYTHONPATH``)."""
    source: Path


def driver_python_name() -> str:
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


def executor_settings(settings: SparkConfig, master: str | None) -> dict[str, str]:
    """The Spark settings that give executors their Python and, when shipped, the
    archive. Sets this process's ``PYSPARK_PYTHON`` too: PySpark names the interpreter of
    every Python function from it, on the executors and for the Python workers the
    driver's JVM starts itself (data source planning), so a bare name such as
    ``python3.11`` is made to resolve to this interpreter on the driver's machine."""
    if (master or "local").startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        return {"spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"]}
    if settings.ship_environment:
        python = settings.executor_python or driver_python_name()
    else:
        python = settings.executor_python or sys.executable
    os.environ["PYSPARK_PYTHON"] = python
    if os.sep not in python:
        _resolve_on_driver(python, environment_cache(settings))
    conf = {"spark.pyspark.python": python, "spark.executorEnv.PYSPARK_PYTHON": python}
    if settings.ship_environment:
        archive = packed_environment(environment_cache(settings))
        conf["spark.archives"] = f"{archive}#{ARCHIVE_ALIAS}"
        conf["spark.executorEnv.PYTHONPATH"] = ARCHIVE_ALIAS
    return conf


def _resolve_on_driver(command: str, cache: Path) -> None:
    """Put a directory first on this process's ``PATH`` (inherited by the JVM it starts)
    where ``command`` runs this interpreter (a script that execs it: a link would lose
    the virtual environment, which Python finds next to the path it was started by)."""
    directory = cache / "driver-bin" / hashlib.sha256(sys.executable.encode()).hexdigest()[:12]
    directory.mkdir(parents=True, exist_ok=True)
    script = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n'
    target = directory / command
    if not target.exists() or target.read_text() != script:
        temporary = directory / f".{command}.{os.getpid()}"
        temporary.write_text(script)
        temporary.chmod(0o755)
        os.replace(temporary, target)
    path = os.environ.get("PATH", "")
    if not path.startswith(f"{directory}{os.pathsep}"):  # once per process, not per session
        os.environ["PATH"] = f"{directory}{os.pathsep}{path}"


def environment_cache(settings: SparkConfig) -> Path:
    if settings.environment_cache:
        return Path(settings.environment_cache).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "replicator" / "spark-environments"


def requirement_closure(root: str) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``root``'s requirements reach (markers evaluated,
    extras not followed), without ``root`` and what Spark provides."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = [root]
    while pending:
        name = pending.pop()
        distribution = importlib.metadata.distribution(name)
        for text in distribution.requires or []:
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            key = canonical(requirement.name)
            if key in PROVIDED_BY_SPARK or key in seen:
                continue
            seen[key] = importlib.metadata.distribution(requirement.name)
            pending.append(requirement.name)
    return [seen[k] for k in sorted(seen)]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_files(distribution: importlib.metadata.Distribution) -> Iterable[PackedFile]:
    """The files a distribution installed into site-packages (not its scripts, nor
    compiled bytecode: workers compile what they import)."""
    for relative in distribution.files or []:
        text = str(relative)
        if text.startswith("..") or "__pycache__" in text or text.endswith(".pyc"):
            continue
        source = Path(str(distribution.locate_file(relative)))
        if source.is_file():
            yield PackedFile(text, source)


def project_files(packages: Iterable[str] = PROJECT_PACKAGES) -> Iterable[PackedFile]:
    """The project's own modules, from wherever they are imported (an editable install
    records none of them as installed files)."""
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"the replicator's package {package!r} is not importable")
        root = Path(next(iter(spec.submodule_search_locations)))
        for source in sorted(root.rglob("*.py")):
            if "__pycache__" not in source.parts:
                yield PackedFile(f"{package}/{source.relative_to(root)}", source)


def content_hash(
    project: Iterable[PackedFile], distributions: Iterable[importlib.metadata.Distribution]
) -> str:
    """A hash of what an archive would hold: the project's module paths and bytes, each
    distribution's name, version and installed-files record (which lists every file's own
    hash), and the platform they run on."""
    digest = hashlib.sha256(f"{driver_python_name()} {platform.machine()}\n".encode())
    for packed in project:
        digest.update(packed.archive_path.encode() + b"\0")
        digest.update(hashlib.sha256(packed.source.read_bytes()).digest())
    for distribution in distributions:
        record = distribution.read_text("RECORD") or ""
        name, version = distribution.metadata["Name"], distribution.version
        digest.update(f"{canonical(name)}=={version}\n{record}".encode())
    return digest.hexdigest()[:20]


def packed_environment(cache: Path) -> Path:
    """The archive of the current environment, built unless the cache has it."""
    project = list(project_files())
    distributions = requirement_closure(PROJECT_DISTRIBUTION)
    archive = cache / f"replicator-env-{content_hash(project, distributions)}.tar.gz"
    if archive.exists():
        log.info("executors get the packed environment %s (cached)", archive)
        return archive
    files = project + [f for d in distributions for f in distribution_files(d)]
    cache.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=cache, suffix=".partial")
    os.close(descriptor)
    try:
        with tarfile.open(temporary, "w:gz", compresslevel=3) as tar:
            for packed in files:
                tar.add(packed.source, arcname=packed.archive_path, recursive=False)
        os.replace(temporary, archive)  # complete or absent, never half-written
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    log.info(
        "packed %d files for executors into %s (%.0f MiB)",
        len(files),
        archive,
        archive.stat().st_size / 2**20,
    )
    return archive


_VERSION_MISMATCH = re.compile(
    r"Python in worker has different version:? \(?([\d., ]+)\)? than that in driver:? ([\d.]+)"
)
_NO_PYTHON = re.compile(r"Cannot run program \"([^\"]+)\"")


def explain_executor_failure(text: str) -> str | None:
    """What to do about a failure of executors to start the replicator's Python, if
    ``text`` (a Spark error) is one."""
    mismatch = _VERSION_MISMATCH.search(text)
    if mismatch:
        worker = ".".join(p.strip() for p in mismatch.group(1).split(",") if p.strip())
        return (
            f"the executors run Python {worker} and the driver Python {mismatch.group(2)}: "
            f"the same minor version is required; set [spark] executor_python to a "
            f"Python {mismatch.group(2)} on the executors"
        )
    missing = _NO_PYTHON.search(text)
    if missing:
        return (
            f"the executors cannot start {missing.group(1)!r}: install Python "
            f"{sys.version_info.major}.{sys.version_info.minor} there (the driver's version) "
            f"or set [spark] executor_python to its path"
        )
    return None
