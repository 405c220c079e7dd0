"""The Spark driver JVM's class archive: sessions that start in half the time.

Why: before a Spark session is ready, the driver's JVM loads, parses and verifies some
fifteen thousand classes from Spark's jars, which on a small machine takes longer than
the work of a short job (a compaction run, a restore, a ``--stop-at-end`` export).
Measured on two cores: a local session 9.4 s to start and 4.5 s for its first job;
with the archive 4.5 s and 2.0 s. JDK's class-data sharing (JEP 350, dynamic archives)
maps the classes an earlier run loaded from a file instead.

The rules, and why:

- An archive serves only the JVM and the class path that recorded it, so it is named by
  a hash of both (:func:`class_path_key`: the ``java`` the launcher runs, ``SPARK_HOME``,
  its conf directory, and each jar's name, size and modification time) and kept in the
  environment cache, whose trust rules it shares (:mod:`replicator.core.spark_environment`:
  it chooses code the driver runs). A JVM given an archive that does not match ignores
  it; it is told to say nothing about it, because the JVM's notices go to its standard
  output, which carries a command's JSON.
- JDK cannot archive a class path holding a non-empty directory, and Spark's launcher
  puts the conf directory (``SPARK_CONF_DIR``, else ``SPARK_HOME/conf``) first on it: a
  conf directory with files in it means no archive (sessions start as before).
- It is recorded on purpose, never as a side effect of a job: ``replicator
  spark-archive`` (run by ``make setup``; a container image's build should run it too)
  starts a local session in a process of its own that runs what the jobs run (Python
  data sources, batch and streaming, with Arrow; an RDD map) and the JVM writes the
  classes it loaded when it exits. The file is written under a fresh name and renamed
  into place once complete; an archive for a class path no longer installed is removed.
- Without an archive, or where it cannot be read, a session starts as it always did.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.core.config import SparkConfig
from replicator.core.spark_environment import (
    SparkEnvironmentError,
    environment_cache,
    executor_settings,
    private_directory,
    pyspark_package,
)

log = logging.getLogger(__name__)

ARCHIVES = "jvm-classes"
"""The cache's directory of class archives, one per driver class path."""

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
"""The JVM's notices about the archive off (they would go to standard output)."""

RECORD_TIMEOUT = 600.0


def spark_home(env: Mapping[str, str] | None = None) -> Path:
    """The Spark home the driver's launcher runs from: ``SPARK_HOME``, else PySpark's
    package (as PySpark itself finds it)."""
    environment = os.environ if env is None else env
    return Path(environment.get("SPARK_HOME") or pyspark_package())


def java_command(env: Mapping[str, str] | None = None) -> Path | None:
    """The ``java`` Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the one on the
    ``PATH``, links resolved; None when there is none."""
    environment = os.environ if env is None else env
    if environment.get("JAVA_HOME"):
        candidate = Path(environment["JAVA_HOME"]) / "bin" / "java"
        return candidate.resolve() if candidate.is_file() else None
    found = shutil.which("java", path=environment.get("PATH"))
    return Path(found).resolve() if found else None


def conf_directory(home: Path, env: Mapping[str, str] | None = None) -> Path:
    environment = os.environ if env is None else env
    return Path(environment.get("SPARK_CONF_DIR") or home / "conf")


