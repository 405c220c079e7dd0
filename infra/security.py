"""The local stack's secured mode: a CA, broker certificates and SCRAM users made for one
run, under the stack's own directory.

Why: a reviewer will not take librdkafka settings on trust; the secured stack runs every
broker listener (clients, inter-broker, controller) on SASL_SSL with SCRAM-SHA-512 and
enforces ACLs with nothing allowed by default, so the tests and ``make demo
SECURITY=sasl_ssl`` show the services working with only the ACLs ``docs/security.md``
lists.

What is made, once per state directory (kept across restarts, as the broker's data is):

- ``security/ca.pem`` (the CA clients trust) and ``ca.key``; ``broker.pem`` (the
  brokers' key and certificate, for ``localhost``, ``127.0.0.1`` and ``::1``), by the
  ``openssl`` command line: nothing is downloaded.
- ``security/users.json`` (mode 0600): a random password for the broker's own user
  (:data:`BROKER_USER`, the only super user) and for each service's user
  (:data:`SERVICE_USERS`). The SCRAM credentials are written into the cluster's metadata
  when its storage is formatted (``kafka-storage format --add-scram``).

Ordering: the material exists before any broker is formatted, and a broker formatted
with one ``users.json`` keeps working only with that file (it is never rewritten).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from infra.errors import StackError

SECURITY_PROTOCOL = "SASL_SSL"
SASL_MECHANISM = "SCRAM-SHA-512"
BROKER_USER = "broker"
"""The brokers' own principal (inter-broker and controller traffic), the only super user;
the drill and the tests use it as the cluster administrator (creating the workload's
topics, applying ACLs)."""
SERVICE_USERS: Mapping[str, str] = {
    "egress": "replicator-egress",
    "ingress": "replicator-ingress",
    "relay": "replicator-relay",
    "restore": "replicator-restore",
    "failover": "replicator-failover",
    "compaction": "replicator-compaction",
}
"""Service -> the SCRAM user it authenticates as (``failover`` also runs ``status``)."""
USERNAME_ENV = "REPLICATOR_KAFKA_USERNAME"
PASSWORD_ENV = "REPLICATOR_KAFKA_PASSWORD"
"""The variables a secured config's ``sasl_username``/``sasl_password`` reference: each
service process gets its own user's values (as a per-workload Secret would)."""
CERT_DAYS = 30


@dataclass(frozen=True)
class SecurityMaterial:
    """Where one stack's CA, broker key and users live."""

    directory: Path

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def broker_pem(self) -> Path:
        """The brokers' private key followed by their certificate (Kafka's PEM keystore)."""
        return self.directory / "broker.pem"

    @property
    def users_file(self) -> Path:
        return self.directory / "users.json"

    def passwords(self) -> dict[str, str]:
        """SCRAM user -> password; a clear error if :func:`make_material` has not run."""
        try:
            data = json.loads(self.users_file.read_text())
        except (OSError, ValueError) as exc:
            raise StackError(f"the secured stack's users are not readable: {exc}") from None
        return {str(name): str(password) for name, password in data.items()}

    def password(self, user: str) -> str:
        passwords = self.passwords()
        if user not in passwords:
            raise StackError(f"no SCRAM user {user!r} in {self.users_file}")
        return passwords[user]

    def service_env(self, service: str) -> dict[str, str]:
        """The environment a service process gets: its own user's name and password."""
        user = SERVICE_USERS[service]
        return {USERNAME_ENV: user, PASSWORD_ENV: self.password(user)}

    def client_settings(self, user: str = BROKER_USER) -> dict[str, str]:
        """librdkafka settings for a client of the secured stack authenticating as ``user``
        (the broker's own user by default: the administrator)."""
        return {
            "security.protocol": SECURITY_PROTOCOL,
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.username": user,
            "sasl.password": self.password(user),
            "ssl.ca.location": str(self.ca_file),
        }


def make_material(directory: Path) -> SecurityMaterial:
    """Make the CA, the broker certificate and the users in ``directory`` unless they are
    there already (idempotent: a restarted stack keeps them)."""
    material = SecurityMaterial(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    if not (material.ca_file.exists() and material.broker_pem.exists()):
        _make_certificates(material)
    if not material.users_file.exists():
        users = [BROKER_USER, *SERVICE_USERS.values()]
        passwords = {user: secrets.token_urlsafe(24) for user in users}
        descriptor = os.open(material.users_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump(passwords, out, indent=2)
    return material


def make_ca(directory: Path, name: str = "replicator local CA") -> Path:
    """A self-signed CA certificate (``ca.pem``) and its key (``ca.key``) in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        str(directory / "ca.key"),
        "-out",
        str(directory / "ca.pem"),
        "-days",
        str(CERT_DAYS),
        "-subj",
        f"/CN={name}",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    return directory / "ca.pem"


def _make_certificates(material: SecurityMaterial) -> None:
    directory = material.directory
    make_ca(directory)
    key, request, certificate = (directory / f"broker.{ext}" for ext in ("key", "csr", "crt"))
    extensions = directory / "broker.ext"
    extensions.write_text(
        "subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1\n"
        "extendedKeyUsage = serverAuth, clientAuth\n"
    )
    _openssl(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(request),
        "-subj",
        "/CN=localhost",
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        str(request),
        "-CA",
        str(material.ca_file),
        "-CAkey",
        str(material.ca_key),
        "-CAcreateserial",
        "-out",
        str(certificate),
        "-days",
        str(CERT_DAYS),
        "-extfile",
        str(extensions),
    )
    pem = key.read_text() + certificate.read_text()
    descriptor = os.open(material.broker_pem, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(pem)
    for leftover in (key, request, certificate, extensions):
        leftover.unlink(missing_ok=True)


def _openssl(*args: str) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise StackError("the secured local stack needs the openssl command (not found)")
    done = subprocess.run([openssl, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StackError(f"openssl {args[0]} failed:\n{(done.stdout + done.stderr)[-2000:]}")


def jaas(user: str, password: str) -> str:
    """A SCRAM login for the broker's ``server.properties`` (inter-broker and controller
    connections authenticate as ``user``)."""
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";'
    )


def broker_settings(
    material: SecurityMaterial, host: str, port: int, controller_port: int
) -> dict[str, str]:
    """The ``server.properties`` of a secured broker: every listener SASL_SSL with
    SCRAM-SHA-512, ACLs enforced with nothing allowed unless an ACL says so, and the
    broker's own user the only super user."""
    login = jaas(BROKER_USER, material.password(BROKER_USER))
    return {
        "listeners": f"SASL_SSL://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"SASL_SSL://{host}:{port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SASL_MECHANISM,
        "sasl.mechanism.controller.protocol": SASL_MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": login,
        "listener.name.controller.scram-sha-512.sasl.jaas.config": login,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.broker_pem),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_file),
        "super.users": f"User:{BROKER_USER}",
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_arguments(material: SecurityMaterial) -> list[str]:
    """``kafka-storage format`` arguments that create every user's SCRAM credential."""
    arguments = []
    for user, password in material.passwords().items():
        arguments += ["--add-scram", f"{SASL_MECHANISM}=[name={user},password={password}]"]
    return arguments
