"""The root of the replicator's exceptions, and the configuration error.

Every error the product raises on purpose derives from :class:`ReplicatorError`, so an
entry point can tell a user error (print one line, exit non-zero) from a bug (traceback).
Each area keeps its own exceptions next to its code (``replicator.core.kafka.errors``,
``replicator.core.aws.errors``, ``replicator.core.segments.errors``, ``egress.errors``,
``ingress.errors``, ``infra.errors``); :func:`error_names` lists them all from the class
tree, for code that must recognise our errors by name in text (a Spark failure).

Subclasses carry the context an operator needs to act: the file and key path, the S3 key,
the topic and partition, the Kafka error code. Messages never contain secret values.
Every class name ends in ``Error``.
"""

from __future__ import annotations


class ReplicatorError(Exception):
    """Root of all errors raised deliberately by the replicator."""


class ConfigError(ReplicatorError):
    """The config file is missing, unparseable or invalid.

    ``problems`` holds one ``(key_path, message)`` pair per problem found, so a file with
    several mistakes is reported in one go.
    """

    def __init__(self, path: str, problems: list[tuple[str, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{key}: {msg}" if key else msg for key, msg in problems]
        if len(lines) == 1:
            text = f"{path}: {lines[0]}"
        else:
            text = f"{path}: {len(lines)} problems\n" + "\n".join(f"  {line}" for line in lines)
        super().__init__(text)


def error_names(root: type[BaseException] = ReplicatorError) -> frozenset[str]:
    """The class names of ``root`` and every subclass defined so far (import an area's
    errors module before asking, so that its classes are counted)."""
    names = {root.__name__}
    for sub in root.__subclasses__():
        names |= error_names(sub)
    return frozenset(names)
