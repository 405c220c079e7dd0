"""What executors get: the packed environment's content and cache, the pinned Python, and
the errors that say what to do when executors cannot run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyspark
import pytest

from replicator.core.config import SparkConfig
from replicator.core.kafka import arrow_reader_build
from replicator.core.spark_environment import (
    ARCHIVE_ALIAS,
    UNZIPPED_HOME,
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
    unzipped_spark_home,
)

MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_the_closure_holds_the_runtime_dependencies_and_not_what_spark_brings():
    names = {canonical(d.metadata["Name"]) for d in requirement_closure("kafka-s3-replicator")}
    assert {"pyarrow", "confluent-kafka", "boto3", "botocore", "pydantic", "numpy"} <= names
    assert "pydantic-core" in names  # reached through pydantic
    assert not names & {"pyspark", "py4j", "pytest", "moto", "kafka-s3-replicator"}


def test_the_project_is_packed_from_its_sources():
    paths = {f.archive_path for f in project_files()}
    assert {
        "egress/segment_sink.py",
        "compaction/merge.py",
        "replicator/core/config/__init__.py",
    } <= paths
    assert not any(p.startswith(("infra/", "tests/")) or "__pycache__" in p for p in paths)
    # Executors read ranges with the C reader that `make setup` built, not the slower one.
    reader = arrow_reader_build.built()
    assert reader is not None
    assert f"replicator/core/kafka/{reader.name}" in paths
    assert not any(p.endswith((".c", ".partial")) for p in paths)


def test_the_hash_changes_with_any_module(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("A = 1\n")
    files = [PackedFile("pkg/m.py", module)]
    before = content_hash(files, [])
    module.write_text("A = 2\n")
    assert content_hash(files, []) != before


def test_a_local_master_runs_the_drivers_interpreter(monkeypatch, tmp_path):
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    settings = SparkConfig(environment_cache=str(tmp_path))
    assert executor_settings(settings, "local[2]") == {
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable
    }
    assert os.environ["SPARK_HOME"].startswith(f"{tmp_path}{os.sep}{UNZIPPED_HOME}")


def test_a_local_spark_home_is_the_installed_pyspark_without_its_zips(tmp_path):
    package = Path(pyspark.__file__).parent
    home = unzipped_spark_home(tmp_path, package)
    assert home is not None
    assert (home / "bin" / "spark-submit").resolve() == (package / "bin" / "spark-submit")
    assert (home / "jars").resolve() == package / "jars"
    assert not (home / "python").exists()
    assert sorted(p.name for p in home.iterdir()) == sorted(
        p.name for p in package.iterdir() if p.name != "python"
    )
    assert unzipped_spark_home(tmp_path, package) == home  # made once, found again


def test_a_spark_distribution_keeps_its_own_home(tmp_path):
    """A Spark home without the pip package's zip (a distribution whose zip may be the
    only PySpark its workers have) is not replaced."""
    distribution = tmp_path / "spark"
    (distribution / "jars").mkdir(parents=True)
    assert unzipped_spark_home(tmp_path / "cache", distribution) is None


def test_an_operators_spark_home_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "their-spark"))
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    executor_settings(SparkConfig(environment_cache=str(tmp_path / "cache")), "local[2]")
    assert os.environ["SPARK_HOME"] == str(tmp_path / "their-spark")
    assert not (tmp_path / "cache").exists()


def test_a_local_sessions_python_workers_import_the_installed_pyspark(tmp_path):
    """The workers a local session starts import PySpark from the installed package
    (bytecode cached), not from the zip Spark would put first on their path."""
    probe = (
        "import json, sys\n"
        "from replicator.core.spark import spark_session\n"
        "spark = spark_session('local[1]', 'probe', {})\n"
        "def where(_):\n"
        "    import pyspark\n"
        "    import os\n"
        "    zips = [p for p in sys.path if p.endswith('.zip') and os.path.exists(p)]\n"
        "    return pyspark.__file__, [p for p in zips if 'pyspark' in p or 'py4j' in p]\n"
        "print(json.dumps(spark.sparkContext.parallelize([0], 1).map(where).collect()))\n"
        "spark.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "PYSPARK_PYTHON")}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [(module, zips)] = json.loads(done.stdout.strip().splitlines()[-1])
    assert module == pyspark.__file__
    assert zips == []


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
