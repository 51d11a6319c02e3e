VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install demo test lint fmt typecheck bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch CPU build for the tester's CPU path; a pinned version keeps pip from pulling a CUDA build
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/acagpu up --emulator

test: $(STAMP)
	$(PY) -m pytest -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/startup.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