def class_path_key(home: Path, env: Mapping[str, str] | None = None) -> str | None:
    """What names the archive of the driver JVM that ``home``'s launcher starts: the java
    binary, the home, its conf directory and every jar (name, size, modification time),
    as the JVM itself checks them. None when no archive can serve that JVM: no java, or
    a conf directory with files in it (see the module's rules)."""
    environment = os.environ if env is None else env
    java = java_command(environment)
    conf = conf_directory(home, environment)
    if java is None or (conf.is_dir() and any(conf.iterdir())):
        return None
    digest = hashlib.sha256()
    java_status = java.stat()
    digest.update(f"{java} {java_status.st_size} {java_status.st_mtime_ns}\n".encode())
    digest.update(f"{home}\n{conf}\n{environment.get('SPARK_DIST_CLASSPATH', '')}\n".encode())
    jars = home / "jars"
    for jar in sorted(jars.iterdir()) if jars.is_dir() else []:
        status = jar.stat()
        digest.update(f"{jar.name} {status.st_size} {status.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def archive_name(home: Path, key: str) -> str:
    """``<home hash>-<class path key>.jsa``: the home's part finds the archives a new
    one for the same home replaces."""
    return f"{_home_hash(home)}-{key}.jsa"


def _home_hash(home: Path) -> str:
    return hashlib.sha256(str(home).encode()).hexdigest()[:12]


def driver_java_options(settings: SparkConfig) -> str:
    """The driver JVM's options that map the archive for the class path this process's
    launcher will use, or ``""`` when there is none (or the cache cannot be trusted,
    which is reported when the session needs the cache for anything else)."""
    home = spark_home()
    key = class_path_key(home)
    if key is None:
        return ""
    cache = environment_cache(settings)
    archive = cache / ARCHIVES / archive_name(home, key)
    if not archive.is_file():
        return ""
    try:  # the cache's trust rules, checked before its archive is handed to a JVM
        private_directory(cache, ARCHIVES)
    except (OSError, SparkEnvironmentError) as error:
        log.info("no class archive for the Spark driver (%s)", error)
        return ""
    return f"-XX:SharedArchiveFile={shlex.quote(str(archive))} {QUIET}"


@dataclass(frozen=True)
class ArchiveResult:
    path: Path
    recorded: bool
    """False: the archive was there already."""
    seconds: float


def build(settings: SparkConfig, timeout: float = RECORD_TIMEOUT) -> ArchiveResult:
    """The archive for local sessions of this installation, recorded unless the cache
    has it. Raises :class:`SparkEnvironmentError` naming why none can be made."""
    started = time.monotonic()
    executor_settings(settings, "local")  # the Spark home local sessions run from
    home = spark_home()
    key = class_path_key(home)
    if key is None:
        raise SparkEnvironmentError(_why_no_key(home))
    directory = private_directory(environment_cache(settings), ARCHIVES)
    target = directory / archive_name(home, key)
    if target.is_file():
        return ArchiveResult(target, recorded=False, seconds=time.monotonic() - started)
    with _fresh_path(directory, target.name) as partial:
        _record_in_child(settings, partial, timeout)
        os.replace(partial, target)
    _remove_replaced(directory, home, keep=target)
    return ArchiveResult(target, recorded=True, seconds=time.monotonic() - started)


def _why_no_key(home: Path) -> str:
    if java_command() is None:
        return "no class archive: no java found (JAVA_HOME, PATH) for Spark's driver"
    conf = conf_directory(home)
    return (
        f"no class archive: the Spark conf directory {conf} holds files, and the JVM "
        "cannot archive a class path with a non-empty directory on it (Spark's launcher "
        "puts the conf directory first); move its settings to --conf options or point "
        "SPARK_CONF_DIR at an empty directory"
    )


@contextlib.contextmanager
def _fresh_path(directory: Path, name: str) -> Iterator[Path]:
    """A path in ``directory`` no one else uses (the JVM creates the file), removed
    unless renamed away."""
    descriptor, text = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".partial")
    os.close(descriptor)
    path = Path(text)
    path.unlink()
    try:
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_replaced(directory: Path, home: Path, keep: Path) -> None:
    """Archives of ``home`` for class paths it no longer has (a Java or Spark upgrade)."""
    for old in directory.glob(f"{_home_hash(home)}-*.jsa"):
        if old != keep:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()
                log.info("removed the class archive %s (its class path changed)", old)


def _record_in_child(settings: SparkConfig, partial: Path, timeout: float) -> None:
    """Run :func:`_record` in a process of its own (its JVM writes the archive as it
    exits); SparkEnvironmentError with the end of its output when no archive came."""
    command = [sys.executable, "-m", __name__, "--record", str(partial)]
    if settings.environment_cache:
        command += ["--cache", settings.environment_cache]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as error:
        raise SparkEnvironmentError(
            f"recording the Spark driver's class archive took over {timeout:.0f} s"
        ) from error
    if done.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise SparkEnvironmentError(
            "recording the Spark driver's class archive failed (exit status "
            f"{done.returncode}):\n" + "\n".join(tail)
        )


def _record(partial: Path, settings: SparkConfig) -> None:
    """In the recording process: a local session that runs what the jobs run, stopped,
    and its JVM waited for (it writes ``partial`` as it exits)."""
    from pyspark import SparkContext

    from replicator.core.spark import spark_session

    options = {"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial}"}
    spark = spark_session(
        "local[2]", "replicator-class-archive", options, settings, class_archive=False
    )
    try:
        _exercise(spark, partial.parent)
    finally:
        spark.stop()
    gateway = SparkContext._gateway
    if gateway is None or gateway.proc is None:
        raise SparkEnvironmentError("the Spark driver's JVM was not started by this process")
    process = gateway.proc
    gateway.shutdown()
    process.stdin.close()  # the JVM exits when its standard input closes
    process.wait(RECORD_TIMEOUT)


def _exercise(spark: Any, scratch: Path) -> None:
    """What egress, compaction and restore do with a session, on a few rows: a Python
    data source read as a stream in Arrow batches into a Python streaming sink, and an
    RDD of Python tasks collected."""
    from replicator.core import spark_class_archive_sources as sources

    spark.dataSource.register(sources.CountingSource)
    spark.dataSource.register(sources.DiscardingSink)
    checkpoint = tempfile.mkdtemp(dir=scratch, prefix=".record-checkpoint-")
    try:
        query = (
            spark.readStream.format(sources.SOURCE_NAME)
            .load()
            .writeStream.format(sources.SINK_NAME)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(RECORD_TIMEOUT)
        spark.sparkContext.parallelize(range(4), 2).map(lambda n: n * n).collect()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", required=True, type=Path)
    parser.add_argument("--cache")
    args = parser.parse_args(argv)
    _record(args.record, SparkConfig(environment_cache=args.cache))


if __name__ == "__main__":
    main()
