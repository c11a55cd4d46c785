# aiokafka_lite developer tasks. `make install test` on a fresh machine; `make demo` to see it work.
# Point PY at an existing interpreter to skip the local venv: `make test PY=/path/to/venv/bin/python`.

# first Python >= 3.10 on PATH, used only to create the venv
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11 python3.10; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; \
	then echo $$p; break; fi; done)
VENV ?= .venv
PY ?= $(VENV)/bin/python
PYTEST_ARGS ?=
KIND ?= tansu

.PHONY: install native jars test pythons lint bench soak broker demo clean protocol dist wheel-check docs \
	docs-serve release-check

install:
	@if [ ! -x "$(PY)" ]; then \
		if [ -z "$(PYTHON)" ]; then echo "error: Python >= 3.10 not found on PATH" >&2; exit 1; fi; \
		echo "creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"; \
		$(PYTHON) -m venv $(VENV); \
	fi
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,broker,spark,cli]'
	@$(MAKE) --no-print-directory native PY=$(PY)
	@# SASL GSSAPI's gssapi package builds from source against libkrb5-dev (krb5-config);
	@# without it the Kerberos tests skip with that reason (.ci/run apt-installs it)
	@if command -v krb5-config >/dev/null 2>&1; then \
		$(PY) -m pip install --quiet -e '.[gssapi]'; \
	else echo "krb5-config not found (libkrb5-dev): skipping the gssapi extra"; fi
	@$(MAKE) --no-print-directory jars PY=$(PY)

# the optional compiled record decoder (native/: aiokafka_lite_native, a C extension built by
# setuptools from PyPI); without a C compiler the pure-Python path is used, with this message
native:
	@if command -v "$${CC:-cc}" >/dev/null 2>&1 && $(PY) -m pip install --quiet ./native; then \
		echo "aiokafka_lite_native built (AIOKAFKA_LITE_NO_EXTENSIONS=1 turns it off)"; \
	else echo "warning: aiokafka_lite_native not built (no C compiler or the build failed): the pure-Python record codec is used" >&2; fi

# Apache Kafka's broker jars (4.x and 3.9) and the Java-client test oracle, through Maven.
# Skipped with a message where Java >= 17 or Maven is missing (the apache tests then skip too).
jars:
	$(PY) -m aiokafka_lite.launchers.apache fetch
	$(PY) -m tests.java_oracle build

# Tests run in parallel workers, in groups of tests that need the same broker (conftest's xdist
# groups, handed out longest first), so each worker starts only its brokers; `make test XDIST=`
# runs them in one process.
XDIST ?= -n 4 --dist loadgroup --no-loadscope-reorder
# compileall first: the suite starts a few hundred Python processes (the differential runs, the
# CLI, the docs examples, Spark's Python workers, the tests.spark_drivers scripts), and where
# PYTHONDONTWRITEBYTECODE is set (it is on these machines) each one compiled the package again
# (0.6 s instead of 0.3 s an import); tests/ whole: the helpers the workers and scripts import
test:
	$(PY) -m compileall -q -j0 aiokafka_lite tests docs/examples >/dev/null
	$(PY) -m pytest -q tests/ $(XDIST) $(PYTEST_ARGS)

# the broker-free tests on each Python the package claims, one .venv-pyX.Y each (CI: 3.10, 3.12,
# 3.13 beside the full suite on the default Python); a Python missing here is reported NOT TESTED
PYTHONS ?= 3.10 3.11 3.12 3.13
pythons:
	.ci/pythons $(PYTHONS)

# the import contracts (DESIGN.md's layer table) are [tool.importlinter] in pyproject.toml;
# .ci/structure_check.py: modules of at most 600 lines, request_timeout_ms read only through Timeouts
LINT_IMPORTS ?= $(dir $(PY))lint-imports
lint:
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy aiokafka_lite
	$(LINT_IMPORTS) --no-cache
	$(PY) .ci/structure_check.py

# a release a user can install: wheel + sdist in dist/ (twine check --strict); `wheel-check`
# also installs the wheel into clean venvs outside the repository and uses it there (no extras:
# the command, py.typed, mypy --strict on a user file; [broker]: a round trip; [spark,broker]:
# a local Spark session reads it back)
dist:
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(PY) -m twine check --strict dist/*

wheel-check:
	.ci/wheel-check $(PY)

# the documentation site (mkdocs.yml, docs/): --strict makes every warning an error (a broken
# link, anchor, snippet include or API cross-reference fails); the site lands in site/.
# The guides' code (docs/examples/) runs in tests/test_docs_examples.py, part of `make test`
MKDOCS ?= $(dir $(PY))mkdocs
docs:
	NO_MKDOCS_2_WARNING=1 $(MKDOCS) build --strict --site-dir site

docs-serve:
	NO_MKDOCS_2_WARNING=1 $(MKDOCS) serve

# everything a release needs, locally: wheel + sdist (twine check), the wheel used from clean
# venvs, the documentation site
release-check: dist wheel-check docs

bench:
	$(PY) -m benchmarks

# chaos soaks on a 3-node Apache Kafka (tests/soak.py; minutes each, not part of `make test`):
# random kill -9 / pause / stop of nodes under an idempotent flood, each group protocol, and
# consume-transform-produce transactions; SOAK_SECONDS of faults per run
SOAK_SECONDS ?= 150
soak:
	for p in classic consumer share; do \
		$(PY) -m tests.soak group --protocol $$p --seconds $(SOAK_SECONDS) || exit 1; done
	for p in classic consumer; do \
		$(PY) -m tests.soak eos --protocol $$p --seconds $(SOAK_SECONDS) || exit 1; done

# regenerate aiokafka_lite/protocol/_schemas.py: the long-lived APIs from ../shared's definitions,
# the Kafka 4 group APIs (KIP-848, KIP-932) from the kafka-clients 4.4 jar that `make jars` resolves
KAFKA_CLIENTS_JAR ?= $(HOME)/.m2/repository/org/apache/kafka/kafka-clients/4.4.0/kafka-clients-4.4.0.jar
protocol:
	rm -rf build/kafka-messages && mkdir -p build/kafka-messages
	cd build/kafka-messages && unzip -q $(KAFKA_CLIENTS_JAR) 'common/message/*.json'
	$(PY) -m aiokafka_lite.protocol._generate ../shared/kafka-protocol/message build/kafka-messages/common/message

# `make broker KIND=apache` (or tansu, noida): a throw-away broker in the foreground
broker:
	$(PY) -m aiokafka_lite broker --kind $(KIND)

demo:
	$(PY) -m aiokafka_lite demo

clean:
	rm -rf $(VENV) .venv-py* build dist site *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -not -path './.git/*' -exec rm -rf {} +
