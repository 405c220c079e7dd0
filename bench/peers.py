"""The benchmark's peers, set up once into ``.bench-peers/<version>/`` in the checkout.

- MirrorMaker 2, the relay's peer: ``org.apache.kafka:connect-mirror`` and
  ``connect-runtime`` at the local broker's version (:data:`infra.broker.KAFKA_VERSION`)
  with their runtime dependencies, copied by Maven from ``bench/peers/pom.xml`` into
  ``libs/``.
- The archive path's compiled-client limit (``bench/java/CompiledLimit.java``), compiled
  with javac into ``classes/`` against the broker's own ``kafka-clients`` jar (nothing
  more is downloaded for it).

``make bench`` runs ``python -m bench.peers fetch`` first. Each part is redone only when
its inputs change (the version and the pom's hash, the source's hash, recorded in a
marker beside it); nothing is ever written under ``.kafka/``. A missing part is an error
that says how to make it, never a download while a benchmark runs.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import shutil
import subprocess
from pathlib import Path

from infra.broker import KAFKA_VERSION, PROJECT_ROOT, kafka_libs, maven_libs
from infra.errors import StackError
from replicator.core.logs import configure_logging

log = logging.getLogger(__name__)

HOME = PROJECT_ROOT / ".bench-peers" / KAFKA_VERSION
POM = Path(__file__).resolve().parent / "peers" / "pom.xml"
LIMIT_SOURCE = Path(__file__).resolve().parent / "java" / "CompiledLimit.java"
LIMIT_CLASS = "CompiledLimit"
MIRROR_MAKER_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"
LIMIT_CLIENT_JARS = ("kafka-clients-", "slf4j-api-", "lz4-java-", "snappy-java-", "zstd-jni-")
"""The broker's jars the limit runs on: the Java clients and their runtime dependencies."""


def _wanted(*inputs: Path) -> str:
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in inputs)).hexdigest()
    return f"{KAFKA_VERSION} {digest}\n"


def fetch_mirror_maker(home: Path = HOME) -> Path:
    """MirrorMaker 2's jars in ``home/libs`` (Maven), unless fetched there already."""
    return maven_libs(POM, home / "libs", home / "libs.fetched", _wanted(POM), "MirrorMaker 2")


def limit_classpath() -> list[Path]:
    """The broker's jars the compiled-client limit compiles and runs against."""
    jars = sorted(kafka_libs().glob("*.jar"))
    return [j for j in jars if j.name.startswith(LIMIT_CLIENT_JARS)]


def compile_limit(home: Path = HOME) -> Path:
    """The limit's classes in ``home/classes`` (javac), unless compiled from this source."""
    classes, marker = home / "classes", home / "classes.compiled"
    wanted = _wanted(LIMIT_SOURCE)
    if marker.exists() and marker.read_text() == wanted:
        return classes
    javac = shutil.which("javac")
    if javac is None:
        raise StackError("javac (a JDK 17+) is needed to compile the benchmark's client limit")
    shutil.rmtree(classes, ignore_errors=True)
    classpath = ":".join(str(j) for j in limit_classpath())
    command = [javac, "-d", str(classes), "-cp", classpath, str(LIMIT_SOURCE)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StackError(f"javac could not compile {LIMIT_SOURCE.name}:\n{done.stderr[-3000:]}")
    marker.write_text(wanted)
    return classes


def _ready(path: Path, marker: Path, what: str) -> Path:
    if not marker.exists():
        raise StackError(
            f"{what} is not in {path}: run `make bench` (or `python -m bench.peers fetch`)"
        )
    return path


def mirror_maker_libs(home: Path = HOME) -> Path:
    return _ready(home / "libs", home / "libs.fetched", f"MirrorMaker 2 {KAFKA_VERSION}")


def limit_classes(home: Path = HOME) -> Path:
    return _ready(home / "classes", home / "classes.compiled", "the compiled-client limit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["fetch"])
    parser.parse_args()
    configure_logging("INFO")
    print(fetch_mirror_maker())
    print(compile_limit())


if __name__ == "__main__":
    main()
