#!/usr/bin/env bash
# `make demo`: the whole flow on this machine with simulated engines and a CPU retrieval index.
#   index build -> ops up topologies/local.yaml -> ops health -> ops eval chat -> eval-status -> ops down
# Everything lives under demo/ (OPS_HOME=demo/.ops, runs in demo/runs); `ops down` runs even on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
OPS=(.venv/bin/ops)
DEMO=demo
export OPS_HOME="$PWD/$DEMO/.ops"
mkdir -p "$DEMO"

.venv/bin/python - "$DEMO" <<'PY'
import json, pathlib, sys
demo = pathlib.Path(sys.argv[1])
topics = ["tensor parallelism", "KV cache", "speculative decoding", "FAISS inner product search",
          "data parallel replicas", "tool-call parsers", "open-file limits", "micro-batching"]
with open(demo / "corpus.jsonl", "w") as f:
    for i, t in enumerate(topics * 25):
        f.write(json.dumps({"id": f"doc{i}", "content": f"Note {i} about {t}: how {t} behaves under load."}) + "\n")
with open(demo / "questions.jsonl", "w") as f:
    for i in range(200):
        f.write(json.dumps({"id": f"q{i:03d}", "prompt": f"In one word, what limits {topics[i % 8]}? ({i})"}) + "\n")
PY

# The retrieval service of local.yaml reads its index from .ops/local/index (relative to this dir).
sed "s#index_dir: .ops/local/index#index_dir: $OPS_HOME/local/index#" topologies/local.yaml > "$DEMO/local.yaml"
if [ ! -f "$OPS_HOME/local/index/eval.index" ]; then
  "${OPS[@]}" index build "$DEMO/corpus.jsonl" --out "$OPS_HOME/local/index"
fi

trap '"${OPS[@]}" down local || true' EXIT
"${OPS[@]}" up "$DEMO/local.yaml" --replace
"${OPS[@]}" health
"${OPS[@]}" eval chat --dataset "$DEMO/questions.jsonl" --model answer --topology local \
  --run-dir "$DEMO/runs/chat-local" --resume --concurrency 64
"${OPS[@]}" eval-status "$DEMO/runs/chat-local"
