"""How to reach one region's Kafka cluster (``[regions.NAME.kafka]``), and which raw
librdkafka properties its ``config`` table may pass through.

The typed fields own the connection's security; a raw property is refused when it holds
a secret (it would be shown in clear wherever the config is), sets what a typed field
owns (it would silently override the validated value), or loads native code or runs a
command. librdkafka's aliases are resolved first, so an alias cannot slip past a
refusal; settings that turn off certificate checks are warned about.
"""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from replicator.core.config._common import _Model

log = logging.getLogger(__name__)


RAW_SECRET_PROPERTIES = frozenset(
    {
        # librdkafka's sensitive properties (_RK_SENSITIVE in rdkafka_conf.c, which its
        # CONFIGURATION.md and debug output redact):
        "sasl.password",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "sasl.oauthbearer.assertion.private.key.pem",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl_key",
        "ssl.keystore.password",
        # Java's, which holds a password wherever it is written:
        "sasl.jaas.config",
    }
)
SECRET_WORDS = ("password", "secret", "passphrase", "private.key", "credential")
"""Words that mark a property as a secret whatever else its name says (names compared
in lower case, aliases resolved)."""


def is_secret_property(name: str) -> bool:
    """Whether the raw librdkafka property ``name`` holds a secret: one of
    :data:`RAW_SECRET_PROPERTIES`, a name with one of :data:`SECRET_WORDS`, or inline
    PEM (``*.pem``, ``ssl_*``) other than a certificate the typed fields own. Pure."""
    lowered = librdkafka_name(name)
    if lowered in RAW_SECRET_PROPERTIES or any(w in lowered for w in SECRET_WORDS):
        return True
    inline = lowered.endswith(".pem") or lowered.startswith("ssl_")
    return inline and lowered not in TYPED_PROPERTIES


LIBRDKAFKA_ALIASES = {
    "bootstrap.servers": "metadata.broker.list",
    "sasl.mechanism": "sasl.mechanisms",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
    "linger.ms": "queue.buffering.max.ms",
    "retries": "message.send.max.retries",
    "compression.type": "compression.codec",
    "acks": "request.required.acks",
    "delivery.timeout.ms": "message.timeout.ms",
    "enable.auto.commit": "auto.commit.enable",
}
"""Every alias librdkafka knows (its ``_RK_C_ALIAS`` properties) and the property it
sets: two names for one setting, of which the one set last wins. Raw names are compared
after this mapping, so an alias cannot slip past a refusal."""
TYPED_PROPERTIES = {
    "metadata.broker.list": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "ssl.ca.location": "ssl_ca_location",
    "ssl.ca.pem": "ssl_ca_location",
    "ssl_ca": "ssl_ca_location",
    "ssl.ca.certificate.stores": "ssl_ca_location",
    "ssl.certificate.location": "ssl_certificate_location",
    "ssl.certificate.pem": "ssl_certificate_location",
    "ssl_certificate": "ssl_certificate_location",
    "ssl.keystore.location": "ssl_certificate_location",
    "ssl.key.location": "ssl_key_location",
}
"""Raw properties (canonical names) that set what a typed field owns, or another source
of the same trust (a CA or client certificate given inline or from a keystore)."""
NATIVE_CODE_PROPERTIES = {
    "plugin.library.paths": "loads native code (librdkafka plugins) into the process",
    "ssl.engine.location": "loads native code (an OpenSSL engine) into the process",
    "ssl.providers": "loads native code (OpenSSL providers) into the process",
    "sasl.kerberos.kinit.cmd": "runs a command (GSSAPI is not a supported mechanism)",
}
"""Raw properties refused outright: what they load or run is code, not a setting."""
BOOLEAN_PROPERTIES = frozenset({"enable.ssl.certificate.verification"})
WEAKENING_PROPERTIES = {
    "enable.ssl.certificate.verification": False,
    "ssl.endpoint.identification.algorithm": "none",
}
"""Settings (canonical name: the value, a boolean as librdkafka reads it, or text
compared without case as librdkafka does) that turn off checks of the broker's
certificate."""


def librdkafka_name(name: str) -> str:
    """The property librdkafka sets for ``name`` (aliases resolved; compared in lower
    case, which refuses more than librdkafka's exact match, never less). Pure."""
    lowered = name.lower()
    return LIBRDKAFKA_ALIASES.get(lowered, lowered)


