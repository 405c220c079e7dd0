"""What executors get: the packed environment's content and cache, the pinned Python, and
the errors that say what to do when executors cannot run it."""

from __future__ import annotations

import os
import sys
import tarfile

import pytest

from replicator.core.config import SparkConfig
from replicator.core.spark_environment import (
    ARCHIVE_ALIAS,
    PackedFile,
    SparkEnvironmentError,
    _resolve_on_driver,
    canonical,
    content_hash,
    driver_bin_name,
    executor_settings,
    explain_executor_failure,
    project_files,
    requirement_closure,
)

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_closure_holds_the_runtime_dependencies_and_not_what_spark_brings():
    names = {canonical(d.metadata["Name"]) for d in requirement_closure("kafka-s3-replicator")}
    assert {"pyarrow", "confluent-kafka", "boto3", "botocore", "pydantic", "numpy"} <= names
    assert "pydantic-core" in names  # reached through pydantic
    assert not names & {"pyspark", "py4j", "pytest", "moto", "kafka-s3-replicator"}


def test_the_project_is_packed_from_its_sources():
    paths = {f.archive_path for f in project_files()}
    assert {"egress/segment_sink.py", "compaction/merge.py", "replicator/core/config.py"} <= paths
    assert not any(p.startswith(("infra/", "tests/")) or "__pycache__" in p for p in paths)


def test_the_hash_changes_with_any_module(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("A = 1\n")
    files = [PackedFile("pkg/m.py", module)]
    before = content_hash(files, [])
    module.write_text("A = 2\n")
    assert content_hash(files, []) != before


def test_a_local_master_runs_the_drivers_interpreter(monkeypatch):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert executor_settings(SparkConfig(), "local[2]") == {
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable
    }


def test_a_cluster_gets_the_archive_and_a_python_of_the_drivers_minor_version(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # both restored after the test
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    settings = SparkConfig(environment_cache=str(tmp_path))
    conf = executor_settings(settings, "spark://host:7077")
    assert conf["spark.pyspark.python"] == f"python{MINOR}"
    archive, alias = conf["spark.archives"].split("#")
    assert alias == ARCHIVE_ALIAS and conf["spark.executorEnv.PYTHONPATH"] == ARCHIVE_ALIAS
    with tarfile.open(archive) as packed:
        names = set(packed.getnames())
    assert {"egress/job.py", "pyarrow/__init__.py", "confluent_kafka/__init__.py"} <= names
    assert not any(n.startswith("pyspark/") for n in names)
    # The driver's own Python workers (data source planning) find this interpreter by
    # the same name.
    first = tmp_path.joinpath("driver-bin")
    assert any(first.rglob(f"python{MINOR}"))
    assert str(first) in os.environ["PATH"].split(":")[0]
    # Built once: the second session takes the cached archive.
    mtime = tmp_path.joinpath(archive).stat().st_mtime_ns
    assert (
        executor_settings(settings, "spark://host:7077")["spark.archives"] == conf["spark.archives"]
    )
    assert tmp_path.joinpath(archive).stat().st_mtime_ns == mtime


def test_a_cluster_that_has_the_project_gets_no_archive(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    conf = executor_settings(SparkConfig(ship_environment=False), "k8s://https://api:443")
    assert "spark.archives" not in conf
    assert conf["spark.pyspark.python"] == sys.executable


def test_executor_python_failures_say_what_to_do():
    mismatch = (
        "PySparkRuntimeError: [PYTHON_VERSION_MISMATCH] Python in worker has different "
        "version: 3.10 than that in driver: 3.11, PySpark cannot run with different minor "
        "versions."
    )
    assert explain_executor_failure(mismatch) == (
        "the executors run Python 3.10 and the driver Python 3.11: the same minor version "
        "is required; set [spark] executor_python to a Python 3.11 on the executors"
    )
    missing = 'java.io.IOException: Cannot run program "python3.99": error=2, No such file'
    assert explain_executor_failure(missing) == (
        f"the executors cannot start 'python3.99': install Python {MINOR} there (the "
        f"driver's version) or set [spark] executor_python to its path"
    )
    assert explain_executor_failure("TaskKilled: something else") is None


def test_a_cache_directory_others_can_write_is_refused(monkeypatch, tmp_path):
    """Whoever can write the cache chooses the code executors run and the script the
    driver's own Python workers start: a group- or world-writable cache is refused, by
    name, before anything is read from or written to it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    settings = SparkConfig(environment_cache=str(shared))
    with pytest.raises(SparkEnvironmentError, match=f"{shared}.* writable by others"):
        executor_settings(settings, "spark://host:7077")
    assert list(shared.iterdir()) == []
    shared.chmod(0o775)  # the group is others too
    with pytest.raises(SparkEnvironmentError, match="writable by others"):
        executor_settings(settings, "spark://host:7077")


def test_a_cache_made_afresh_is_private(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    previous = os.umask(0o002)
    try:
        cache = tmp_path / "new" / "cache"
        _resolve_on_driver(f"python{MINOR}", cache)
    finally:
        os.umask(previous)
    for directory in (cache, *[p for p in cache.rglob("*") if p.is_dir()]):
        assert directory.stat().st_mode & 0o077 == 0, directory


def test_the_drivers_python_script_is_written_through_a_fresh_file(monkeypatch, tmp_path):
    """A link planted where the script's temporary file would go is never followed: the
    script is written to a file made by ``mkstemp`` and renamed into place."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    command = f"python{MINOR}"
    directory = tmp_path / "driver-bin" / driver_bin_name()
    directory.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (directory / f".{command}.{os.getpid()}").symlink_to(victim)
    _resolve_on_driver(command, tmp_path)
    assert victim.read_text() == "precious\n"
    script = directory / command
    assert script.read_text().startswith("#!/bin/sh\nexec ")
    assert not script.is_symlink() and os.access(script, os.X_OK)
    assert [p.name for p in directory.iterdir() if p.name.endswith(".partial")] == []
