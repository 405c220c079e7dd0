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

Whoever can write the cache chooses the code the executors run and the script the
driver's Python workers are started by: the cache and the directories made in it are
the user's own (mode 0700 when made here), and one that another user owns or that group
or others can write is refused before anything in it is read or written. Files appear
complete or not at all: each is written to a fresh ``mkstemp`` file beside it and
renamed into place (a link planted at a predictable name is never followed).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import platform
import re
import shlex
import stat
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from replicator.core.config import SparkConfig
from replicator.core.errors import ReplicatorError

log = logging.getLogger(__name__)

PROJECT_DISTRIBUTION = "kafka-s3-replicator"
PROJECT_PACKAGES = ("replicator", "egress", "ingress", "compaction", "relay", "restore")
"""The project's own top-level packages that tasks import (``infra`` and the tests stay)."""
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
ARCHIVE_ALIAS = "replicator-env"
"""The directory executors unpack the archive into (``archive#alias``)."""


class SparkEnvironmentError(ReplicatorError):
    """The environment cache cannot be trusted (another user owns it, or others can write
    it); names the directory and what to do."""


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
        if os.environ["PYSPARK_PYTHON"] == sys.executable:
            _workers_import_installed_pyspark(environment_cache(settings))
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


UNZIPPED_HOME = "spark-home"
"""The cache's directory of Spark homes without ``python/lib`` (one per PySpark install)."""


def _workers_import_installed_pyspark(cache: Path) -> None:
    """With a local master and this interpreter as the workers', point ``SPARK_HOME`` (read
    by the JVM this process starts) at :func:`unzipped_spark_home`, unless the operator
    set a Spark home of their own. Nothing changes if the home cannot be made here."""
    package = pyspark_package()
    if os.environ.get("SPARK_HOME", str(package)) != str(package):
        return
    try:
        home = unzipped_spark_home(cache, package)
    except (OSError, SparkEnvironmentError) as error:
        log.info("Python workers import PySpark from its zip (%s)", error)
        return
    if home is not None:
        os.environ["SPARK_HOME"] = str(home)


def pyspark_package() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ImportError("pyspark is not importable")
    return Path(spec.origin).parent


def unzipped_spark_home(cache: Path, package: Path) -> Path | None:
    """A Spark home for a pip-installed PySpark (``package``) that is the package in all
    but ``python/``: a link to each of its other entries.

    Why: Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the path of every
    Python worker it starts, and a local application starts seven (a daemon per worker
    module: data source lookup, creation, planning, reads, writes, the streaming source
    and sink runners). Python imports from a zip without a bytecode cache, compiling
    PySpark anew in each: ``import pyspark.worker`` takes 1.2 s from the zip, 0.4 s from
    the installed package, which holds the same files of the same version. Without the
    zip on their path, workers of this interpreter import the installed package.

    None when ``package`` is not such an install (no ``jars`` or no zip: a Spark
    distribution's own ``SPARK_HOME``, whose zip may be the only PySpark there is)."""
    if not (package / "jars").is_dir() or not (package / "python/lib/pyspark.zip").is_file():
        return None
    key = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    home = private_directory(cache, UNZIPPED_HOME, key)
    for entry in package.iterdir():
        if entry.name != "python":
            _link(home / entry.name, entry)
    return home


def _link(link: Path, target: Path) -> None:
    """``link`` → ``target``, made under a fresh name and renamed into place (another
    process may be making the same link)."""
    if link.is_symlink() and os.readlink(link) == str(target):
        return
    temporary = link.with_name(f".{link.name}.{os.getpid()}.partial")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    temporary.symlink_to(target)
    os.replace(temporary, link)


def _resolve_on_driver(command: str, cache: Path) -> None:
    """Put a directory first on this process's ``PATH`` (inherited by the JVM it starts)
    where ``command`` runs this interpreter (a script that execs it: a link would lose
    the virtual environment, which Python finds next to the path it was started by)."""
    directory = private_directory(cache, "driver-bin", driver_bin_name())
    script = f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n'
    target = directory / command
    if target.is_symlink() or not target.is_file() or target.read_text() != script:
        _write_atomically(target, script.encode(), mode=0o700)
    path = os.environ.get("PATH", "")
    if not path.startswith(f"{directory}{os.pathsep}"):  # once per process, not per session
        os.environ["PATH"] = f"{directory}{os.pathsep}{path}"


def driver_bin_name() -> str:
    """The directory of this interpreter's script, one per interpreter path."""
    return hashlib.sha256(sys.executable.encode()).hexdigest()[:12]


def _write_atomically(target: Path, content: bytes, mode: int) -> None:
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(content)
            os.fchmod(out.fileno(), mode)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def private_directory(root: Path, *parts: str) -> Path:
    """``root`` / ``parts``, each made (mode 0700) unless it exists, each checked to be
    this user's and writable by nobody else; SparkEnvironmentError otherwise. ``root``'s
    ancestors may be writable by others only with the sticky bit (as ``/tmp``): without
    it, others could rename the cache away and put their own in its place."""
    root = root.absolute()
    for ancestor in reversed(root.parents):
        if ancestor.exists():
            _check_ancestor(ancestor, root)
        else:
            with contextlib.suppress(FileExistsError):
                ancestor.mkdir(mode=0o700)
    path = root
    for part in (None, *parts):
        if part is not None:
            path = path / part
        if not path.exists():
            with contextlib.suppress(FileExistsError):  # another process's: checked below
                path.mkdir(mode=0o700)
        _check_private(path, root)
    return path


def _check_ancestor(ancestor: Path, root: Path) -> None:
    mode = ancestor.stat().st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise SparkEnvironmentError(
            f"the Spark environment cache {root} is inside {ancestor}, which anyone can "
            "write (and which has no sticky bit): set [spark] environment_cache to a "
            "directory of the replicator's user"
        )


def _check_private(path: Path, root: Path) -> None:
    status = path.stat()
    if status.st_uid != os.geteuid():
        raise SparkEnvironmentError(
            f"the Spark environment cache {path} belongs to user id {status.st_uid}, not "
            f"to this process's ({os.geteuid()}): its content chooses the code executors "
            f"run; set [spark] environment_cache to a directory of the replicator's user"
        )
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SparkEnvironmentError(
            f"the Spark environment cache {path} is writable by others (mode "
            f"{stat.S_IMODE(status.st_mode):o}): its content chooses the code executors "
            f"run; make it private (chmod go-w {path}) or set [spark] environment_cache "
            f"to another directory (under {root} nothing else was read or written)"
        )


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
    """The project's own modules and compiled extensions, from wherever they are imported
    (an editable install records none of them as installed files)."""
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"the replicator's package {package!r} is not importable")
        root = Path(next(iter(spec.submodule_search_locations)))
        for source in sorted(root.rglob("*")):
            if "__pycache__" not in source.parts and _is_module(source):
                yield PackedFile(f"{package}/{source.relative_to(root)}", source)


def _is_module(path: Path) -> bool:
    """A Python module or a compiled extension (egress's C range reader)."""
    return path.suffix == ".py" or any(
        path.name.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES
    )


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
    cache = private_directory(cache)
    project = list(project_files())
    distributions = requirement_closure(PROJECT_DISTRIBUTION)
    archive = cache / f"replicator-env-{content_hash(project, distributions)}.tar.gz"
    if archive.exists():
        log.info("executors get the packed environment %s (cached)", archive)
        return archive
    files = project + [f for d in distributions for f in distribution_files(d)]
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
