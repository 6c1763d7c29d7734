"""What every run leaves behind: scores.json, typed profile events with task ids, run.json options;
per-target call caps and per-model timeouts in the client."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.fleet_client import FleetClient
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.routing import Routing, Target
from tests.helpers import model_calls, profile_events, run_ops
from tests.integration.eval_fixtures import dataset, model_config, results
from tests.simserver import SimServer


def test_chat_run_writes_scores_profile_events_and_run_json(tmp_path: Path,
                                                             sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "5", "--fail", "500:0.2", "--seed", "3"])
    config = model_config(tmp_path / "mc.json", {"m": [sim]})
    ids = [f"s{i}" for i in range(60)]
    run_dir = tmp_path / "run"
    out = run_ops(["eval", "chat", "--model-config", str(config), "--run-dir", str(run_dir), "--model", "m",
                   "--dataset", str(dataset(tmp_path / "d.jsonl", ids)), "--max-retries", "1",
                   "--concurrency", "8"])
    assert out.returncode == 0, out.stderr
    records = results(run_dir)
    ok = sum(1 for r in records if r["status"] == "ok")
    failed = len(records) - ok
    assert 0 < failed < 60
    scores = json.loads((run_dir / "scores.json").read_text())
    usage = scores.pop("usage")
    assert scores == {"suite": "chat", "model": "m", "units": 60, "ok": ok, "failed": failed,
                      "failed_by_type": {"http_500": failed}, "missing": 0,
                      "headline_scores": {"metric": "answered", "scores": [], "differences": [],
                                          "note": f"{ok}/60 answered, not graded"}}
    assert f"answered {ok} of 60 prompts ({failed} failed, 0 without a result)" in (run_dir / "eval.log").read_text()
    assert f" · {ok}/60 ok, {failed} failed (--retry-failed reruns them) · " in out.stdout.splitlines()[-1]

    every = profile_events(run_dir)
    events = model_calls(run_dir)
    counted = [(e["type"], e["phase"]) for e in every if e not in events]
    assert counted == [("replica_counters", "start"), ("replica_counters", "end")]  # the replica's, around the run
    assert Counter(e["task"] for e in events) == Counter(ids)  # one call per task, each with its task id
    assert {e["type"] for e in events} == {"model_call"}
    assert {e["status"] for e in events} == {"ok", "http_500"}
    assert not any("cost" in e for e in events)  # no pricing in an endpoints file: no call is priced
    prompt = sum(e["prompt_tokens"] for e in events if e["status"] == "ok")
    completion = sum(e["completion_tokens"] for e in events if e["status"] == "ok")
    row = {"calls": 60, "prompt_tokens": prompt, "completion_tokens": completion, "cost_usd": None,
           "cache_hits": 0, "cache_hit_prompt_tokens": 0, "cache_hit_completion_tokens": 0}
    assert prompt > 0 and completion > 0 and usage == {"by_role": {"m": row}, "total": row}
    log = (run_dir / "eval.log").read_text()  # the usage table is a detail: eval.log (the console with -v)
    assert f"  m  60 call(s), {prompt:,} prompt + {completion:,} completion tokens, cost not priced" in log
    assert f" · 60 calls · {prompt + completion:,} tokens · " in out.stdout.splitlines()[-1]  # the result line

    info = json.loads((run_dir / "run.json").read_text())
    assert (info["suite"], info["model"], info["models"], info["templates"], info["suite_options"]) == (
        "chat", "m", ["m"], {}, {"temperature": None, "max_tokens": None})  # the generation flags, none given


def test_two_models_are_refused_by_the_chat_suite(tmp_path: Path) -> None:
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({"a": [{"ip_addr": "127.0.0.1", "port": 9}],
                                  "b": [{"ip_addr": "127.0.0.1", "port": 9}]}))
    out = run_ops(["eval", "chat", "--model-config", str(config), "--model", "a", "--model", "b",
                   "--dataset", str(dataset(tmp_path / "d.jsonl", ["x"])), "--run-dir", str(tmp_path / "r")])
    assert out.returncode == 2
    assert out.stderr.strip() == "error: the chat suite sends each prompt to one --model; give it once"


def test_an_unknown_suite_lists_the_suites() -> None:
    out = run_ops(["eval", "nope"])
    assert out.returncode == 2
    assert ("unknown suite 'nope'; suites: arc, bbh, chat, cmmlu, frames, gsm8k, healthbench, hellaswag, hle, "
            "humaneval, mmlu, opencompass, tau2\n") in out.stderr


def _routing(port: int, timeout: float | None = None) -> Routing:
    target = Target(name="judge", kind="model", served_name="m", addresses=(("127.0.0.1", port),),
                    request_timeout_s=timeout)
    return Routing(source="test", name="test", endpoints_file="test", roles={"judge": "judge"},
                   targets={"judge": target}, request_timeout_s=30.0)


def test_fleet_limit_caps_calls_in_flight_to_a_target(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "150"])

    async def main() -> None:
        fleet = FleetClient(_routing(sim.port))
        fleet.limit("judge", 3)
        try:
            await asyncio.gather(*(fleet.chat("judge", [{"role": "user", "content": f"q{i}"}], task=i)
                                   for i in range(12)))
        finally:
            await fleet.close()

    asyncio.run(main())
    metrics = sim.metrics()
    assert metrics["sim_requests_total"] == 12
    assert metrics["sim_max_requests_in_flight"] == 3


def test_a_model_timeout_applies_unless_the_cli_overrides_it(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "600"])

    async def call(fleet: FleetClient) -> CallError | None:
        try:
            await fleet.chat("judge", [{"role": "user", "content": "q"}])
        except CallError as exc:
            return exc
        finally:
            await fleet.close()
        return None

    timed_out = asyncio.run(call(FleetClient(_routing(sim.port, timeout=0.2), retry=RetryPolicy(attempts=1))))
    assert timed_out is not None and timed_out.kind == "timeout"
    assert "within 0.2 s" in timed_out.message
    assert asyncio.run(call(FleetClient(_routing(sim.port, timeout=0.2), retry=RetryPolicy(attempts=1),
                                  request_timeout_s=30))) is None


def test_limit_after_the_first_call_is_a_bug(sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("m", args=["--latency-ms", "1"])

    async def main() -> None:
        fleet = FleetClient(_routing(sim.port))
        try:
            await fleet.chat("judge", [{"role": "user", "content": "q"}])
            with pytest.raises(RuntimeError, match="after the first call"):
                fleet.limit("judge", 2)
        finally:
            await fleet.close()

    asyncio.run(main())
