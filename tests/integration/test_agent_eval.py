"""`ops eval hle` and `ops eval frames` over sims and a real retrieval server: exact scores, the
retrieval payload at the server, token budgets, kill -9 then --resume, and `ops export`."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")

from orchestra_ops.services.simllm import agent_rules, replies, tokens

from tests.helpers import free_port, run_ops
from tests.integration.agent_fixtures import (
    BUNDLED,
    expected,
    read_jsonl,
    standard_fleet,
    text_samples,
)
from tests.integration.eval_fixtures import kill9_mid_run
from tests.integration.retrieval_fixtures import bundled_index, running, start_server
from tests.recording_proxy import RecordingProxy
from tests.simserver import SimServer

# the first test also waits for the module's stack: the bundled index (built once per session, maybe by
# another worker), a retrieval server loading its encoder and three sims; on a busy 2-core box that alone
# can pass the 300 s default (a hang guard, not a timing claim)
pytestmark = [pytest.mark.retrieval, pytest.mark.timeout(900)]

HLE = BUNDLED / "hle_synthetic.jsonl"
FRAMES = BUNDLED / "frames_synthetic.jsonl"


@dataclass
class Stack:
    orchestrator: SimServer
    experts: SimServer
    judge: SimServer
    retrieval: RecordingProxy  # in front of the real retrieval server
    wiki: RecordingProxy  # the same server, declared as wiki_retrieval
    url: str  # the retrieval server itself


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("agent")
    server = start_server(bundled_index(tmp_path_factory, BUNDLED / "agent_corpus.jsonl"), work / "retrieval.log")
    sims = [SimServer(name, args=["--latency-ms", "3"], log_dir=work)
            for name in ("sim/orchestrator", "sim/experts", "sim/judge")]
    try:
        for sim in sims:
            sim.start()
        with running(server), RecordingProxy(server.url) as retrieval, RecordingProxy(server.url) as wiki:
            yield Stack(*sims, retrieval=retrieval, wiki=wiki, url=server.url)
    finally:
        for sim in sims:
            sim.stop()


def _address(url: str) -> str:
    return url.removeprefix("http://")


def _fleet(tmp_path: Path, stack: Stack, *, wiki: bool = False, orchestrator: SimServer | None = None,
           experts: SimServer | None = None) -> tuple[list[str], dict[str, str]]:
    home = tmp_path / "ops"
    services = {"retrieval": _address(stack.retrieval.url)}
    if wiki:
        services["wiki_retrieval"] = _address(stack.wiki.url)
    topology = standard_fleet(home, orchestrator or stack.orchestrator, experts or stack.experts, stack.judge,
                              services)
    return ["--topology", str(topology)], {"OPS_HOME": str(home)}


def _requests(sim: SimServer) -> float:
    return sim.metrics().get("sim_requests_total", 0.0)


def _eval(suite: str, args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = run_ops(["eval", suite, "--no-analyze", "--concurrency", "32", "--exec-workers", "4", *args], env=env,
                     timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_hle_scores_what_the_sim_predicts_and_every_search_carries_the_payload(tmp_path: Path, stack: Stack) -> None:
    samples = text_samples(HLE)
    want = expected(samples)
    assert 0 < want["exact"] < len(samples) and want["judge_calls"] > 0  # both grading paths are used
    topology, env = _fleet(tmp_path, stack)
    before_requests = len(stack.retrieval.requests)
    judge_before = _requests(stack.judge)
    run_dir = tmp_path / "run"
    out = _eval("hle", [*topology, "--run-dir", str(run_dir)], env)

    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["units"], scores["correct"], scores["scored"], scores["errors"], scores["missing"]) == (
        len(samples), want["correct"], len(samples), 0, 0)
    assert scores["accuracy"] == round(want["correct"] / len(samples), 6)
    assert scores["mean_rounds"] == round(want["mean_rounds"], 4)
    assert scores["tool_calls"] == dict(sorted(want["tools"].items()))
    assert scores["images_excluded"] == 2 and scores["invalid_calls"] == {}
    assert _requests(stack.judge) - judge_before == want["judge_calls"]  # exact matches never reach the judge
    log = (run_dir / "eval.log").read_text()  # the details: eval.log (and the console with -v)
    assert f"accuracy {100 * want['correct'] / len(samples):.1f}% ({want['correct']} of {len(samples)} correct" in log
    assert "2 question(s) with an image left out" in log
    assert "context budgets counted by orchestrator's tokenizer: the replicas' /tokenize and /detokenize" in log
    assert "answer-math-1 -> answer (sim/experts), answers in answer format" in log
    assert "tool calls: " + ", ".join(f"{tool} {n}" for tool, n in sorted(want["tools"].items())) in log
    share = want["correct"] / len(samples)
    half = 196 * (share * (1 - share) / len(samples)) ** 0.5
    result = out.stdout.splitlines()[-1]  # the one result line that ends a run
    assert result.startswith(f"hle: accuracy: orchestrator {100 * share:.1f}% ± {half:.1f} (n={len(samples)}) · "
                             f"{len(samples)}/{len(samples)} ok · "), result
    assert result.endswith(f" tokens · {run_dir}")
    completions = [line for line in out.stdout.splitlines() if line.startswith("[TASK_COMPLETE]")]
    assert len(completions) == len(samples) and all(" correct=" in line for line in completions)

    # every request the retrieval server got: one query of at most 390 characters, topk 50, eid = the task id
    sent = [body for _, body in stack.retrieval.posts("/retrieve")][before_requests:]
    by_id = {s["id"]: s for s in samples}
    assert len(sent) == want["tools"]["search"]
    for body in sent:
        assert body["topk"] == 50 and body["return_scores"] is True and len(body["queries"]) == 1
        assert body["eid"] in by_id
        assert body["queries"][0] == by_id[body["eid"]]["question"][:390]
    searched = Counter(s["id"] for s in samples if agent_rules.uses_search(s["question"]))
    assert Counter(b["eid"] for b in sent) == searched
    assert any(len(by_id[b["eid"]]["question"]) > 390 for b in sent)  # long questions were cut

    # results, trajectories and profile events agree with each other and with the rules
    records = {r["id"]: r for r in read_jsonl(run_dir / "results.jsonl")}
    events = read_jsonl(run_dir / "profile.jsonl")
    calls = Counter(e["role"] for e in events if e["type"] == "model_call" and e["status"] == "ok")
    assert calls["orchestrator"] == sum(r["rounds"] for r in records.values())  # every call, every role
    assert (calls["search"], calls["reasoner"], calls["answer"], calls["judge"]) == (
        want["tools"]["search"], want["tools"]["enhance_reasoning"], want["tools"]["answer"], want["judge_calls"])
    assert {e["type"] for e in events} == {"model_call", "tool_call", "replica_counters"}
    assert all(e["task"] in records for e in events if e["type"] != "replica_counters")  # counters: per replica
    tool_events = [e for e in events if e["type"] == "tool_call"]
    assert len(tool_events) == sum(len(r["calls"]) for r in records.values())
    for event in tool_events:
        assert event["expert_latency"] is not None and event["latency"] >= event["expert_latency"]
        part = {"search": "retrieval_latency", "enhance_reasoning": "exec_latency"}.get(event["tool"])
        assert part is None or event[part] > 0
    for sample in samples:
        record = records[sample["id"]]
        plan = agent_rules.plan(sample["question"])
        assert [c["tool"] for c in record["calls"]] == [*plan, "answer"]
        assert record["rounds"] == len(plan) + 1 and record["pred"] == replies.answer_token(sample["question"])
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        outputs = [r["tool"]["exec_result"] for r in trajectory["rounds"] if r["tool"]["tool"] == "enhance_reasoning"]
        assert outputs == [agent_rules.code_output(sample["question"])] * plan.count("enhance_reasoning")

    _check_export(tmp_path, run_dir, records)


def _check_export(tmp_path: Path, run_dir: Path, records: dict[str, dict[str, Any]]) -> None:
    out_dir = tmp_path / "export"
    exported = run_ops(["export", str(run_dir), "--format", "toolorchestra", "--out", str(out_dir)])
    assert exported.returncode == 0, exported.stderr
    assert f"wrote {len(records)} hle task file(s)" in exported.stdout
    again = run_ops(["export", str(run_dir), "--out", str(out_dir)])
    assert again.returncode == 2 and "--overwrite" in again.stderr
    for task_id, record in records.items():
        task = json.loads((out_dir / f"{task_id}.json").read_text())
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        assert list(task) == ["id", "problem", "all_tool_calls", "all_tool_responses", "answer",
                              "all_message_responses", "correct", "status"]
        assert (task["id"], task["problem"], task["answer"], task["correct"], task["status"]) == (
            task_id, trajectory["problem"], trajectory["answer"], record["correct"], "done")
        assert task["all_tool_calls"] == [[[{"name": c["tool"], "arguments": {"model": c["alias"]}}]]
                                          for c in record["calls"]]
        assert list(task["all_tool_responses"]) == [f"turn_{c['round']}_response" for c in record["calls"]]
        for call in record["calls"]:
            turn = task["all_tool_responses"][f"turn_{call['round']}_response"][0]
            message = task["all_message_responses"][f"turn_{call['round']}_message"]
            # the orchestrator's content as the server sent it: "" beside tool calls, as vLLM 0.32 sends it
            assert message == {"content": "", "tool_calls": [{"tool_name": call["tool"],
                                                                "tool_arguments": {"model": call["alias"]}}]}
            assert (turn["tool"], turn["model"], turn["id"], turn["step"], turn["problem"]) == (
                call["tool"], "sim/experts", task_id, call["round"], trajectory["problem"])
            assert isinstance(turn["context_str"], str)
            if call["tool"] == "search":
                assert turn["_query_llm_ms"] == call["expert_ms"] and turn["_retrieval_ms"] == call["retrieval_ms"]
                assert turn["_search_backend"] == "local_only" and turn["_retrieval_retries"] == 0
                assert len(turn["search_results_data"]) == 50 == turn["_search_local_hits"]
                assert turn["query"] == trajectory["problem"]
            elif call["tool"] == "enhance_reasoning":
                assert turn["_llm_ms"] == call["expert_ms"] and turn["_exec_ms"] == call["exec_ms"]
                assert turn["exec_result"] == agent_rules.code_output(trajectory["problem"])
                assert "print(" in turn["generated_code"]
            else:
                assert turn["_expert_ms"] == call["expert_ms"] and turn["pred"] == record["pred"]
                assert turn["correctness"] == record["correct"] and turn["answer"] == trajectory["answer"]
                assert turn["response"].endswith(f"<answer>{record['pred']}</answer>")
                assert ("_judge_ms" in turn) == (record["grade"] == "judge")


def test_cais_protocol_after_kill_9_and_resume_scores_as_hle_reports(tmp_path: Path, stack: Stack) -> None:
    samples = text_samples(HLE)
    want = expected(samples, protocol="cais")
    assert want["calibration_error"] not in (None, 0.0)
    topology, env = _fleet(tmp_path, stack)
    run_dir = tmp_path / "run"
    base = ["eval", "hle", "--no-analyze", *topology, "--run-dir", str(run_dir), "--judge-protocol", "cais",
            "--concurrency", "8", "--exec-workers", "4"]
    kill9_mid_run(base, run_dir / "results.jsonl", 60, env=env, timeout_s=300)
    text = (run_dir / "results.jsonl").read_text()
    before = [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]  # a torn tail is not a result
    assert 60 <= len(before) < len(samples)

    resumed = run_ops([*base, "--resume"], env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = read_jsonl(run_dir / "results.jsonl")
    assert Counter(r["id"] for r in after) == Counter(s["id"] for s in samples)  # every id exactly once
    assert after[: len(before)] == before
    trajectories = run_dir / "trajectories"
    assert sorted(p.name for p in trajectories.iterdir()) == sorted(f"{s['id']}.json" for s in samples)
    for record in after:
        assert json.loads((run_dir / record["trajectory"]).read_text())["id"] == record["id"]

    cais = json.loads((run_dir / "scores.json").read_text())["cais"]
    assert cais["n"] == len(samples) and cais["judged"] == len(samples)
    assert (cais["accuracy_pct"], cais["half_width_pct"]) == (want["accuracy_pct"], want["half_width_pct"])
    assert abs(cais["calibration_error"] - want["calibration_error"]) < 1e-9
    assert (f"HLE (CAIS judge): accuracy {want['accuracy_pct']}% +/- {want['half_width_pct']}% | n = "
            f"{len(samples)}; calibration error: {cais['calibration_error']:g}") in (run_dir / "eval.log").read_text()
    assert f"hle: accuracy: orchestrator {want['accuracy_pct']:.1f}% ± {want['half_width_pct']:.1f} " \
        f"(n={len(samples)})" in resumed.stdout  # the CAIS judge's own half-width
    assert all(r["judge"]["confidence"] == (90 if r["correct"] else 20) for r in after)


def test_frames_prefers_wiki_retrieval_and_offers_search_until_documents(tmp_path: Path, stack: Stack) -> None:
    samples = read_jsonl(FRAMES)
    want = expected(samples)
    topology, env = _fleet(tmp_path, stack, wiki=True)
    fallback_before = len(stack.retrieval.requests)
    wiki_before = len(stack.wiki.requests)
    run_dir = tmp_path / "run"
    _eval("frames", [*topology, "--run-dir", str(run_dir)], env)
    scores = json.loads((run_dir / "scores.json").read_text())
    assert (scores["correct"], scores["units"], scores["tool_calls"]) == (want["correct"], len(samples),
                                                                         dict(sorted(want["tools"].items())))
    sent = [body for _, body in stack.wiki.posts("/retrieve")][wiki_before:]
    assert len(stack.retrieval.requests) == fallback_before  # wiki_retrieval answered: retrieval never asked
    assert len(sent) == want["tools"]["search"]
    ids = {s["id"]: s["question"] for s in samples}
    assert all(b["topk"] == 150 and b["eid"] in ids and b["queries"] == [ids[b["eid"]][:390]] for b in sent)
    for record in read_jsonl(run_dir / "results.jsonl"):
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        documents = False
        for log in trajectory["rounds"]:
            assert ("search" in log["offered"]) == (not documents)
            documents = documents or log.get("documents_added", 0) > 0
        assert trajectory["rounds"][-1]["tool"]["messages"].endswith("</answer>.")


def test_every_prompt_fits_its_budget_by_the_sims_tokenizer(tmp_path: Path, stack: Stack) -> None:
    budgets = {"orchestrator_context": 700, "orchestrator_code": 60, "expert_context": 500, "expert_code": 50,
               "answer_code": 40}
    with RecordingProxy(stack.orchestrator.base_url) as orch, RecordingProxy(stack.experts.base_url) as experts:
        orchestrator = SimServer("sim/orchestrator", port=int(orch.url.rsplit(":", 1)[1]))
        expert = SimServer("sim/experts", port=int(experts.url.rsplit(":", 1)[1]))
        topology, env = _fleet(tmp_path, stack, orchestrator=orchestrator, experts=expert)
        run_dir = tmp_path / "run"
        _eval("hle", [*topology, "--run-dir", str(run_dir), "--limit", "40", "--max-rounds", "6",
                      *[f"--budget={k}={v}" for k, v in budgets.items()]], env)
        prompts = [body for _, body in orch.posts("/v1/chat/completions")]
        expert_bodies = [body for _, body in experts.posts("/v1/chat/completions")]
        expert_prompts = [body["messages"][-1]["content"] for body in expert_bodies]
        tokenized = orch.posts("/tokenize")
    assert tokenized, "the budgets were counted by the replica's /tokenize"
    # the reference's sampling per call, with the role's request_defaults (Qwen3 non-thinking) merged in
    assert all(b["temperature"] == 1.0 and b["max_tokens"] == 12000 and len(b["tools"]) == 3
               and "tool_choice" not in b for b in prompts)
    assert all(b["temperature"] == 0.2 and b["max_tokens"] == 8000
               and b["chat_template_kwargs"] == {"enable_thinking": False} for b in expert_bodies)
    cut = 0
    for body in prompts:
        text = body["messages"][1]["content"]
        question = agent_rules.orchestrator_question(text)
        context = text.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
        limit = budgets["orchestrator_context"] - len(tokens.encode(question))
        body_text = context.removeprefix("Documents:\n")
        assert len(tokens.encode(body_text)) <= max(limit, budgets["orchestrator_code"] + 1)
        cut += "Doc 1:" not in context and "Doc " in context
    assert cut > 0  # some contexts lost their oldest documents to the budget
    assert expert_prompts
    for prompt in expert_prompts:
        question = agent_rules.expert_question(prompt)
        marker = "\n\nProblem:\n" if "\n\nProblem:\n" in prompt else "\n\nQuestion: "
        context = prompt.rpartition(marker)[0]
        limit = budgets["expert_context"] - len(tokens.encode(question))
        assert len(tokens.encode(context.removeprefix("Documents:\n"))) <= limit


def test_boxed_answers_are_extracted_from_the_last_box(tmp_path: Path, stack: Stack) -> None:
    samples = text_samples(HLE)[:30]
    want = expected(samples)
    topology, env = _fleet(tmp_path, stack)
    run_dir = tmp_path / "run"
    out = _eval("hle", [*topology, "--run-dir", str(run_dir), "--limit", "30", "--answer-format", "boxed", "-v"], env)
    assert "answer-1      -> answer (sim/experts), answers in boxed format" in out.stdout  # -v: on the console too
    assert json.loads((run_dir / "scores.json").read_text())["correct"] == want["correct"]
    record = read_jsonl(run_dir / "results.jsonl")[0]
    answer = json.loads((run_dir / record["trajectory"]).read_text())["rounds"][-1]["tool"]
    assert answer["messages"][0]["role"] == "system" and "\\boxed{}" in answer["messages"][0]["content"]
    assert answer["response"].endswith(f"\\boxed{{{record['pred']}}}.")


def test_retrieval_that_stays_down_under_continue_leaves_rounds_without_documents(tmp_path: Path,
                                                                                  stack: Stack) -> None:
    dead = free_port()
    home = tmp_path / "ops"
    topology = standard_fleet(home, stack.orchestrator, stack.experts, stack.judge, {"retrieval": f"127.0.0.1:{dead}"})
    samples = [s for s in text_samples(HLE) if "search" in agent_rules.plan(s["question"])][:6]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in samples))
    run_dir = tmp_path / "run"
    _eval("hle", ["--topology", str(topology), "--dataset", str(data), "--run-dir", str(run_dir), "--max-rounds", "4",
                  "--retrieval-attempts", "2", "--retrieval-backoff", "0.01", "--on-retrieval-error", "continue"],
          {"OPS_HOME": str(home)})
    for record in read_jsonl(run_dir / "results.jsonl"):
        assert (record["status"], record["answered"], record["correct"], record["rounds"]) == ("ok", False, False, 4)
        searches = [c for c in record["calls"] if c["tool"] == "search"]
        assert searches and all(c["retrieval_error"] and c["documents"] == 0 for c in searches)
        trajectory = json.loads((run_dir / record["trajectory"]).read_text())
        turns = [r["tool"] for r in trajectory["rounds"] if r["tool"]["tool"] == "search"]
        assert all(t["_search_backend"] == "retrieval_unavailable" and t["_retrieval_retries"] == 2 and
                   f"127.0.0.1:{dead}" in t["_retrieval_error"] for t in turns)
