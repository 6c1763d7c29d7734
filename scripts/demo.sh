#!/usr/bin/env bash
# `make demo`: the whole flow on this machine with simulated engines and a CPU retrieval index.
#   ops up topologies/local.yaml (the first one builds the retrieval index from the bundled corpus)
#   -> ops health -> ops eval chat -> eval-status
#   -> ops eval hle (then --resume) -> ops eval healthbench -> eval-status
#   -> ops lora load -> ops eval gsm8k / mmlu (base and adapter) -> ops lora unload -> ops down
# State goes where `ops` keeps it by default (.ops/local), the run to runs/chat-local; inputs are
# generated under demo/. `ops down` runs even when a step fails. Run it again: the eval resumes.
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=(.venv/bin/ops)
DEMO=demo
mkdir -p "$DEMO"

.venv/bin/python - "$DEMO" <<'PY'
import json, pathlib, sys
demo = pathlib.Path(sys.argv[1])
topics = ["tensor parallelism", "KV cache", "speculative decoding", "FAISS inner product search",
          "data parallel replicas", "tool-call parsers", "open-file limits", "micro-batching"]
with open(demo / "questions.jsonl", "w") as f:
    for i in range(200):
        f.write(json.dumps({"id": f"q{i:03d}", "prompt": f"In one word, what limits {topics[i % 8]}? ({i})"}) + "\n")
PY

"${OPS[@]}" plan topologies/local.yaml
trap '"${OPS[@]}" down local || true' EXIT
"${OPS[@]}" up topologies/local.yaml
"${OPS[@]}" health
"${OPS[@]}" eval chat --dataset "$DEMO/questions.jsonl" --model answer --topology local --resume --concurrency 64
"${OPS[@]}" eval-status runs/chat-local

# hle: the orchestrator agent loop (search, enhance_reasoning in the sandbox, answer, judge) over the
# sims and the CPU index, on the bundled synthetic HLE-shaped questions; then --resume, which finds
# nothing left to run and shows the same accuracy from the run dir. `make demo` installs no system
# package: where bubblewrap is missing, the code the simulated experts write runs with the sandbox's
# limits alone (--exec-unsafe; `make test` installs bubblewrap when run as root).
SANDBOX=()
if ! command -v bwrap >/dev/null 2>&1; then
  echo "note: bubblewrap is not installed; the demo runs the simulated experts' code with --exec-unsafe"
  SANDBOX=(--exec-unsafe)
fi
"${OPS[@]}" eval hle --topology local --resume --concurrency 64 "${SANDBOX[@]}"
"${OPS[@]}" eval hle --topology local --resume "${SANDBOX[@]}"

# healthbench: the bundled synthetic set (64 examples); the candidate role answers each conversation,
# then every rubric item is one call to the judge role; scores.json and a per-tag table at the end
"${OPS[@]}" eval healthbench --topology local --resume --concurrency 64
"${OPS[@]}" eval-status runs/healthbench-local

# After training: a LoRA adapter loaded into the running `answer` replicas, then gsm8k and mmlu
# (the bundled synthetic sets) for the base model and the adapter side by side, then unloaded.
.venv/bin/python - "$DEMO/ft" <<'PY'
import json, pathlib, struct, sys
out = pathlib.Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
(out / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "lora_alpha": 16,
                                                     "target_modules": ["q_proj", "v_proj"]}))
header = json.dumps({"base_model.model.layers.0.self_attn.q_proj.lora_A.weight":
                     {"dtype": "F32", "shape": [1, 1], "data_offsets": [0, 4]}}).encode()
(out / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
PY
"${OPS[@]}" lora load ft "$DEMO/ft" --model answer --topology local
"${OPS[@]}" eval gsm8k --model answer --model ft --topology local --resume
"${OPS[@]}" eval mmlu --model answer --model ft --topology local --resume
"${OPS[@]}" lora unload ft --topology local
