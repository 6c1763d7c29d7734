# orchestra-ops: `make test` is the only command a fresh machine needs.
VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
STAMP   := $(VENV)/.setup-done
PYTEST_ARGS ?=

.PHONY: setup test lint bench demo clean

setup: $(STAMP)

$(STAMP): pyproject.toml scripts/install-system-deps.sh
	bash scripts/install-system-deps.sh
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# the CPU build of torch first, so the retrieval extra does not pull CUDA wheels
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev,retrieval]'
	touch $(STAMP)

test: setup
	$(PY) -m pytest -q -ra $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy orchestra_ops services evals

bench: setup
	$(PY) -m bench

demo: setup
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
