"""Helpers of the tau2 tests: a fleet of sims (agent, user simulator, judge) and the rewards the
synthetic domain's tasks get from the sim, written down from the tasks' design (evals/tau2/data,
services/simllm/tau2_rules.py) and τ²-bench's formulas, never computed by the suite's code."""

from __future__ import annotations

import contextlib
import json
import math
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tests.integration.agent_fixtures import write_fleet
from tests.simserver import SimServer

SYNTHETIC = Path(__file__).resolve().parents[2] / "evals" / "tau2" / "data" / "domains" / "synthetic"

# task id -> (reward, termination) for the sim; flaky_booking depends on the trial's seed (odd: 0)
EXPECTED: dict[str, tuple[float, str]] = {
    "book_pilates": (1.0, "user_stop"), "book_missing_write": (0.0, "user_stop"),
    "book_wrong_class": (0.0, "user_stop"), "plan_fee_not_said": (0.0, "user_stop"),
    "plan_upgrade_fee": (1.0, "user_stop"), "cancel_spin": (1.0, "user_stop"), "look_up_class": (1.0, "user_stop"),
    "look_up_wrong_class": (0.0, "user_stop"), "ask_for_human": (1.0, "user_stop"),
    "downgrade_assert": (1.0, "user_stop"), "not_booked_assert": (1.0, "user_stop"),
    "book_without_lookup": (0.0, "user_stop"), "class_name_nl": (1.0, "user_stop"),
    "refund_nl_unmet": (0.0, "user_stop"), "app_login": (1.0, "user_stop"), "app_login_missing": (0.0, "user_stop"),
    "endless_chat": (0.0, "max_steps"), "invalid_tools": (0.0, "too_many_errors"),
    "parallel_booking": (1.0, "user_stop"), "pay_then_book": (1.0, "user_stop"),
    "flaky_booking": (1.0, "user_stop"), "no_criteria": (1.0, "user_stop"),
}


def seeds(trials: int) -> list[int]:
    """τ²-bench's per-trial seeds: random.seed(300), then randint(0, 1e6) per trial."""
    rng = random.Random(300)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def expected_reward(task_id: str, seed: int) -> float:
    if task_id == "flaky_booking":
        return 0.0 if seed % 2 else 1.0
    return EXPECTED[task_id][0]


def expected_scores(trials: int, task_ids: list[str] | None = None) -> dict[str, Any]:
    ids = task_ids or list(EXPECTED)
    trial_seeds = seeds(trials)
    rewards = {t: [expected_reward(t, s) for s in trial_seeds] for t in ids}
    flat = [r for rs in rewards.values() for r in rs]
    pass_k = {}
    for k in range(1, trials + 1):
        values = [math.comb(sum(r == 1.0 for r in rs), k) / math.comb(len(rs), k) for rs in rewards.values()]
        pass_k[str(k)] = round(sum(values) / len(values), 6)
    return {"avg_reward": round(sum(flat) / len(flat), 6), "pass_hat_k": pass_k, "successes": flat.count(1.0)}


@contextlib.contextmanager
def tau2_sims(work: Path) -> Iterator[tuple[SimServer, SimServer, SimServer]]:
    """Three sims at 2 ms (agent, user simulator, judge), stopped by pid when the block ends."""
    servers = [SimServer(name, args=["--latency-ms", "2"], log_dir=work) for name in ("sim/agent", "sim/user",
                                                                                     "sim/judge")]
    try:
        for server in servers:
            server.start()
        yield servers[0], servers[1], servers[2]
    finally:
        for server in servers:
            server.stop()


def tau2_fleet(home: Path, agent: SimServer, user: SimServer, judge: SimServer, **extra: Mapping[str, Any]) -> Path:
    return write_fleet(home, {"agent": (agent, dict(extra.get("agent", {}))), "usersim": (user, {}),
                              "judge": (judge, {})},
                       {"orchestrator": "agent", "user": "usersim", "judge": "judge"}, name="tau2test")


def task_file(path: Path, task_ids: list[str]) -> Path:
    tasks = {t["id"]: t for t in json.loads((SYNTHETIC / "tasks.json").read_text())}
    path.write_text(json.dumps([tasks[i] for i in task_ids]))
    return path
