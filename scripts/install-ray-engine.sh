#!/bin/bash
# A venv of its own for tests that need Ray beside the CPU build of vLLM (a model across hosts): it reads
# .venv-vllm's packages through a .pth file (never modifying .venv-vllm, which stays shared and read-only)
# and adds ray==2.60.0. usage: scripts/install-ray-engine.sh [VENV] [VLLM_VENV]
set -euo pipefail
VENV=${1:-.venv-ray}
VLLM_VENV=${2:-.venv-vllm}
PY=$(readlink -f "$VLLM_VENV/bin/python")
test -x "$PY" || { echo "no $VLLM_VENV (make setup-vllm first)" >&2; exit 1; }
"$PY" -m venv --without-pip "$VENV" 2>/dev/null || "$(dirname "$PY")/python3" -m venv "$VENV"
"$VENV/bin/python" -m pip --version >/dev/null 2>&1 || "$VENV/bin/python" -m ensurepip >/dev/null
SP=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VSP=$("$VLLM_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(readlink -f "$VSP")" > "$SP/zz-vllm.pth"
"$VENV/bin/python" -m pip install -q "ray==2.60.0"
"$VENV/bin/ray" --version
touch "$VENV/.ray-setup-done"
