#!/usr/bin/env bash
# The peers bench/bench_gateway.py measures the gateway against, in a venv of their own (never make test):
# vLLM's router (vllm-router: a Rust binary shipped in its wheel) and LiteLLM's proxy. Pinned versions
# that install here; both run offline (LiteLLM: LITELLM_LOCAL_MODEL_COST_MAP=True, no telemetry).
set -euo pipefail
VENV="${1:-bench/.venv-peers}"
PY="${PYTHON:-python3}"
if [ -f "$VENV/.peers-done" ]; then echo "$VENV: already built"; exit 0; fi
"$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-router==0.1.17" "litellm[proxy]==1.100.5"
touch "$VENV/.peers-done"
echo "$VENV: vllm-router $("$VENV/bin/python" -m pip show vllm-router | sed -n 's/^Version: //p'), litellm $("$VENV/bin/python" -m pip show litellm | sed -n 's/^Version: //p')"
