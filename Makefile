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
# The benchmark's peers (MirrorMaker 2, the compiled-client limit): bench/peers.py.
PEERS := .bench-peers/$(KAFKA_VERSION)

.PHONY: setup test unit lint demo failback-drill chaos fuzz bench bench-profile stack-up stack-down stack-status clean

# The Spark driver's class archive (JVM class-data sharing) is recorded once per install
# into the environment cache: Spark jobs start in about half the time; the local brokers'
# archive beside the fetched release (infra/broker_archive.py). Without them everything
# runs as before, so a machine where they cannot be made still sets up.
setup: $(VENV)/.installed $(KAFKA)/.fetched
	@$(BIN)/python -m replicator.core.kafka.arrow_reader_build
	@$(BIN)/replicator spark-archive || echo "Spark jobs will start without a class archive (above: why)"
	@$(BIN)/python -m infra.broker archive || echo "Kafka brokers will start without a class archive (above: why)"

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

# Tests run in parallel, one worker more than the cores unless TEST_WORKERS says otherwise
# (each worker starts its own local stack): with one a core, a fifth of the CPU sat idle
# while tests waited on services, and a third worker on 2 cores took a fresh clone's suite
# from 29 min 40 s to 23 min 13 s, the same tests passing (17 min 43 s for 1,408 tests
# once the Spark workers and services imported less at start). An idle worker takes tests not
# yet started from a busy one (work stealing), the modules of the longest tests first
# (tests/conftest.py).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal --durations=25

unit: setup
	$(BIN)/python -m pytest -m 'not integration'

# checkov lives in its own environment: it pins older boto3 and packaging than the
# project's, and only lint needs it. It runs offline (--skip-download).
TOOLS := .tools
$(TOOLS)/.installed:
	test -x $(TOOLS)/bin/python || $(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/python -m pip install --quiet 'checkov>=3.2,<4'
	touch $@

# Deliberate in the example manifests: a tag, not a digest, and the default pull policy
# (pin the digest of your own build); no CPU limits (throttling stalls transactions and
# probes; requests size the pods); secrets as environment variables (the config's
# ${NAME} references are resolved from the environment, each pod gets only its own).
K8S_CHECKOV_SKIPS := CKV_K8S_43,CKV_K8S_15,CKV_K8S_11,CKV_K8S_35

lint: setup $(TOOLS)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/cfn-lint infra/aws/replicator.yaml
	$(TOOLS)/bin/checkov --skip-download --quiet --compact -f infra/aws/replicator.yaml
	$(BIN)/kubernetes-validate --strict --quiet infra/k8s/*.yaml
	$(TOOLS)/bin/checkov --skip-download --quiet --compact -d infra/k8s --framework kubernetes \
	  --skip-check $(K8S_CHECKOV_SKIPS)
	$(BIN)/python -m infra.deploy_checks
	$(BIN)/python -m replicator.core.config_reference --check docs/configuration.md
	$(BIN)/python -m infra.doc_links

# The disaster-recovery drill on a throw-away local stack (free ports, own directory).
# SECURITY=sasl_ssl: brokers demand SASL_SSL (SCRAM-SHA-512) on every listener and enforce
# ACLs; each service runs as its own user with the ACLs docs/security.md lists.
SECURITY ?= plaintext
demo: setup
	$(BIN)/python -m infra.drill --security $(SECURITY)

# The failback drill on a throw-away local stack: the source region killed mid-stream,
# failover, writes in the destination, the source back, `replicator failback --apply`;
# prints the divergent tail's table and ends PASSED or FAILED.
failback-drill: setup
	$(BIN)/python -m infra.failback_drill

# The pipeline under random faults for 5 minutes (CHAOS_SECONDS=… to change), then verified
# record by record; prints the faults injected and what was lost or duplicated.
CHAOS_SECONDS ?= 300
chaos: setup
	$(BIN)/python -m infra.chaos --seconds $(CHAOS_SECONDS)

# The archive path on generated workloads and configs (tests/fuzz): FUZZ_EXAMPLES examples
# with fresh seeds (about 15 s each on 2 cores: 120 is half an hour), each through egress, ingress
# and restore and compared offset by offset with the source. A failure is shrunk and
# printed as a workload to paste into tests/fuzz/test_found_cases.py.
FUZZ_EXAMPLES ?= 120
fuzz: setup
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest tests/fuzz/test_archive_path.py \
	  -q -p no:cacheprovider -o log_level=WARNING --hypothesis-show-statistics

# Speed and memory next to the raw clients, measured side by side: each figure REPEAT
# times (min / median / max, targets judged on the median), then the latency benchmarks
# once more under a CPU hog on one core (BENCH_ARGS=--no-hog leaves that pass out).
REPEAT ?= 3
BENCH_ARGS ?=
bench: setup $(PEERS)/.ready
	$(BIN)/python -m bench.run --repeat $(REPEAT) $(BENCH_ARGS)

# The benchmark's peers (bench/peers.py): MirrorMaker 2 at the broker's version, fetched
# from Maven Central (bench/peers/pom.xml), and the compiled-client limit, compiled with
# javac against the broker's kafka-clients; into .bench-peers/, never into .kafka/.
$(PEERS)/.ready: bench/peers/pom.xml bench/java/CompiledLimit.java | $(VENV)/.installed $(KAFKA)/.fetched
	@command -v mvn >/dev/null || { echo "Maven 3.8+ is required to fetch MirrorMaker 2 (mvn not found on PATH)"; exit 1; }
	@command -v javac >/dev/null || { echo "A JDK 17+ is required to compile the client limit (javac not found on PATH)"; exit 1; }
	$(BIN)/python -m bench.peers fetch
	touch $@

# Where a stage's time goes: py-spy samples of STAGE's processes during its product phase
# (one run, no hog) into bench/results/profiles/STAGE.txt (collapsed stacks) and
# STAGE-summary.txt; the run's figures go beside them, not into latest.json.
# STAGE = egress | ingress | restore | compaction | relay | relay_latency | latency
STAGE ?= ingress
bench-profile: setup
	$(BIN)/python -m bench.run --only $(STAGE) --profile $(STAGE) --repeat 1 --no-hog $(BENCH_ARGS)

stack-up: setup
	$(BIN)/replicator stack up --config $(CONFIG)

stack-down: setup
	$(BIN)/replicator stack down --config $(CONFIG)

stack-status: setup
	$(BIN)/replicator stack status --config $(CONFIG)

clean:
	rm -rf $(VENV) .kafka .bench-peers .replicator .pytest_cache .mypy_cache .ruff_cache *.egg-info
