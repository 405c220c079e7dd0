"""How Spark jobs (egress, compaction, restore) reach their executors on a cluster
(``[spark]``): whether this project and its dependencies are shipped to them, their
Python, and where packed environments are cached."""

from __future__ import annotations

from replicator.core.config._common import _Model


class SparkConfig(_Model):
    """How Spark jobs (egress, compaction, restore) reach executors on a cluster; ignored
    with a ``local`` master, whose executors are the driver's own processes."""

    ship_environment: bool = True
    """Pack this project and its Python dependencies (as installed beside the driver) into
    an archive, cached by content, that executors unpack and import from
    (``spark.archives``). Set false when the executors already have them at the same
    versions (a container image shared by driver and executors)."""
    executor_python: str | None = None
    """The executors' Python. Default: ``python3.<minor>`` of the driver when the
    environment is shipped (the same minor version is required: compiled dependencies
    and PySpark itself refuse another); the driver's own interpreter path otherwise (an
    image shared with the driver)."""
    environment_cache: str | None = None
    """Where packed environments are kept, named by their content's hash; with a local
    master, also the Spark home whose Python workers import the installed PySpark rather
    than its zip (they start faster; without a writable cache they use the zip); and the
    Spark driver JVM's class archive that ``replicator spark-archive`` records (sessions
    start in about half the time; without it they start as before). Default:
    ``$XDG_CACHE_HOME/replicator/spark-environments`` (``~/.cache/…``)."""
