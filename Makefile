# The README's contract: `make demo` and `make test`
# work on a fresh machine with Python 3.11+, Java 17+ and Maven 3.8+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= config.example.toml

# The local stack's Apache Kafka broker (version pinned in infra/broker.py), fetched from
# Maven Central once into the checkout; tests never download it.
KAFKA_VERSION := $(shell sed -n 's/^KAFKA_VERSION = "\(.*\)"/\1/p' infra/broker.py)
KAFKA := .kafka/$(KAFKA_VERSION)

.PHONY: setup test unit lint demo chaos bench stack-up stack-down stack-status clean

setup: $(VENV)/.installed $(KAFKA)/.fetched

$(KAFKA)/.fetched: infra/kafka/pom.xml | $(VENV)/.installed
	@command -v mvn >/dev/null || { echo "Maven 3.8+ is required to fetch the Kafka broker (mvn not found on PATH)"; exit 1; }
	$(BIN)/python -m infra.broker fetch

# Reinstalls only when pyproject.toml changes, so a second `make setup` is instant.
$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is required")'
	@command -v java >/dev/null || { echo "Java 17+ is required for Spark (java not found on PATH)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

# Test files run in parallel, one per core (each worker starts its own local stack);
# a file's tests stay together, in order, on one worker.
test: setup
	$(BIN)/python -m pytest -n auto --dist worksteal --durations=25

unit: setup
	$(BIN)/python -m pytest -m 'not integration'

# checkov lives in its own environment: it pins older boto3 and packaging than the
# project's, and only lint needs it. It runs offline (--skip-download).
TOOLS := .tools
$(TOOLS)/.installed:
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet 'checkov>=3.2,<4'
	touch $@

lint: setup $(TOOLS)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/cfn-lint infra/aws/replicator.yaml
	$(TOOLS)/bin/checkov --skip-download --quiet --compact -f infra/aws/replicator.yaml
	$(BIN)/kubernetes-validate --strict --quiet infra/k8s/*.yaml
	$(BIN)/python -m infra.deploy_checks
	$(BIN)/python -m replicator.core.config_reference --check docs/configuration.md
	$(BIN)/python -m infra.doc_links

# The disaster-recovery drill on a throw-away local stack (free ports, own directory).
# SECURITY=sasl_ssl: brokers demand SASL_SSL (SCRAM-SHA-512) on every listener and enforce
# ACLs; each service runs as its own user with the ACLs docs/security.md lists.
SECURITY ?= plaintext
demo: setup
	$(BIN)/python -m infra.drill --security $(SECURITY)

# The pipeline under random faults for 5 minutes (CHAOS_SECONDS=… to change), then verified
# record by record; prints the faults injected and what was lost or duplicated.
CHAOS_SECONDS ?= 300
chaos: setup
	$(BIN)/python -m infra.chaos --seconds $(CHAOS_SECONDS)

# Speed and memory next to the raw clients, measured side by side in one run (~5 min).
bench: setup
	$(BIN)/python -m bench.run

stack-up: setup
	$(BIN)/replicator stack up --config $(CONFIG)

stack-down: setup
	$(BIN)/replicator stack down --config $(CONFIG)

stack-status: setup
	$(BIN)/replicator stack status --config $(CONFIG)

clean:
	rm -rf $(VENV) .kafka .replicator .pytest_cache .mypy_cache .ruff_cache *.egg-info
