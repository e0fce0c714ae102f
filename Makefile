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

.PHONY: setup demo test bench lint notebooks clean-db serve

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# CPU torch first, pinned: never let pip pull the CUDA wheels.
	$(PIP) install --quiet -c constraints.txt torch==2.13.0
	$(PIP) install --quiet -c constraints.txt -e '.[local,embedded,pdf,readers,ocr,server,mcp,dev,langgraph,tokens,pandas,ray,sync]'
	# Chromium for the browser tests (Debian's package), where this runs as root on Debian, as on CI
	if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && ! command -v chromium >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; fi
	# Tesseract for OCR of scanned PDF pages (the ocr extra's program), likewise; without it the OCR tests skip
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! command -v tesseract >/dev/null; then \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr) || \
		echo "tesseract-ocr not installed: the OCR tests will be skipped"; fi
	touch $(STAMP)

demo: setup
	$(PY) -m agentrag demo

serve: setup
	$(PY) -m agentrag serve --demo $(ARGS)

# each run its own temporary directory: two runs side by side on one machine (two checkouts) would
# otherwise share /tmp/pytest-of-$$USER and remove each other's files and its 'current' link
test: setup
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/agentrag-pytest-XXXXXX"); \
	$(PY) -m pytest -q tests notebooks --nbmake --basetemp="$$tmp"; rc=$$?; rm -rf "$$tmp"; exit $$rc

bench: setup
	$(PY) -m benchmarks $(ARGS)

lint: setup
	$(VENV)/bin/ruff check agentrag tests benchmarks
	$(VENV)/bin/ruff format --check agentrag tests benchmarks
	$(VENV)/bin/mypy

notebooks: setup
	$(PY) -m pytest -q --nbmake notebooks
