"""What every section of the config shares: the strict, frozen base model (unknown keys
refused, field docstrings kept for the reference); durations and sizes as an operator
writes them ("5m", "4GiB"); topic and region names, bind hosts and regular expressions,
checked at load; and key paths as TOML writes them, by which every error names its key.

``AS_DURATION`` and ``AS_SIZE`` are matched by identity in
:mod:`replicator.core.config_reference`, which shows such fields as durations and sizes.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from replicator.core.segments.key import check_region_name, check_topic_name
from replicator.core.units import parse_duration, parse_size


def _duration(value: Any) -> Any:
    return parse_duration(value) if isinstance(value, str) else value


def _size(value: Any) -> Any:
    return parse_size(value) if isinstance(value, (str, int)) else value


AS_DURATION = BeforeValidator(_duration, json_schema_input_type=str | float)
AS_SIZE = BeforeValidator(_size, json_schema_input_type=str | int)
"""Durations and sizes are written as text ("5m", "4GiB") or numbers (seconds, bytes):
what the JSON Schema of the file accepts too."""
Duration = Annotated[float, AS_DURATION, Field(ge=0)]
"""Seconds, written in the file as e.g. "250ms", "5m" or "7d"."""
Size = Annotated[int, AS_SIZE, Field(ge=0)]
"""Bytes, written in the file as e.g. "64KiB" or "4GiB" (a plain integer is bytes)."""
TopicName = Annotated[str, AfterValidator(check_topic_name)]
RegionName = Annotated[str, AfterValidator(check_region_name)]


class _Model(BaseModel):
    # Schemas are built at the first validation, not at import: a process that imports
    # the config without reading one (a Spark worker planning) pays nothing. Field
    # docstrings are read only by the readers that show them (config/docstrings.py).
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def _host(value: str) -> str:
    """An IP address or a host name to bind to."""
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?", value):
        raise ValueError(f"{value!r} is neither an IP address nor a host name")
    return value


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None
    return value


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def key_path(parts: tuple[str | int, ...]) -> str:
    """Render a location as TOML would write it: ``egress.topics."sensor.events".max_age``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        piece = part if _BARE_KEY.match(part) else '"' + part.replace('"', '\\"') + '"'
        out = f"{out}.{piece}" if out else piece
    return out
