# Two commands: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export RAY_USAGE_STATS_ENABLED := 0

.PHONY: setup demo test test-programs bench lint notebooks clean-db serve

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# CPU torch first, pinned: never let pip pull the CUDA wheels.
	$(PIP) install --quiet -c constraints.txt torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e '.[local,embedded,pdf,readers,ocr,server,mcp,dev,langgraph,tokens,pandas,ray,sync]'
	touch $(STAMP)

# The programs only the tests use, outside .venv: Chromium (the browser tests) and Tesseract (OCR of
# scanned PDF pages; without it the OCR tests skip). Installed from Debian's packages when this runs
# as root on Debian (as on CI); otherwise nothing is installed and the tests that need them skip.
# `make demo` / `make setup` never run this: they install nothing outside .venv.
# $(APT) waits up to 5 minutes for another apt or dpkg run to let go of its lock, instead of failing.
APT := apt-get -o DPkg::Lock::Timeout=300
test-programs:
	@if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v chromium >/dev/null; then \
		$(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq chromium; fi
	@if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v tesseract >/dev/null; then \
		($(APT) update -qq && DEBIAN_FRONTEND=noninteractive $(APT) install -y -qq tesseract-ocr) || \
		echo "tesseract-ocr not installed: the OCR tests will be skipped"; fi

demo: setup
	$(PY) -m agentrag demo

serve: setup
	$(PY) -m agentrag serve --demo $(ARGS)

# each run its own temporary directory: two runs side by side on one machine (two checkouts) would
# otherwise share /tmp/pytest-of-$$USER and remove each other's files and its 'current' link.
# TEST_WORKERS pytest-xdist processes, whole files each (--dist loadfile: a module's fixtures, servers
# and corpora are built once); each worker starts its own embedded PostgreSQL in its own data directory
# (tests/isolation.py) and its own basetemp under $$tmp. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
# The package's bytecode first: where PYTHONDONTWRITEBYTECODE is set, every CLI and server process the
# tests start would otherwise compile the package's modules from source (~0.3 s each).
test: setup test-programs
	@$(PY) -m compileall -q agentrag > /dev/null
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/agentrag-pytest-XXXXXX"); \
	$(PY) -m pytest -q tests notebooks --nbmake -n $(TEST_WORKERS) --dist loadfile --basetemp="$$tmp"; \
	rc=$$?; rm -rf "$$tmp"; exit $$rc

bench: setup
	$(PY) -m benchmarks $(ARGS)

lint: setup
	$(VENV)/bin/ruff check agentrag tests benchmarks
	$(VENV)/bin/ruff format --check agentrag tests benchmarks
	$(VENV)/bin/mypy

notebooks: setup
	$(PY) -m pytest -q --nbmake notebooks
