"""Harnesses no one here wrote, pointed at the gateway over sims, offline: lm-evaluation-harness's
`local-chat-completions` on a task defined in a local YAML over a local JSONL (its score equal to the
same task pointed at one replica), and Inspect AI's `openai-api` provider running an in-memory task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.gatewayserver import GatewayServer
from tests.integration.gateway_fixtures import SERVED, write_fleet
from tests.simserver import SimServer

OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1", "INSPECT_DISABLE_TELEMETRY": "1", "NO_PROXY": "127.0.0.1,localhost"}
# each harness run is a process that imports datasets/evaluate (lm-eval) or inspect_ai: minutes on a busy 2-core box
pytestmark = pytest.mark.timeout(1200)

QUESTIONS = [f"What is {a} plus {b}?" for a, b in ((2, 3), (7, 8), (10, 5), (4, 4), (9, 1), (6, 2))]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayServer, list[SimServer], Path]]:
    root = tmp_path_factory.mktemp("harness")
    sims = [SimServer(SERVED, args=["--latency-ms", "2"]) for _ in range(2)]
    try:
        for sim in sims:
            sim.start()
        topology = write_fleet(root, [s.port for s in sims])
        with GatewayServer(["--topology", str(topology)], cwd=root, env={"OPS_HOME": str(root / "ops")}) as gw:
            yield gw, sims, root
    finally:
        for sim in sims:
            sim.stop()


def sim_answers(sim: SimServer, max_tokens: int) -> list[str]:
    """What the sim answers each question when asked as lm-eval/Inspect ask (one user message, greedy)."""
    client = openai.OpenAI(base_url=f"{sim.base_url}/v1", api_key="none", max_retries=0)
    return [str(client.chat.completions.create(model=SERVED, messages=[{"role": "user", "content": q}],
                                               max_tokens=max_tokens, temperature=0).choices[0].message.content)
            for q in QUESTIONS]


def lm_eval_score(base_url: str, model: str, task_dir: Path, out: Path) -> float:
    args = [sys.executable, "-m", "lm_eval", "--model", "local-chat-completions", "--model_args",
            f"model={model},base_url={base_url}/v1/chat/completions,num_concurrent=4,max_retries=1,"
            "tokenized_requests=False,tokenizer_backend=None", "--tasks", "gw_local", "--include_path", str(task_dir),
            "--apply_chat_template", "--output_path", str(out)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=task_dir,
                          env={**os.environ, **OFFLINE}, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [result] = list(out.rglob("results_*.json"))
    return float(json.loads(result.read_text())["results"]["gw_local"]["exact_match,none"])


def test_lm_eval_local_chat_completions_scores_as_one_replica(fleet, tmp_path: Path) -> None:
    gw, sims, _ = fleet
    answers = sim_answers(sims[0], 16)
    rows = [{"question": q, "answer": a if i % 2 == 0 else "not what the model says"}
            for i, (q, a) in enumerate(zip(QUESTIONS, answers, strict=True))]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "gw_local.yaml").write_text(textwrap.dedent(f"""\
        task: gw_local
        dataset_path: json
        dataset_kwargs:
          data_files:
            test: {tmp_path / 'data.jsonl'}
        test_split: test
        output_type: generate_until
        doc_to_text: "{{{{question}}}}"
        doc_to_target: "{{{{answer}}}}"
        generation_kwargs:
          until: []
          max_gen_toks: 16
          do_sample: false
          temperature: 0
        metric_list:
          - metric: exact_match
            aggregation: mean
            higher_is_better: true
        """))
    via_gateway = lm_eval_score(gw.base_url, "solver", tmp_path, tmp_path / "out-gateway")
    one_replica = lm_eval_score(sims[1].base_url, SERVED, tmp_path, tmp_path / "out-direct")
    assert via_gateway == one_replica == 0.5


def test_inspect_openai_api_provider_runs_an_in_memory_task(fleet, tmp_path: Path) -> None:
    gw, sims, _ = fleet
    answers = sim_answers(sims[0], 32)
    targets = [a if i % 3 else "never said" for i, a in enumerate(answers)]
    script = tmp_path / "run_inspect.py"
    script.write_text(textwrap.dedent(f"""\
        import json, sys
        from inspect_ai import Task, eval
        from inspect_ai.dataset import MemoryDataset, Sample
        from inspect_ai.model import GenerateConfig
        from inspect_ai.scorer import exact
        from inspect_ai.solver import generate

        questions, targets = {QUESTIONS!r}, {targets!r}
        task = Task(dataset=MemoryDataset([Sample(input=q, target=t) for q, t in zip(questions, targets)]),
                    solver=generate(), scorer=exact(), config=GenerateConfig(max_tokens=32, temperature=0))
        [log] = eval(task, model="openai-api/gw/solver", log_dir=sys.argv[1], display="none", max_connections=4)
        metrics = log.results.scores[0].metrics
        print(json.dumps({{"status": log.status, "scorer": log.results.scores[0].name,
                          "metrics": {{k: m.value for k, m in metrics.items()}},
                          "outputs": [s.output.completion for s in log.samples]}}))
        """))
    env = {**os.environ, **OFFLINE, "GW_BASE_URL": f"{gw.base_url}/v1", "GW_API_KEY": "none"}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "logs")], capture_output=True, text=True,
                          timeout=600, env=env, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["status"] == "success"
    assert result["outputs"] == answers
    assert result["scorer"] == "exact"
    assert result["metrics"]["mean"] == pytest.approx(4 / 6)  # targets 0 and 3 are not what the model says
