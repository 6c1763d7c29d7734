"""Nothing overspent: a priced model (topology `pricing:`) records each call's cost in profile.jsonl;
`--max-cost` stops taking tasks once the run dir's spend passes it (exit 5), a resume with the same (or a
remembered) limit exits 5 at once saying what was spent, a higher one goes on; a detached run stopped by
the limit is `stopped`, never restarted. Tokens and cost per role in scores.json, at the end of the run
and in report.html; cache hits cost nothing and are counted apart. A real `ops up` of simulated
replicas, real `ops` subprocesses, exact sums from profile.jsonl."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.supervise_fixtures import (
    detached_fixture,  # noqa: F401 (the `detached` fixture)
    events,
    run_info,
    runs_json,
    supervisor_state,
    wait_until,
)
from tests.helpers import model_calls, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.integration.test_fleet import Harness
from tests.simserver import SimServer

IN, OUT = 1000.0, 4000.0  # USD per million prompt / completion tokens: a call costs about $0.2
Detach = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Harness, Path]]:
    """A topology up (local sims) whose model `answer` is priced, for the module (each test its own run dirs)."""
    h = Harness(tmp_path_factory.mktemp("priced"), "local")
    topology = h.topology("priced", {"answer": {"replicas": 1, "pricing": {"input_per_mtok": IN,
                                                                              "output_per_mtok": OUT}}})
    try:
        assert h.up(topology).returncode == 0
        yield h, topology
    finally:
        h.cleanup()


def calls(run_dir: Path) -> list[dict[str, Any]]:
    return model_calls(run_dir)


def cost_of(call: dict[str, Any]) -> float:
    return round((call["prompt_tokens"] * IN + call["completion_tokens"] * OUT) / 1e6, 9)


def usd(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4g}"


def test_max_cost_stops_the_run_a_resume_needs_a_higher_limit_and_usage_is_reported(
        priced: tuple[Harness, Path]) -> None:
    h, topology = priced
    ids = [f"s{i}" for i in range(40)]
    run_dir = h.cwd / "runs" / "spend"
    args = ["eval", "chat", "--topology", str(topology), "--model", "answer", "--dataset",
            str(dataset(h.cwd / "limit.jsonl", ids)), "--run-dir", str(run_dir), "--concurrency", "1", "--no-analyze"]
    stopped = h.ops(*args, "--max-cost", "2")
    assert stopped.returncode == 5, stopped.stderr
    made = calls(run_dir)
    assert all(call["cost"] == cost_of(call) and call["status"] == "ok" for call in made)  # each call priced
    running = [sum(call["cost"] for call in made[:n]) for n in range(1, len(made) + 1)]
    # one task at a time: the task whose call passed the limit is the last one; before it, the limit held
    assert running[-1] > 2 and all(spent <= 2 for spent in running[:-1])
    assert len(results(run_dir)) == len(made) < 40
    spent = sum(call["cost"] for call in made)
    (line,) = stopped.stderr.strip().splitlines()
    assert line == (f"error: the run dir's spend passed --max-cost $2.00: {usd(spent)} spent (every call of every "
                    "attempt); no new task was started, those in flight finished; continue with a higher "
                    f"--max-cost and --resume (run dir {run_dir})")
    assert "spend limit $2.00: $0 spent in this run dir so far" in (run_dir / "eval.log").read_text()
    live = json.loads((run_dir / "live.json").read_text())
    assert live["state"] == "stopped" and live["reason"] == line.removeprefix("error: ")
    assert events(run_dir)[-1]["event"] == "stopped" and run_info(run_dir)["max_cost"] == 2.0

    refused = f"error: {run_dir} has spent {usd(spent)} ({len(made)} priced call(s) over every attempt, " \
              "profile.jsonl), more than --max-cost $2.00; nothing was run; give a higher --max-cost to go on"
    for again in (h.ops(*args, "--resume", "--max-cost", "2"), h.ops(*args, "--resume")):  # given, then remembered
        assert again.returncode == 5 and again.stderr.strip() == refused
    assert len(calls(run_dir)) == len(made) and len(results(run_dir)) == len(made)  # nothing more was spent

    finished = h.ops(*args, "--resume", "--max-cost", "1000")
    assert finished.returncode == 0, finished.stderr
    records = results(run_dir)
    assert Counter(r["id"] for r in records) == Counter(ids) and all(r["status"] == "ok" for r in records)
    every = calls(run_dir)
    assert len(every) == 40 and all(call["cost"] == cost_of(call) for call in every)
    prompt, completion = sum(c["prompt_tokens"] for c in every), sum(c["completion_tokens"] for c in every)
    total = round(sum(c["cost"] for c in every), 9)
    row = {"calls": 40, "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": total, "cache_hits": 0,
           "cache_hit_prompt_tokens": 0, "cache_hit_completion_tokens": 0}
    assert json.loads((run_dir / "scores.json").read_text())["usage"] == {"by_role": {"answer": row}, "total": row}
    log = (run_dir / "eval.log").read_text()  # the usage lines are details: eval.log, and the console with -v
    assert "usage (every call in this run dir, all attempts):" in log and "usage (every" not in finished.stdout
    assert f"  answer  40 call(s), {prompt:,} prompt + {completion:,} completion tokens, cost {usd(total)}" in log
    assert finished.stdout.splitlines()[-1].startswith("chat: 40/40 answered, not graded · 40/40 ok · ")
    assert f" tokens · {usd(total)} · {run_dir}" in finished.stdout.splitlines()[-1]  # the result line: the cost
    analyzed = run_ops(["analyze", str(run_dir)], timeout=180)
    assert analyzed.returncode == 0, analyzed.stderr
    report = (run_dir / "analysis" / "report.html").read_text()
    assert f"<tr><td>answer</td><td>40</td><td>{prompt}</td><td>{completion}</td><td>{usd(total)}</td><td>0</td>" \
           "<td>0</td><td>0</td></tr>" in report


def test_cache_hits_cost_nothing_and_are_counted_apart(priced: tuple[Harness, Path]) -> None:
    h, topology = priced
    data = dataset(h.cwd / "cached.jsonl", [f"s{i}" for i in range(10)])
    cache = h.cwd / "responses.sqlite"
    paid, free = h.cwd / "runs" / "paid", h.cwd / "runs" / "free"
    for run_dir in (paid, free):
        done = h.ops("eval", "chat", "--topology", str(topology), "--model", "answer", "--dataset", str(data),
                     "--run-dir", str(run_dir), "--cache-file", str(cache), "--cache-sampled", "--no-analyze")
        assert done.returncode == 0, done.stderr
    first, second = calls(paid), calls(free)
    assert all(c["cost"] == cost_of(c) > 0 for c in first)
    assert all(c["cost"] == 0 and c["cache"] == "hit" for c in second)
    prompt, completion = sum(c["prompt_tokens"] for c in first), sum(c["completion_tokens"] for c in first)
    usage = json.loads((free / "scores.json").read_text())["usage"]["by_role"]["answer"]
    assert usage == {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "cache_hits": 10,
                     "cache_hit_prompt_tokens": prompt, "cache_hit_completion_tokens": completion}
    assert (f"  answer  0 call(s), 0 prompt + 0 completion tokens, cost $0; 10 cache hit(s), free ({prompt:,} "
            f"prompt + {completion:,} completion tokens)") in (free / "eval.log").read_text()


def test_a_detached_run_stopped_by_the_limit_is_stopped_not_restarted(
        priced: tuple[Harness, Path], detached: Detach) -> None:
    h, topology = priced
    runs = h.cwd / "runs"
    run_dir = runs / "spend-detached"
    started = detached(["eval", "chat", "--topology", str(topology), "--model", "answer", "--dataset",
                        str(dataset(h.cwd / "detached.jsonl", [f"s{i}" for i in range(200)])), "--concurrency", "2",
                        "--no-analyze", "--max-cost", "1", "--restart-backoff", "0.2"], run_dir, h.env)
    assert started.returncode == 0, started.stderr
    wait_until(lambda: supervisor_state(run_dir) in ("stopped", "crashed", "finished"), "the run ended")
    info = run_info(run_dir)
    reason = info["supervisor"]["reason"]
    assert info["supervisor"]["state"] == "stopped" and info["supervisor"]["restarts"] == 0
    assert reason.startswith("the spend limit was reached (exit 5); not restarted: error: the run dir's spend "
                             "passed --max-cost $1.00: ")
    assert [(a["exit"], a["outcome"]) for a in info["attempts"]] == [(5, "stopped")]
    assert [e["event"] for e in events(run_dir)] == ["stopped"] and events(run_dir)[0]["reason"] == reason
    row = runs_json(runs)["spend-detached"]
    assert (row["state"], row["reason"], row["attempts"]) == ("stopped", reason, 1) and row["done"] < 200


def test_max_cost_without_a_priced_model_is_bad_input(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])
    result = run_ops(["eval", "chat", "--model-config", str(model_config(tmp_path / "mc.json", {"m": [sim]})),
                      "--dataset", str(dataset(tmp_path / "d.jsonl", ["a"])), "--run-dir", str(tmp_path / "run"),
                      "--max-cost", "5"])
    assert result.returncode == 2
    assert result.stderr.strip() == ("error: --max-cost $5.00: no model this run calls has `pricing:` in its topology "
                                     "(m), so no call can be priced; add `pricing: {input_per_mtok: USD, "
                                     "output_per_mtok: USD}` to the model or provider, or drop --max-cost")
    assert not (tmp_path / "run" / "results.jsonl").exists()
