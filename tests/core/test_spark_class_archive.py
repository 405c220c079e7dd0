"""The Spark driver's class archive: named by the class path it serves, mapped by the
sessions that match it, silent where it does not, and never made from a class path the
JVM cannot archive."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.core.config import SparkConfig
from replicator.core.spark_class_archive import (
    ARCHIVES,
    QUIET,
    archive_name,
    build,
    class_path_key,
    driver_java_options,
    spark_home,
)
from replicator.core.spark_environment import SparkEnvironmentError, executor_settings


@pytest.fixture
def clean_spark_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Spark home, conf directory or workers' Python from outside, and whatever the
    test's sessions set in this process's environment undone afterwards."""
    for name in ("SPARK_HOME", "SPARK_CONF_DIR", "PYSPARK_PYTHON"):
        monkeypatch.setenv(name, "")  # recorded as it was, so it is restored
        monkeypatch.delenv(name)


@pytest.fixture
def fake_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A Spark home of two jars and a ``java`` of its own, and the environment naming them."""
    home = tmp_path / "home"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (home / "jars" / name).write_bytes(b"jar " + name.encode())
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    return home, {"JAVA_HOME": str(tmp_path / "jdk"), "PATH": "/nonexistent"}


def test_the_key_follows_every_jar_and_the_java(fake_home, tmp_path):
    home, env = fake_home
    key = class_path_key(home, env)
    assert key is not None and class_path_key(home, env) == key
    jar = home / "jars" / "spark-sql.jar"
    jar.write_bytes(b"another build of the same name")
    changed_jar = class_path_key(home, env)
    assert changed_jar not in (None, key)
    (home / "jars" / "extra.jar").write_bytes(b"x")
    assert class_path_key(home, env) not in (None, key, changed_jar)
    other_java = tmp_path / "jdk2" / "bin" / "java"
    other_java.parent.mkdir(parents=True)
    other_java.write_text("#!/bin/sh\n# another build\n")
    assert class_path_key(home, {**env, "JAVA_HOME": str(tmp_path / "jdk2")}) not in (
        None,
        class_path_key(home, env),
    )


def test_no_key_without_java_or_with_files_in_the_conf_directory(fake_home, tmp_path):
    home, env = fake_home
    assert class_path_key(home, {"PATH": "/nonexistent"}) is None
    conf = tmp_path / "conf"
    conf.mkdir()
    assert class_path_key(home, {**env, "SPARK_CONF_DIR": str(conf)}) is not None  # empty
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    assert class_path_key(home, {**env, "SPARK_CONF_DIR": str(conf)}) is None
    (home / "conf").mkdir()
    (home / "conf" / "log4j2.properties.template").write_text("")
    assert class_path_key(home, env) is None  # SPARK_HOME/conf when SPARK_CONF_DIR is unset


def test_a_conf_directory_with_files_is_refused_naming_it(clean_spark_env, monkeypatch, tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf))
    with pytest.raises(SparkEnvironmentError, match=f"conf directory {conf} holds files"):
        build(SparkConfig(environment_cache=str(tmp_path / "cache")))
    assert not (tmp_path / "cache" / ARCHIVES).exists() or not any(
        (tmp_path / "cache" / ARCHIVES).iterdir()
    )


def test_only_an_archive_for_this_class_path_is_handed_to_the_jvm(clean_spark_env, tmp_path):
    settings = SparkConfig(environment_cache=str(tmp_path / "cache"))
    executor_settings(settings, "local")
    assert driver_java_options(settings) == ""  # none recorded
    home = spark_home()
    key = class_path_key(home)
    assert key is not None
    archives = tmp_path / "cache" / ARCHIVES
    archives.mkdir(mode=0o700)
    (archives / archive_name(home, "0" * 24)).write_bytes(b"another class path's")
    assert driver_java_options(settings) == ""
    archive = archives / archive_name(home, key)
    archive.write_bytes(b"recorded")
    assert driver_java_options(settings) == f"-XX:SharedArchiveFile={archive} {QUIET}"
    archives.chmod(0o777)  # a cache others can write chooses the classes: not used
    assert driver_java_options(settings) == ""
    archives.chmod(0o700)


def _session_probe(cache: Path, class_log: Path) -> str:
    return (
        "from replicator.core.config import SparkConfig\n"
        "from replicator.core.spark import spark_session\n"
        f"settings = SparkConfig(environment_cache={str(cache)!r})\n"
        "spark = spark_session('local[1]', 'probe', {'spark.driver.extraJavaOptions': "
        f"'-Xlog:class+load=info:file={class_log}'}}, settings)\n"
        "assert spark.sparkContext.parallelize([1, 2], 1).map(lambda n: n + 1).sum() == 5\n"
        "spark.stop()\n"
        "print('probe done')\n"
    )


def _run_session(
    cache: Path, class_log: Path, conf_dir: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_HOME", "SPARK_CONF_DIR")}
    if conf_dir is not None:
        env["SPARK_CONF_DIR"] = str(conf_dir)
    done = subprocess.run(
        [sys.executable, "-c", _session_probe(cache, class_log)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.integration  # starts Spark (and records the archive if make setup did not)
def test_a_session_maps_the_recorded_archive(clean_spark_env, tmp_path):
    """The archive ``make setup`` records (in the default cache) serves the sessions of
    this installation: most classes the driver loads come from it."""
    settings = SparkConfig()
    result = build(settings)
    assert result.path.is_file()
    cache = result.path.parent.parent
    loaded = tmp_path / "classes.log"
    _run_session(cache, loaded)
    lines = loaded.read_text().splitlines()
    shared = [line for line in lines if "source: shared objects file (top)" in line]
    assert len(lines) > 5_000 and len(shared) > len(lines) // 2, (len(shared), len(lines))


@pytest.mark.integration  # starts Spark
def test_an_archive_the_jvm_cannot_use_changes_nothing_and_prints_nothing(
    clean_spark_env, tmp_path
):
    """An archive recorded for another class path under this one's name (the JVM checks
    the class path it holds; here, the session's conf directory comes first on it): the
    session starts as without one, and the JVM's notice that it could not use it does
    not reach standard output (a command's JSON goes there)."""
    recorded = build(SparkConfig()).path  # recorded with no conf directory
    del os.environ["SPARK_HOME"]  # which the build set (clean_spark_env restores it)
    cache, conf_dir = tmp_path / "cache", tmp_path / "empty-conf"
    conf_dir.mkdir()
    executor_settings(SparkConfig(environment_cache=str(cache)), "local")
    home = spark_home()
    key = class_path_key(home, {**os.environ, "SPARK_CONF_DIR": str(conf_dir)})
    assert key is not None
    (cache / ARCHIVES).mkdir(mode=0o700)
    shutil.copyfile(recorded, cache / ARCHIVES / archive_name(home, key))
    loaded = tmp_path / "classes.log"
    done = _run_session(cache, loaded, conf_dir)
    assert done.stdout.strip() == "probe done", done.stdout[-2000:]
    assert "shared objects file (top)" not in loaded.read_text()
