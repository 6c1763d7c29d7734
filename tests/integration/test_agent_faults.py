"""The agent loop when things go wrong: invalid tool calls, a hanging expert, a judge that never
parses, code that never ends; and tool aliases routed by the topology. Sims over real HTTP; no
search is planned for these questions, so the retrieval service is a port nothing listens on."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestra_ops.services.simllm import agent_rules, replies

from tests.helpers import free_port, run_ops
from tests.integration.agent_fixtures import expected, questions, read_jsonl, standard_fleet, write_fleet, write_jsonl
from tests.simserver import SimServer

CODES = {"none": 342, "unknown_tool": 350, "bad_arguments": 351, "missing_model": 360, "unknown_alias": 360}


def _marked(kind: str, *, first: str | None = None) -> str:
    """A question with the marker whose plan has no search (and starts with `first`, if given)."""
    for i in range(1000):
        q = f"Marked question {kind} {i} [sim:{kind}]"
        plan = agent_rules.plan(q)
        if "search" not in plan and (first is None or plan[0] == first):
            return q
    raise AssertionError("no such question")


def _fleet(tmp_path: Path, sim_server: Callable[..., SimServer], **judge_args: Any) -> tuple[list[str], dict[str, str],
                                                                                             dict[str, SimServer]]:
    sims = {"orchestrator": sim_server("sim/orchestrator", args=["--latency-ms", "2"]),
            "experts": sim_server("sim/experts", args=["--latency-ms", "2"]),
            "judge": sim_server("sim/judge", args=["--latency-ms", "2", *judge_args.get("args", [])])}
    home = tmp_path / "ops"
    topology = standard_fleet(home, sims["orchestrator"], sims["experts"], sims["judge"],
                              {"retrieval": f"127.0.0.1:{free_port()}"})
    return ["--topology", str(topology)], {"OPS_HOME": str(home)}, sims


def _run(args: list[str], env: dict[str, str]) -> Any:
    result = run_ops(["eval", "hle", "--no-analyze", "--concurrency", "16", *args], env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _requests(sim: SimServer) -> float:
    return sim.metrics().get("sim_requests_total", 0.0)


def test_invalid_calls_consume_rounds_and_never_reach_a_model(tmp_path: Path,
                                                              sim_server: Callable[..., SimServer]) -> None:
    topology, env, sims = _fleet(tmp_path, sim_server)
    rows = [{"id": kind, "question": _marked(f"invalid={kind}"), "answer": "x"} for kind in CODES]
    data = write_jsonl(tmp_path / "invalid.jsonl", rows)
    run_dir = tmp_path / "run"
    _run([*topology, "--dataset", str(data), "--run-dir", str(run_dir), "--max-rounds", "3"], env)
    for record in read_jsonl(run_dir / "results.jsonl"):
        code = str(CODES[record["id"]])
        assert (record["status"], record["correct"], record["answered"], record["rounds"]) == ("ok", False, False, 3)
        assert record["invalid"] == {code: 3} and record["calls"] == []
    assert _requests(sims["experts"]) == 0 and _requests(sims["judge"]) == 0  # not one call went to an expert
    assert _requests(sims["orchestrator"]) == 3 * len(rows)
    assert not [e for e in read_jsonl(run_dir / "profile.jsonl") if e["type"] == "tool_call"]
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["invalid_calls"] == {"342": 3, "350": 3, "351": 3, "360": 6}
    assert (scores["correct"], scores["no_answer"]) == (0, 5)

    out = tmp_path / "export"
    assert run_ops(["export", str(run_dir), "--out", str(out)]).returncode == 0
    calls = {kind: json.loads((out / f"{kind}.json").read_text())["all_tool_calls"] for kind in CODES}
    assert calls["none"] == ["342 invalid tool calls []"] * 3
    assert all(len(c) == 3 and all(len(r) == 1 and r[0].startswith(f"{CODES[k]} invalid tool call") for r in c)
               for k, c in calls.items() if k != "none")
    assert calls["bad_arguments"][0][0].startswith("351 invalid tool call args (not json object) [")


def test_an_invalid_call_before_a_valid_one_is_recorded_and_the_valid_one_runs(
        tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    topology, env, _ = _fleet(tmp_path, sim_server)
    rows = [{"id": kind, "question": _marked(f"invalid={kind}+valid"), "answer": "x"}
            for kind in CODES if kind != "none"]
    data = write_jsonl(tmp_path / "mixed.jsonl", rows)
    run_dir = tmp_path / "run"
    _run([*topology, "--dataset", str(data), "--run-dir", str(run_dir)], env)
    want = expected(rows)
    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    for row in rows:
        record = records[row["id"]]
        rounds = len(agent_rules.plan(row["question"])) + 1
        assert (record["rounds"], record["answered"]) == (rounds, True)
        assert record["invalid"] == {str(CODES[row["id"]]): rounds}
        assert record["pred"] == replies.answer_token(row["question"])
    assert sum(r["correct"] for r in records.values()) == want["correct"]
    out = tmp_path / "export"
    assert run_ops(["export", str(run_dir), "--out", str(out)]).returncode == 0
    first = json.loads((out / "unknown_alias.json").read_text())["all_tool_calls"][0]
    assert first[0].startswith("360 invalid tool calls [") and "-99" in first[0]
    question = next(row["question"] for row in rows if row["id"] == "unknown_alias")
    assert first[1] == [{"name": agent_rules.plan(question)[0], "arguments": first[1][0]["arguments"]}]


def test_a_hanging_expert_becomes_a_recorded_error_not_a_hang(tmp_path: Path,
                                                              sim_server: Callable[..., SimServer]) -> None:
    sims = {"orchestrator": sim_server("sim/orchestrator", args=["--latency-ms", "2"]),
            "experts": sim_server("sim/experts", args=["--latency-ms", "2"]),
            "coder": sim_server("sim/coder", args=["--hang-rate", "1"]),
            "judge": sim_server("sim/judge", args=["--latency-ms", "2"])}
    home = tmp_path / "ops"
    topology = write_fleet(home, {"orchestrator": (sims["orchestrator"], {}), "experts": (sims["experts"], {}),
                                  "coder": (sims["coder"], {"request_timeout_s": 1}), "judge": (sims["judge"], {})},
                           {"orchestrator": "orchestrator", "search": "experts", "reasoner": "coder",
                            "answer": "experts", "judge": "judge"}, services={"retrieval": f"127.0.0.1:{free_port()}"})
    stuck = [{"id": f"stuck{i}", "question": q, "answer": "x"}
             for i, q in enumerate(q for q in questions(40, search=False)
                                   if agent_rules.plan(q)[0] == "enhance_reasoning")][:4]
    data = write_jsonl(tmp_path / "d.jsonl", stuck)
    env = {"OPS_HOME": str(home)}
    run_dir = tmp_path / "run"
    out = _run(["--topology", str(topology), "--dataset", str(data), "--run-dir", str(run_dir), "--max-retries", "1"],
               env)
    records = read_jsonl(run_dir / "results.jsonl")
    assert len(records) == 4
    for record in records:
        assert (record["status"], record["error_type"], record["rounds"]) == ("error", "timeout", 1)
        assert record["calls"] == [{**record["calls"][0], "tool": "enhance_reasoning", "status": "timeout"}]
        assert "round 0: no answer from 127.0.0.1" in record["error"] and "within 1 s" in record["error"]
        assert json.loads((run_dir / record["trajectory"]).read_text())["rounds"][0]["tool"]["tool_error_type"] == \
            "timeout"
    assert "error=timeout correct=False" in out.stdout
    events = [e for e in read_jsonl(run_dir / "profile.jsonl") if e["type"] == "tool_call"]
    assert len(events) == 4 and {e["status"] for e in events} == {"timeout"}
    assert json.loads((run_dir / "scores.json").read_text())["errors_by_type"] == {"timeout": 4}

    # the same expert under a per-task deadline shorter than its request timeout
    deadline_dir = tmp_path / "run-deadline"
    _run(["--topology", str(topology), "--dataset", str(data), "--run-dir", str(deadline_dir), "--timeout", "600",
          "--task-timeout", "2"], env)
    assert {(r["status"], r["error_type"]) for r in read_jsonl(deadline_dir / "results.jsonl")} == {
        ("error", "task_timeout")}


def test_a_judge_that_never_parses_is_a_counted_grader_error(tmp_path: Path,
                                                             sim_server: Callable[..., SimServer]) -> None:
    topology, env, sims = _fleet(tmp_path, sim_server, args=["--malformed-rate", "1"])
    chosen = questions(12, search=False)
    rows = [{"id": f"g{i}", "question": q, "answer": replies.answer_token(q) if i % 2 else "not the sim's answer"}
            for i, q in enumerate(chosen)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    _run([*topology, "--dataset", str(data), "--run-dir", str(run_dir)], env)
    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    judged = [row["id"] for i, row in enumerate(rows) if i % 2 == 0]
    assert {k for k, r in records.items() if r["status"] == "error"} == set(judged)
    assert all(records[k]["error_type"] == "grader_error" and records[k]["grade"] == "grader_error" for k in judged)
    assert _requests(sims["judge"]) == 3 * len(judged)  # re-asked up to --judge-attempts, never more
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["grader_errors"], scores["scored"], scores["correct"], scores["errors"]) == (6, 6, 6, 0)
    assert scores["accuracy"] == 1.0
    assert "grader errors (left out of the score): 6" in (run_dir / "eval.log").read_text()

    # --retry-failed with a judge that answers: only the judge is asked again, about the same answers
    healthy = sim_server("sim/judge", args=["--latency-ms", "2"])
    endpoints = Path(env["OPS_HOME"]) / "agenttest" / "model_config.json"
    config = json.loads(endpoints.read_text())
    config["sim/judge"] = [{"ip_addr": "127.0.0.1", "port": healthy.port}]
    endpoints.write_text(json.dumps(config))
    before = (_requests(sims["orchestrator"]), _requests(sims["experts"]))
    again = _run([*topology, "--run-dir", str(run_dir), "--retry-failed"], env)
    assert "6 to run" in again.stdout
    assert (_requests(sims["orchestrator"]), _requests(sims["experts"])) == before and _requests(healthy) == 6
    final = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    assert all(final[k]["regraded"] and final[k]["status"] == "ok" and
               final[k]["correct"] == replies.token_is_right(replies.answer_token(rows[int(k[1:])]["question"]))
               for k in judged)
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["grader_errors"], scores["scored"]) == (0, 12)
    assert scores["correct"] == 6 + sum(final[k]["correct"] for k in judged)


def test_code_that_never_ends_is_stopped_and_the_run_goes_on(tmp_path: Path,
                                                             sim_server: Callable[..., SimServer]) -> None:
    topology, env, _ = _fleet(tmp_path, sim_server)
    loop = _marked("code=loop", first="enhance_reasoning")
    normal = [{"id": f"n{i}", "question": q, "answer": "x"} for i, q in enumerate(questions(6, search=False))]
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "loop", "question": loop, "answer": "x"}, *normal])
    run_dir = tmp_path / "run"
    _run([*topology, "--dataset", str(data), "--run-dir", str(run_dir), "--exec-timeout", "1", "--max-rounds", "3"],
         env)
    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    looping = records.pop("loop")
    assert (looping["status"], looping["answered"], looping["rounds"]) == ("ok", False, 3)
    assert [c["exec"] for c in looping["calls"]] == ["timeout"] * 3
    want = expected(normal, max_rounds=3)
    assert sum(r["correct"] for r in records.values()) == want["correct"]
    assert all(r["status"] == "ok" for r in records.values())


def test_topology_aliases_route_each_alias_and_bad_ones_are_refused(tmp_path: Path,
                                                                     sim_server: Callable[..., SimServer]) -> None:
    sims = {name: sim_server(f"sim/{name}", args=["--latency-ms", "2"])
            for name in ("orchestrator", "experts", "math", "coder", "judge")}
    home = tmp_path / "ops"
    topology = write_fleet(home, {"orchestrator": (sims["orchestrator"], {"tokenizer": "estimate"}),
                                  **{k: (sims[k], {}) for k in ("experts", "math", "coder", "judge")}},
                           {"orchestrator": "orchestrator", "search": "experts", "reasoner": "experts",
                            "answer": "experts", "judge": "judge"}, services={"retrieval": f"127.0.0.1:{free_port()}"},
                           aliases={"answer-math-1": "math", "answer-math-2": "math", "reasoner-3": "coder"})
    env = {"OPS_HOME": str(home)}
    rows = [{"id": f"a{i}", "question": q, "answer": "x"} for i, q in enumerate(questions(40, search=False))]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    out = _run(["--topology", str(topology), "--dataset", str(data), "--run-dir", str(run_dir), "-v"], env)
    assert "answer-math-1 -> math (sim/math), answers in answer format" in out.stdout  # -v: the aliases
    assert "reasoner-3    -> coder (sim/coder)" in out.stdout
    assert "reasoner-1    -> reasoner (sim/experts)" in out.stdout
    assert "context budgets counted by orchestrator's tokenizer: estimate (4 characters a token" in out.stdout
    served = {"answer-math-1": "sim/math", "answer-math-2": "sim/math", "reasoner-3": "sim/coder"}
    calls = [c for r in read_jsonl(run_dir / "results.jsonl") for c in r["calls"]]
    assert all(c["model"] == served.get(c["alias"], "sim/experts") for c in calls)
    to_math = sum(c["alias"].startswith("answer-math") for c in calls)
    to_coder = sum(c["alias"] == "reasoner-3" for c in calls)
    assert to_math and to_coder
    assert (_requests(sims["math"]), _requests(sims["coder"])) == (to_math, to_coder)

    service = topology.read_text().replace("reasoner-3: coder", "reasoner-3: retrieval")
    (home / "bad.yaml").write_text(service)
    refused = run_ops(["eval", "hle", "--no-analyze", "--topology", str(home / "bad.yaml"), "--dataset", str(data),
                       "--run-dir", str(tmp_path / "r2")], env=env)
    assert refused.returncode == 2
    assert "aliases.reasoner-3: 'retrieval' is a service; an alias names a role or a model" in refused.stderr
    unknown = run_ops(["eval", "hle", "--no-analyze", "--topology", str(topology), "--dataset", str(data), "--alias",
                       "answer-9=math", "--run-dir", str(tmp_path / "r3")], env=env)
    assert unknown.returncode == 2 and "--alias answer-9: the tools offer no such alias" in unknown.stderr
    nowhere = run_ops(["eval", "hle", "--no-analyze", "--topology", str(topology), "--dataset", str(data), "--alias",
                       "search-2=nothing", "--run-dir", str(tmp_path / "r4")], env=env)
    assert nowhere.returncode == 2
    assert "'nothing' is neither a role nor a declared model" in nowhere.stderr and "search-2" in nowhere.stderr
