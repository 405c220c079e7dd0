"""The whole deployment's config (:class:`Config`): one model whose fields are the
sections of the file, in the order the reference shows them, each section's model in a
module of its own; and :func:`required`, the one way to get a section a command cannot
run without.

A ``Config`` is built by :func:`replicator.core.config.loader.load_config`, which also
records where it came from and the values it wrote as ``${NAME}`` references (its
private attributes)."""

from __future__ import annotations

from typing import Any, Literal, overload

from pydantic import Field, PrivateAttr

from replicator.core.config._common import RegionName, _Model, key_path
from replicator.core.config.compaction import CompactionConfig
from replicator.core.config.egress import EgressConfig
from replicator.core.config.filters import FiltersConfig
from replicator.core.config.ingress import IngressConfig
from replicator.core.config.regions import RegionConfig
from replicator.core.config.relay import RelayConfig
from replicator.core.config.s3 import S3Config
from replicator.core.config.spark import SparkConfig
from replicator.core.errors import ConfigError


class Config(_Model):
    """The whole deployment. Build it with :func:`load_config`."""

    s3: S3Config = Field(default_factory=S3Config)
    """How S3 is reached (endpoint, credentials, encryption)."""
    regions: dict[RegionName, RegionConfig]
    """Every region or cluster by name: its Kafka, and its bucket and queue if it has them."""
    egress: EgressConfig | None = None
    """The export from Kafka to S3 (Spark), in the source region."""
    ingress: IngressConfig | None = None
    """The replay from S3 into Kafka, in the destination region."""
    compaction: CompactionConfig | None = None
    """Merging small segments into larger ones (Spark batch)."""
    relay: RelayConfig | None = None
    """The direct Kafka-to-Kafka relay."""
    spark: SparkConfig = Field(default_factory=SparkConfig)
    """How Spark jobs reach their executors on a cluster."""
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    """Which modules record filter plugins may be loaded from."""

    _source: str = PrivateAttr(default="config")
    _secret_texts: dict[tuple[str | int, ...], str] = PrivateAttr(default_factory=dict)
    """Each secret field's text as written in the file, before ``${NAME}`` expansion."""
    _reference_texts: dict[tuple[str | int, ...], str] = PrivateAttr(default_factory=dict)
    """Every value the file wrote with a ``${NAME}`` reference (secret field or not), as
    written: what is handed to other processes in place of the expanded value."""
    _reference_values: dict[tuple[str | int, ...], Any] = PrivateAttr(default_factory=dict)
    """The values those references gave (as :func:`dump_json` writes them): a copy of
    the config in which a program replaced one (``model_copy``: egress's absolute
    directories) hands over the value it holds, not the file's reference."""

    @property
    def source(self) -> str:
        """Where the config came from (its file), for errors."""
        return self._source

    def region(self, name: str) -> RegionConfig:
        """The named region; references are checked at load, so this cannot miss."""
        return self.regions[name]

    def bucket(self, region: str) -> str:
        """The region's bucket; regions that egress, ingress or compaction use are checked
        to have one at load."""
        bucket = self.regions[region].bucket
        if bucket is None:
            raise ConfigError(self.source, [(key_path(("regions", region, "bucket")), "missing")])
        return bucket


@overload
def required(config: Config, section: Literal["egress"]) -> EgressConfig: ...
@overload
def required(config: Config, section: Literal["ingress"]) -> IngressConfig: ...
@overload
def required(config: Config, section: Literal["compaction"]) -> CompactionConfig: ...
@overload
def required(config: Config, section: Literal["relay"]) -> RelayConfig: ...
def required(
    config: Config, section: Literal["egress", "ingress", "compaction", "relay"]
) -> EgressConfig | IngressConfig | CompactionConfig | RelayConfig:
    """The config's ``[section]``, or a :class:`ConfigError` naming the file and the key.

    The one way to get a section a command cannot run without."""
    value: EgressConfig | IngressConfig | CompactionConfig | RelayConfig | None = getattr(
        config, section
    )
    if value is None:
        raise ConfigError(config.source, [(section, f"missing [{section}] section")])
    return value
