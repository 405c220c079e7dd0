"""The local brokers' class archive (:mod:`infra.broker_archive`): the one ``make setup``
recorded is mapped by the brokers' JVM, and another Java or release never gets it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from infra.broker import BrokerSpec, command, java, kafka_libs
from infra.broker_archive import archive_options, archive_path


def test_the_recorded_archive_is_mapped_by_the_brokers_jvm():
    options = archive_options(java(), kafka_libs())
    assert options, (
        f"no class archive at {archive_path(java(), kafka_libs())}: make setup records it"
    )
    # -Xshare:on makes a JVM that cannot map the archive refuse to start.
    tool = [java(), "-Xshare:on", *options, "-cp", f"{kafka_libs()}/*", "kafka.tools.StorageTool"]
    done = subprocess.run(
        [*tool, "version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "metadata.version" in done.stdout, done.stdout
    assert all(option in command(BrokerSpec("127.0.0.1", 9092, Path("b"))) for option in options)


def test_a_changed_jar_or_java_names_another_archive(tmp_path: Path):
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in ("kafka_2.13.jar", "kafka-clients.jar"):
        (libs / name).write_bytes(b"jar")
    first = archive_path(java(), libs)
    assert first.parent == tmp_path and first.name.startswith("classes-")
    assert archive_options(java(), libs) == ()  # none recorded
    first.write_bytes(b"archive")
    assert archive_options(java(), libs)[0] == f"-XX:SharedArchiveFile={first}"

    stamp = (libs / "kafka-clients.jar").stat().st_mtime_ns
    os.utime(libs / "kafka-clients.jar", ns=(stamp, stamp + 1_000_000_000))
    assert archive_path(java(), libs) != first
    assert archive_options(java(), libs) == ()

    other_java = tmp_path / "java"
    shutil.copy(java(), other_java)
    assert archive_path(str(other_java), libs) != archive_path(java(), libs)
