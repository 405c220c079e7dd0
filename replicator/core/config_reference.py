"""The configuration reference, generated from the config model: every section and key
with its type, default, allowed values and meaning. The model's field docstrings are the
single source (read by :mod:`replicator.core.config.docstrings`); ``docs/configuration.md``
is this module's output, and ``make lint`` fails when the file is stale (``--check``).

    python -m replicator.core.config_reference --write docs/configuration.md
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from replicator.core.config import AS_DURATION, AS_SIZE, Config
from replicator.core.config.docstrings import documented

HEADER = """# Configuration reference

Generated from the config model (the `replicator/core/config/` package, a module per section) by
`python -m replicator.core.config_reference --write docs/configuration.md`; do not edit by
hand. `replicator config schema` prints the same as a JSON Schema, and `replicator config
check --config FILE` validates a file and shows what each service would use.

Durations are written as text (`250ms`, `30s`, `5m`, `7d`) or a number of seconds; sizes
as text (`64KiB`, `256MiB`, `4GiB`) or a number of bytes. Secrets are written as
`${NAME}` references to environment variables. `NAME` in a section's title is a name of
your choosing (a region, a topic).
"""


@dataclass(frozen=True)
class Row:
    key: str
    kind: str
    default: str
    allowed: str
    meaning: str


@dataclass(frozen=True)
class Section:
    title: str
    doc: str
    rows: tuple[Row, ...]


def sections(model: type[BaseModel] = Config, title: str = "") -> Iterator[Section]:
    """Every section under ``model`` in file order: its own keys, then its subsections."""
    documented(model)
    rows, nested = [], []
    for name, field in model.model_fields.items():
        inner, how = _nested_model(field.annotation)
        if inner is None:
            rows.append(_row(name, field))
        elif how == "dict":
            nested.append((f"{_join(title, name)}.NAME", inner))
        elif how == "list":
            nested.append((f"[{_join(title, name)}]", inner))
        else:
            nested.append((_join(title, name), inner))
    if rows:
        yield Section(title, _first_sentence(model.__doc__ or ""), tuple(rows))
    for sub_title, inner in nested:
        yield from sections(inner, sub_title)


def _join(title: str, name: str) -> str:
    base = title.strip("[]")
    return f"{base}.{name}" if base else name


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds, and how: itself, in a list, or as a dict's values."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            found = _nested_model(arg)
            if found[0] is not None:
                return found
        return None, ""
    if origin is list and args:
        found = _nested_model(args[0])
        return (found[0], "list") if found[0] is not None else (None, "")
    if origin is dict and len(args) == 2:
        found = _nested_model(args[1])
        return (found[0], "dict") if found[0] is not None else (None, "")
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "model"
    return None, ""


def _row(name: str, field: FieldInfo) -> Row:
    kind, allowed = _kind(field.annotation, field.metadata)
    return Row(name, kind, _default(field, kind), allowed, _first_sentence(field.description))


def _kind(annotation: Any, metadata: list[Any]) -> tuple[str, str]:
    """(type, allowed values) of a field, as an operator writes it."""
    if any(m is AS_DURATION for m in metadata):
        return "duration", ""
    if any(m is AS_SIZE for m in metadata):
        return "size", ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _kind(args[0], [*metadata, *args[1:]])
    if origin in (typing.Union, types.UnionType):
        kinds = [_kind(a, metadata) for a in args if a is not type(None)]
        return " or ".join(k for k, _ in kinds), ", ".join(a for _, a in kinds if a)
    if origin is Literal:
        return "text", ", ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_kind(args[0], [])[0]}", ""
    if origin is dict:
        return "table", ""
    if annotation is SecretStr:
        return "secret", ""
    names = {str: "text", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation))), ""


def _default(field: FieldInfo, kind: str) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default if field.default_factory is None else field.default_factory()  # type: ignore[call-arg]
    if value is None:
        return "unset"
    if value in ("", [], {}):
        return "empty"
    if kind.startswith("duration"):
        return f"`{human_duration(float(value))}`"
    if kind.startswith("size"):
        return f"`{human_size(int(value))}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def human_duration(seconds: float) -> str:
    """``seconds`` as the file would say it: ``250ms``, ``30s``, ``5m``, ``7d``. Pure."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


def human_size(count: int) -> str:
    """``count`` bytes as the file would say it: ``16MiB``, ``4GiB``. Pure."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= size and count % size == 0:
            return f"{count // size}{unit}"
    return str(count)


def _first_sentence(text: str | None) -> str:
    flat = " ".join((text or "").split())
    cut = flat.find(". ")
    sentence = flat if cut < 0 else flat[: cut + 1]
    return sentence.replace("``", "`").replace("|", "\\|")


def markdown() -> str:
    """The whole reference (``docs/configuration.md``). Pure."""
    out = [HEADER]
    for section in sections():
        out += ["", f"## `[{section.title}]`", ""]
        if section.doc:
            out += [section.doc, ""]
        if not section.rows:
            continue
        out += ["| key | type | default | allowed | meaning |", "| --- | --- | --- | --- | --- |"]
        out += [
            f"| `{r.key}` | {r.kind} | {r.default} | {r.allowed} | {r.meaning} |"
            for r in section.rows
        ]
    return "\n".join(out).rstrip() + "\n"


def undocumented() -> list[str]:
    """Keys without a meaning (a field without a docstring)."""
    return [f"[{s.title}] {r.key}" for s in sections() for r in s.rows if not r.meaning]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--write", type=Path, help="write the reference to this file")
    parser.add_argument("--check", type=Path, help="fail if this file is not the reference")
    args = parser.parse_args(argv)
    missing = undocumented()
    if missing:
        sys.stderr.write("keys without a docstring in the config model:\n  ")
        sys.stderr.write("\n  ".join(missing) + "\n")
        return 1
    text = markdown()
    if args.write:
        args.write.write_text(text)
    if args.check and (not args.check.exists() or args.check.read_text() != text):
        sys.stderr.write(
            f"{args.check} is stale: run python -m replicator.core.config_reference "
            f"--write {args.check}\n"
        )
        return 1
    if not args.write and not args.check:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