def librdkafka_bool(value: str | int | float | bool) -> bool | None:
    """A boolean property's value as librdkafka reads it (None: librdkafka would refuse
    it). confluent-kafka hands librdkafka ``str(value)``: ``False`` is "False". Pure."""
    text = str(value)
    if text.lower() in ("true", "t") or text == "1":
        return True
    if text.lower() in ("false", "f") or text == "0":
        return False
    return None


def _weakens_certificate_checks(name: str, value: str | int | float | bool) -> bool:
    expected = WEAKENING_PROPERTIES.get(name)
    if isinstance(expected, bool):
        return librdkafka_bool(value) is expected
    return expected is not None and str(value).lower() == expected


class KafkaConfig(_Model):
    """How to reach one region's Kafka cluster; every client of that region uses it."""

    bootstrap_servers: str = Field(min_length=1)
    """Brokers to connect to first, ``host:port`` separated by commas."""
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """How clients talk to the brokers: plain, TLS, SASL, or SASL over TLS."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    """The SASL mechanism with ``SASL_*`` protocols (SCRAM-SHA-512 recommended)."""
    sasl_username: str | None = None
    """The SASL user this service authenticates as."""
    sasl_password: SecretStr | None = None
    """The SASL password: write it as a ``${NAME}`` reference to an environment variable."""
    ssl_ca_location: str | None = None
    """CA certificate file (PEM) that the brokers' certificates are checked against."""
    ssl_certificate_location: str | None = None
    """Client certificate file (PEM), for brokers that authenticate clients by TLS."""
    ssl_key_location: str | None = None
    """Client private key file (PEM) of ``ssl_certificate_location``."""
    ssl_key_password: SecretStr | None = None
    """Password of ``ssl_key_location``: a ``${NAME}`` reference."""
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Raw librdkafka properties, passed through after the fields above. Secrets and the
    settings the typed fields own are refused here (see ``_check_raw_config``)."""

    @field_validator("config")
    @classmethod
    def _check_raw_config(
        cls, config: dict[str, str | int | float | bool]
    ) -> dict[str, str | int | float | bool]:
        for name, value in config.items():
            lowered = librdkafka_name(name)
            if is_secret_property(name):
                raise ValueError(
                    f"{name} holds a secret: it would be shown in clear wherever the config "
                    "is; use the typed field (sasl_password, ssl_key_password) with a "
                    "${ENV} reference"
                )
            if lowered in TYPED_PROPERTIES:
                alias = f" (librdkafka: an alias of {lowered})" if lowered != name.lower() else ""
                raise ValueError(
                    f"{name}{alias} is set by the typed field {TYPED_PROPERTIES[lowered]}; "
                    "set it there (a raw value would silently override the validated one)"
                )
            if lowered in NATIVE_CODE_PROPERTIES:
                raise ValueError(f"{name} {NATIVE_CODE_PROPERTIES[lowered]}: refused in the config")
            if lowered in BOOLEAN_PROPERTIES and librdkafka_bool(value) is None:
                raise ValueError(
                    f"{name} = {value!r} is not a boolean librdkafka reads "
                    "(true, false, t, f, 1 or 0)"
                )
            if _weakens_certificate_checks(lowered, value):
                log.warning(
                    "kafka.config %s = %s turns off broker certificate checks: anyone on "
                    "the path can impersonate the broker",
                    name,
                    value,
                )
        return config

    @model_validator(mode="after")
    def _check_security(self) -> KafkaConfig:
        sasl = self.security_protocol.startswith("SASL_")
        if sasl and self.sasl_mechanism is None:
            raise ValueError(f"security_protocol {self.security_protocol} needs sasl_mechanism")
        if sasl and (self.sasl_username is None or self.sasl_password is None):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs sasl_username and sasl_password"
            )
        if self.security_protocol == "SASL_PLAINTEXT" and self.sasl_mechanism == "PLAIN":
            log.warning(
                "SASL PLAIN over SASL_PLAINTEXT sends the password in clear to %s; use SASL_SSL",
                self.bootstrap_servers,
            )
        if not sasl and self.sasl_mechanism is not None:
            raise ValueError(
                f"sasl_mechanism is set but security_protocol is {self.security_protocol}; "
                "use SASL_PLAINTEXT or SASL_SSL"
            )
        return self
