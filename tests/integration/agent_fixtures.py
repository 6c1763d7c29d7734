"""Helpers of the hle/frames tests: a fleet of sims described by a real topology file, datasets,
and the scores the sim's rules predict, computed from services/simllm/agent_rules.py and the
reference's formulas alone (never from the suite's code)."""
from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from orchestra_ops.services.simllm import agent_rules, replies

from tests.simserver import SimServer

BUNDLED = Path(__file__).resolve().parents[2] / "evals" / "agent" / "data"


def write_fleet(home: Path, models: Mapping[str, tuple[SimServer, Mapping[str, Any]]], roles: Mapping[str, str], *,
                services: Mapping[str, str] | None = None, aliases: Mapping[str, str] | None = None,
                name: str = "agenttest") -> Path:
    """A topology of sims (already running) and retrieval services (`host:port`), with its endpoints
    file under `home` (use OPS_HOME=home). Returns the topology file."""
    doc: dict[str, Any] = {"name": name, "backend": "local", "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
                           "models": {}, "services": {}, "roles": dict(roles)}
    endpoints: dict[str, list[dict[str, Any]]] = {}
    for key, (sim, extra) in models.items():
        doc["models"][key] = {"model": sim.model, "engine": "sim", "node": "cpu", "gpus_per_replica": 0,
                              "port": sim.port, **extra}
        endpoints.setdefault(sim.model, []).append({"ip_addr": "127.0.0.1", "port": sim.port})
    for key, address in (services or {}).items():
        host, port = address.rsplit(":", 1)
        doc["services"][key] = {"kind": "retrieval", "node": "cpu", "port": int(port), "index_dir": "/unused"}
        endpoints[key] = [{"ip_addr": host, "port": int(port)}]
    if aliases:
        doc["aliases"] = dict(aliases)
    topology = home / f"{name}.yaml"
    home.mkdir(parents=True, exist_ok=True)
    topology.write_text(yaml.safe_dump(doc, sort_keys=False))
    (home / name).mkdir(exist_ok=True)
    (home / name / "model_config.json").write_text(json.dumps(endpoints))
    return topology


def standard_fleet(home: Path, orchestrator: SimServer, experts: SimServer, judge: SimServer,
                   retrieval: Mapping[str, str], **kwargs: Any) -> Path:
    return write_fleet(home, {"orchestrator": (orchestrator, {}),
                              "experts": (experts, {"request_defaults": {"chat_template_kwargs":
                                                                         {"enable_thinking": False}}}),
                              "judge": (judge, {})},
                       {"orchestrator": "orchestrator", "search": "experts", "reasoner": "experts",
                        "answer": "experts", "judge": "judge"}, services=retrieval, **kwargs)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(dict(row)) + "\n" for row in rows), encoding="utf-8")
    return path


def questions(count: int, *, search: bool | None, prefix: str = "Synthetic question") -> list[str]:
    """`count` distinct questions whose plan does (True) or does not (False) include a search."""
    found = []
    i = 0
    while len(found) < count:
        q = f"{prefix} {i}: what is the value asked for here?"
        if search is None or agent_rules.uses_search(q) == search:
            found.append(q)
        i += 1
    return found


def text_samples(path: Path) -> list[dict[str, Any]]:
    return [s for s in read_jsonl(path) if not s.get("image")]


def expected(samples: list[dict[str, Any]], *, protocol: str = "toolorchestra", boxed: bool = False,
             max_rounds: int = 50) -> dict[str, Any]:
    """What a run over the sims scores, from the sim's rules (answered iff R + 1 <= max_rounds)."""
    correct = 0
    rounds = []
    tools: Counter[str] = Counter()
    judged = []
    exact = judge_calls = 0
    for sample in samples:
        q, gold = sample["question"], str(sample["answer"])
        plan = agent_rules.plan(q)
        if len(plan) + 1 > max_rounds:
            rounds.append(max_rounds)
            tools.update(plan[:max_rounds])
            continue
        rounds.append(len(plan) + 1)
        tools.update(plan)
        tools["answer"] += 1
        token = replies.answer_token(q)
        if protocol == "cais":
            right = replies.token_is_right(token)
            judged.append((0.9 if right else 0.2, right))
            judge_calls += 1
        elif gold.strip().lower() == token.lower():
            right = True
            exact += 1
        else:
            right = replies.token_is_right(token)
            judge_calls += 1
        correct += right
    out: dict[str, Any] = {"correct": correct, "units": len(samples), "mean_rounds": sum(rounds) / len(rounds),
                           "tools": dict(tools), "exact": exact, "judge_calls": judge_calls}
    if protocol == "cais":
        n = len(samples)
        accuracy = round(100 * correct / n, 2)
        out["accuracy_pct"] = accuracy
        out["half_width_pct"] = round(1.96 * math.sqrt(accuracy * (100 - accuracy) / n), 2)
        out["calibration_error"] = plain_calibration(judged)
    return out


def plain_calibration(items: list[tuple[float, bool]], beta: int = 100) -> float | None:
    """HLE's calib_err (p=2, bins of beta, last bin skipped), written out plainly for sorted input
    whose ties never mix right and wrong (the sim's confidences: 0.9 right, 0.2 wrong)."""
    if len(items) < beta:
        return None
    ordered = sorted(items, key=lambda item: item[0])
    n = len(ordered)
    starts = list(range(0, (n // beta) * beta, beta))
    total = 0.0
    for start in starts[:-1]:
        chunk = ordered[start:start + beta]
        diff = abs(sum(c for c, _ in chunk) / len(chunk) - sum(r for _, r in chunk) / len(chunk))
        total += len(chunk) / n * diff ** 2
    return 100 * round(math.sqrt(total), 2)
