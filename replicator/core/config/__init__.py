"""The deployment config: one TOML file, validated once at load into a frozen model.

Each process reads the section it needs (``[egress]``, ``[ingress]``, ``[compaction]``);
``[s3]`` and ``[regions.*]`` are shared. Loading is strict: unknown keys, wrong types,
dangling region references and unparseable durations or sizes are all reported at once,
each with the file and the key path, and the process never starts half-configured.

``${NAME}`` in a secret field is replaced by the environment variable ``NAME`` so that
secrets stay out of the file; so it is in ``sasl_username`` (each service its own user,
one file), and nowhere else: a reference in any other field is refused at load, naming
the key (:func:`reference_allowed`), since a secret expanded there would be shown in
clear (``config check``, logs, a client id sent to the broker). A variable that is not
set is an error at load, except in a secret field: there it is an error where the
secret is used (:class:`UnsetSecret`), so that each process needs only the secrets it
uses. Secret fields are :class:`pydantic.SecretStr` and never appear in reprs, logs or
error messages. Every value written with a reference is remembered as written:
processes without the file (Spark's) get the reference and resolve it themselves.

Each section's model is in a module named after the section, the way each connector of
MirrorMaker 2 has a config class of its own: :mod:`.s3`, :mod:`.regions` and
:mod:`.kafka` (a region's cluster and the raw librdkafka properties it may pass),
:mod:`.egress`, :mod:`.ingress`, :mod:`.relay`, :mod:`.compaction`, :mod:`.spark`,
:mod:`.filters`, :mod:`.restore`; the root model and :func:`required` in :mod:`.model`;
shared types and key paths in :mod:`._common`; ``${NAME}`` expansion in
:mod:`.secrets`, where references are allowed in :mod:`.references`; reading and
validating the file in :mod:`.loader`. Import from this package: every public name is
re-exported here (``__all__``).
"""

from __future__ import annotations

from replicator.core.config._common import (
    AS_DURATION,
    AS_SIZE,
    Duration,
    RegionName,
    Size,
    TopicName,
    key_path,
)
from replicator.core.config._common import _host as _host
from replicator.core.config._common import _regex as _regex
from replicator.core.config.compaction import (
    CompactionConfig,
    CompactionTopicConfig,
    Level,
)
from replicator.core.config.compaction import _cron as _cron
from replicator.core.config.egress import (
    EgressConfig,
    EgressTopicConfig,
    EgressTopicOverrides,
)
from replicator.core.config.filters import (
    BUILTIN_FILTERS_MODULE,
    FiltersConfig,
    FilterSpec,
)
from replicator.core.config.ingress import (
    TOPIC_PLACEHOLDER,
    IngressConfig,
    IngressSource,
)
from replicator.core.config.ingress import _destination_template as _destination_template
from replicator.core.config.kafka import (
    BOOLEAN_PROPERTIES,
    LIBRDKAFKA_ALIASES,
    NATIVE_CODE_PROPERTIES,
    RAW_SECRET_PROPERTIES,
    SECRET_WORDS,
    TYPED_PROPERTIES,
    WEAKENING_PROPERTIES,
    KafkaConfig,
    is_secret_property,
    librdkafka_bool,
    librdkafka_name,
)
from replicator.core.config.loader import load_config, parse_config, validation_problems
from replicator.core.config.model import Config, required
from replicator.core.config.references import (
    REFERENCE_FIELDS,
    REFERENCE_REFUSED,
    dump_json,
    reference_allowed,
    reference_texts,
    remember_references,
    secret_text,
)
from replicator.core.config.regions import RegionConfig
from replicator.core.config.relay import RelayConfig, RelayTopic
from replicator.core.config.restore import RESTORE_CHECKPOINT_TOPIC
from replicator.core.config.s3 import (
    MAX_PART_SIZE,
    MIN_PART_SIZE,
    MIN_SIGNING_KEY_CHARS,
    S3Config,
    StorageClass,
)
from replicator.core.config.secrets import (
    UnsetSecret,
    expand_env,
    expand_secret,
    has_env_reference,
    secret_paths,
)
from replicator.core.config.spark import SparkConfig

__all__ = [
    "AS_DURATION",
    "AS_SIZE",
    "BOOLEAN_PROPERTIES",
    "BUILTIN_FILTERS_MODULE",
    "LIBRDKAFKA_ALIASES",
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "MIN_SIGNING_KEY_CHARS",
    "NATIVE_CODE_PROPERTIES",
    "RAW_SECRET_PROPERTIES",
    "REFERENCE_FIELDS",
    "REFERENCE_REFUSED",
    "RESTORE_CHECKPOINT_TOPIC",
    "SECRET_WORDS",
    "TOPIC_PLACEHOLDER",
    "TYPED_PROPERTIES",
    "WEAKENING_PROPERTIES",
    "CompactionConfig",
    "CompactionTopicConfig",
    "Config",
    "Duration",
    "EgressConfig",
    "EgressTopicConfig",
    "EgressTopicOverrides",
    "FilterSpec",
    "FiltersConfig",
    "IngressConfig",
    "IngressSource",
    "KafkaConfig",
    "Level",
    "RegionConfig",
    "RegionName",
    "RelayConfig",
    "RelayTopic",
    "S3Config",
    "Size",
    "SparkConfig",
    "StorageClass",
    "TopicName",
    "UnsetSecret",
    "dump_json",
    "expand_env",
    "expand_secret",
    "has_env_reference",
    "is_secret_property",
    "key_path",
    "librdkafka_bool",
    "librdkafka_name",
    "load_config",
    "parse_config",
    "reference_allowed",
    "reference_texts",
    "remember_references",
    "required",
    "secret_paths",
    "secret_text",
    "validation_problems",
]
