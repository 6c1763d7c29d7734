"""scores.json of a tau2 run (reference §1.9).

Each unit is one simulation (task, trial). A unit whose last record is an error (a model call that
failed after its retries, the engine's deadline, a judge reply that does not parse) is an
infrastructure error: left out of every metric and counted by type, as τ²-bench HEAD drops
`infrastructure_error` simulations. `avg_reward` is the mean reward over the evaluated simulations;
success is |reward - 1| <= 1e-6; pass^k(task) = C(c, k) / C(n, k) with n the task's evaluated
simulations and c its successes; the reported pass^k is the mean over tasks with at least one
evaluated simulation, for every k from 1 to the smallest such n (and at most --trials).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

from orchestra_ops.core.headline import Headline, ModelScore, mean_half_width
from orchestra_ops.runner.dataset import Sample, sample_id
from orchestra_ops.runner.results import TaskId


def is_successful(reward: float) -> bool:
    return (1 - 1e-6) <= reward <= (1 + 1e-6)


def pass_hat_k(trials: Mapping[str, tuple[int, int]], max_k: int) -> dict[str, float]:
    """{k: mean over tasks of C(c, k) / C(n, k)} for k = 1..max_k; `trials`: task -> (n, c)."""
    out: dict[str, float] = {}
    for k in range(1, max_k + 1):
        values = [math.comb(c, k) / math.comb(n, k) for n, c in trials.values()]
        out[str(k)] = round(sum(values) / len(values), 6) if values else 0.0
    return out


def score(records: Mapping[TaskId, dict[str, Any]], units: list[Sample], *, domain: str, trials: int
          ) -> dict[str, Any]:
    evaluated: list[dict[str, Any]] = []
    infra: Counter[str] = Counter()
    missing = 0
    for unit in units:
        record = records.get(sample_id(unit))
        if record is None:
            missing += 1
        elif record.get("status") != "ok" or "reward" not in record:
            infra[str(record.get("error_type", "unknown"))] += 1
        else:
            evaluated.append({**record, "task_id": unit["task_id"]})
    per_task: dict[str, list[float]] = defaultdict(list)
    for record in evaluated:
        per_task[str(record["task_id"])].append(float(record["reward"]))
    counts = {task: (len(rewards), sum(is_successful(r) for r in rewards)) for task, rewards in per_task.items()}
    max_k = min([trials, *(n for n, _ in counts.values())]) if counts else 0
    rewards = [float(r["reward"]) for r in evaluated]
    average = round(sum(rewards) / len(rewards), 6) if rewards else 0.0
    terminations = Counter(str(r.get("termination_reason")) for r in evaluated)
    return {
        "suite": "tau2", "domain": domain, "trials": trials, "tasks": len({u["task_id"] for u in units}),
        "simulations": len(units), "evaluated": len(evaluated), "infra_errors": sum(infra.values()),
        "infra_errors_by_type": dict(sorted(infra.items())), "missing": missing,
        "avg_reward": average, "successes": sum(is_successful(r) for r in rewards),
        "pass_hat_k": pass_hat_k(counts, max_k),
        "termination_reasons": dict(sorted(terminations.items())),
        "by_domain": {domain: {"simulations": len(evaluated), "avg_reward": average}},
    }


def headline(scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]], agent: str) -> Headline:
    """The agent's average reward in percent, ± 1.96 standard errors of the evaluated simulations' rewards."""
    rewards = [float(r["reward"]) for r in records.values() if r.get("status") == "ok" and "reward" in r]
    if not scores.get("evaluated"):
        return Headline(metric="average reward", note="no simulation evaluated")
    return Headline(metric="average reward", scores=[ModelScore(agent, 100 * float(scores["avg_reward"]),
                                                                mean_half_width(rewards), int(scores["evaluated"]))])


def score_lines(scores: Mapping[str, Any]) -> list[str]:
    lines = [f"avg reward {scores['avg_reward']:.4f} over {scores['evaluated']} simulation(s) of "
             f"{scores['tasks']} task(s) ({scores['domain']}, {scores['trials']} trial(s) each)"]
    lines.append("pass^k: " + ", ".join(f"pass^{k} {v:.4f}" for k, v in scores["pass_hat_k"].items()))
    lines.append("termination: " + ", ".join(f"{k} {v}" for k, v in scores["termination_reasons"].items()))
    if scores["infra_errors"] or scores["missing"]:
        kinds = ", ".join(f"{k} {v}" for k, v in scores["infra_errors_by_type"].items())
        lines.append(f"left out: {scores['infra_errors']} infrastructure error(s)"
                     f"{' (' + kinds + ')' if kinds else ''}, {scores['missing']} without a result")
    return lines
