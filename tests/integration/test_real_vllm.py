"""`ops` end to end against real vLLM: the CPU build (`.venv-vllm`, `make setup`) serving the tiny random-weight
model (`make tiny-model`), two replicas brought up ONCE for the module by `ops up` of a copy of
topologies/vllm_cpu.yaml (free ports, absolute paths, OPS_HOME in a tmp dir, plus a real retrieval service for
hle). The tests run in file order, each leaning on what vLLM really answers (../shared/reference/vllm-cpu.md):

    up (READY = serving) -> endpoints file + the `openai` client -> health shows /metrics load -> status shows
    the vLLM version -> eval chat / gsm8k -> lora load, ft answers differently, unload -> hle with forced tool
    calls -> a prompt over max_model_len is one 400, never retried -> SIGKILL of an API server orphans its
    EngineCore and `ops down` still clears the group and the ports -> a bad engine_args flag fails `ops up`
    before launch with vLLM's own message (and `ops plan --check` on a good and a bad topology).

The tiny model answers garbage: the assertions are on ids, statuses, counts and shapes, never on accuracy.
Everything started is stopped by pid (the fixture's finalizer), whatever a test left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

from orchestra_ops.core import procs
from tests.helpers import REPO, free_port, free_port_block, kill_tree, run_ops, still_ours
from tests.integration.retrieval_fixtures import bundled_index

VLLM = REPO / ".venv-vllm" / "bin" / "vllm"
MODEL = REPO / ".tiny-model" / "model"
ADAPTER = REPO / ".tiny-model" / "ft"
CORPUS = REPO / "evals" / "agent" / "data" / "agent_corpus.jsonl"
NAME = "realvllm"
VERSION = "0.32.0+cpu"  # what `make setup` installs (vllm-cpu 0.32.0)
MAX_MODEL_LEN = 2048  # topologies/vllm_cpu.yaml

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.retrieval,
    # one fleet for the module: its start (two vLLM imports on a loaded 2-core box) is paid by the first test;
    # a hang guard, not a timing claim
    pytest.mark.timeout(900),
    pytest.mark.skipif(not (os.access(VLLM, os.X_OK) and (MODEL / "config.json").is_file()),
                       reason="needs .venv-vllm/bin/vllm and .tiny-model/model (make setup tiny-model)"),
]


@dataclass
class Fleet:
    cwd: Path
    env: dict[str, str]
    topology: Path
    ports: list[int]  # the two vLLM replicas
    retrieval_port: int
    up: subprocess.CompletedProcess[str] | None = None  # the module's `ops up`, asserted by the first test

    def ops(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return run_ops(list(args), env=self.env, cwd=self.cwd, timeout=timeout)

    def state(self, name: str = NAME) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((Path(self.env["OPS_HOME"]) / name / "state.json").read_text())
        return data

    def url(self, port: int) -> str:
        return f"http://127.0.0.1:{port}"


def write_topology(path: Path, name: str, port: int, retrieval: tuple[int, Path] | None,
                   extra_engine_args: tuple[str, ...] = ()) -> Path:
    """topologies/vllm_cpu.yaml with absolute paths, the given ports and name (and a retrieval service)."""
    doc = yaml.safe_load((REPO / "topologies" / "vllm_cpu.yaml").read_text())
    doc["name"] = name
    doc["nodes"]["cpu"]["vllm_command"] = [str(VLLM)]
    model = doc["models"]["tiny"]
    model.update(model=str(MODEL), tokenizer=str(MODEL), port=port)
    model["engine_args"] = [*model["engine_args"], *extra_engine_args]
    doc.pop("services", None)  # the bundled one builds its index from a corpus relative to the repo root
    if retrieval is not None:
        doc["services"] = {"retrieval": {"kind": "retrieval", "node": "cpu", "port": retrieval[0],
                                         "index_dir": str(retrieval[1])}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _group(pgid: int) -> list[psutil.Process]:
    """Every live process in process group `pgid` (read from the kernel, not from ops)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def _stop_leftovers(fleet: Fleet, name: str) -> None:
    """After `ops down`: anything of ours still alive (a record, or its group's orphans) is killed by pid."""
    state_file = Path(fleet.env["OPS_HOME"]) / name / "state.json"
    if not state_file.exists():
        return
    fleet.ops("down", name, "--timeout", "15", timeout=120)
    for record in json.loads(state_file.read_text()).get("processes", []):
        if still_ours(record):
            kill_tree(record["pid"])
        if record.get("pgid") and record.get("create_time"):
            for proc in procs.group_members(record["pgid"], record.get("sid"), record["create_time"]):
                kill_tree(proc.pid)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("realvllm")
    env = {"OPS_HOME": str(work / "ops-home")}
    index = bundled_index(tmp_path_factory, CORPUS)
    first, retrieval_port = free_port_block(2), free_port()
    topology = write_topology(work / f"{NAME}.yaml", NAME, first, (retrieval_port, index))
    state = Fleet(cwd=work, env=env, topology=topology, ports=[first, first + 1], retrieval_port=retrieval_port)
    state.up = state.ops("up", str(topology))
    try:
        yield state
    finally:
        _stop_leftovers(state, NAME)


def _chat(port: int, model: str, content: str, **params: Any) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": content}], **params}
    return httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=120)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ---- up, endpoints, health, status ----------------------------------------------------------------


def test_up_brings_both_replicas_to_serving(fleet: Fleet) -> None:
    up = fleet.up
    assert up is not None
    assert up.returncode == 0, up.stdout + up.stderr
    assert "3 processes ready" in up.stdout + up.stderr
    state = fleet.state()
    assert state["status"] == "up"
    records = {r["name"]: r for r in state["processes"]}
    assert sorted(records) == ["retrieval", "tiny/0", "tiny/1"]
    # each CPU replica on its own core; the KV cache size is the flag's, never VLLM_CPU_KVCACHE_SPACE
    assert [records[f"tiny/{i}"]["env"]["VLLM_CPU_OMP_THREADS_BIND"] for i in (0, 1)] == ["0", "1"]
    assert all("VLLM_CPU_KVCACHE_SPACE" not in records[f"tiny/{i}"]["env"] for i in (0, 1))
    health = fleet.ops("health", "--json")
    assert health.returncode == 0, health.stderr
    states = {p["name"]: p["state"] for p in json.loads(health.stdout)["processes"]}
    assert states == {"tiny/0": "READY", "tiny/1": "READY", "retrieval": "READY"}
    # READY means serving: what the probe asked, asked again by hand
    for port in fleet.ports:
        health_answer = httpx.get(f"{fleet.url(port)}/health", timeout=10)
        assert (health_answer.status_code, health_answer.text) == (200, "")
        models = httpx.get(f"{fleet.url(port)}/v1/models", timeout=10).json()
        assert [(m["id"], m["parent"], m["max_model_len"]) for m in models["data"]] == [("tiny", None, MAX_MODEL_LEN)]
        one = _chat(port, "tiny", "ping", max_tokens=1)
        assert one.status_code == 200
        assert one.json()["usage"]["completion_tokens"] == 1


def test_endpoints_file_answers_the_openai_client(fleet: Fleet) -> None:
    from openai import OpenAI

    endpoints_file = Path(fleet.state()["endpoints_file"])
    endpoints = json.loads(endpoints_file.read_text())
    assert endpoints["tiny"] == [{"ip_addr": "127.0.0.1", "port": port} for port in fleet.ports]
    assert endpoints["retrieval"] == [{"ip_addr": "127.0.0.1", "port": fleet.retrieval_port}]
    for entry in endpoints["tiny"]:
        client = OpenAI(base_url=f"http://{entry['ip_addr']}:{entry['port']}/v1", api_key="unused", max_retries=0)
        reply = client.chat.completions.create(model="tiny", max_tokens=4, temperature=0,
                                               messages=[{"role": "user", "content": "hello"}])
        assert reply.model == "tiny"
        assert reply.choices[0].finish_reason == "length"
        assert reply.usage is not None and reply.usage.completion_tokens == 4
        assert isinstance(reply.choices[0].message.content, str)


def _metric(port: int, name: str) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + "{")]
    assert len(values) == 1, f"{name}: {values}"
    return values[0]


def test_health_shows_the_real_metrics_load(fleet: Fleet) -> None:
    """ops reads vllm:num_requests_running, vllm:num_requests_waiting and vllm:kv_cache_usage_perc (0-1)."""
    idle = json.loads(fleet.ops("health", "--json").stdout)["processes"]
    for probe in (p for p in idle if p["name"].startswith("tiny/")):
        assert (probe["running"], probe["waiting"], probe["kv_cache"]) == (0.0, 0.0, 0.0)
    stop = threading.Event()
    statuses: list[int] = []

    def keep_busy(i: int) -> None:  # 6 workers per replica, each sending long requests until told to stop
        while not stop.is_set():
            statuses.append(_chat(fleet.ports[i % 2], "tiny", f"request {i}: the weather in paris",
                                  max_tokens=200, ignore_eos=True, temperature=0).status_code)

    workers = [threading.Thread(target=keep_busy, args=(i,)) for i in range(12)]
    for worker in workers:
        worker.start()
    seen: list[dict[str, Any]] = []
    try:
        for _ in range(30):  # until ops health catches requests in flight (the first poll, as a rule)
            report = fleet.ops("health", "--json")
            assert report.returncode == 0, report.stderr
            seen = [p for p in json.loads(report.stdout)["processes"]
                    if p["name"].startswith("tiny/") and (p["running"] or 0) > 0]
            if seen:
                break
    finally:
        stop.set()
        for worker in workers:
            worker.join()
    assert statuses and set(statuses) == {200}
    assert seen, "ops health never saw a running request while 12 were in flight"
    for probe in seen:
        assert probe["running"] + probe["waiting"] <= 6
        assert 0.0 < probe["kv_cache"] < 1.0  # a fraction, as vLLM reports it (64 MiB cache: a few %)
    # and the gauges ops reads are the ones vLLM exposes, back to 0 once idle (vLLM refreshes them each engine
    # step: a few polls; a hang guard, not a timing claim)
    for port in fleet.ports:
        for _ in range(100):
            idle_now = (_metric(port, "vllm:num_requests_running"), _metric(port, "vllm:kv_cache_usage_perc"))
            if idle_now == (0.0, 0.0):
                break
            time.sleep(0.1)
        assert idle_now == (0.0, 0.0)
    table = fleet.ops("health")
    assert table.returncode == 0
    assert table.stdout.count("READY") == 3


def test_status_shows_the_vllm_version(fleet: Fleet) -> None:
    status = fleet.ops("status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["vllm_versions"] == {"cpu": VERSION}
    assert fleet.state()["engine_versions"] == {"cpu": VERSION}
    text = fleet.ops("status")
    assert VERSION in text.stdout + text.stderr


# ---- evals -----------------------------------------------------------------------------------------


def test_eval_chat_and_gsm8k_finish_every_id_once(fleet: Fleet) -> None:
    dataset = fleet.cwd / "questions.jsonl"
    ids = [f"q{i}" for i in range(8)]
    dataset.write_text("".join(json.dumps({"id": i, "prompt": f"{i}: what limits the KV cache?",
                                           "params": {"max_tokens": 8}}) + "\n" for i in ids))
    chat = fleet.ops("eval", "chat", "--dataset", str(dataset), "--model", "tiny", "--topology", NAME,
                     "--no-analyze", "--run-dir", "runs/chat")
    assert chat.returncode == 0, chat.stdout + chat.stderr
    records = _read_jsonl(fleet.cwd / "runs/chat/results.jsonl")
    assert sorted(r["id"] for r in records) == ids
    assert {r["status"] for r in records} == {"ok"}
    assert {r["usage"]["completion_tokens"] for r in records} == {8}
    assert {r["replica"] for r in records} == {f"127.0.0.1:{port}" for port in fleet.ports}
    scores = json.loads((fleet.cwd / "runs/chat/scores.json").read_text())
    usage = scores.pop("usage")  # what vLLM reported for every call, per role (no pricing in this topology)
    assert scores == {"suite": "chat", "model": "tiny", "units": 8, "ok": 8, "failed": 0, "failed_by_type": {},
                      "missing": 0, "headline_scores": {"metric": "answered", "scores": [], "differences": [],
                                                        "note": "8/8 answered, not graded"}}
    row = {"calls": 8, "prompt_tokens": sum(r["usage"]["prompt_tokens"] for r in records), "completion_tokens": 64,
           "cost_usd": None, "cache_hits": 0, "cache_hit_prompt_tokens": 0, "cache_hit_completion_tokens": 0}
    assert row["prompt_tokens"] > 8 * 8 and usage == {"by_role": {"tiny": row}, "total": row}

    gsm8k = fleet.ops("eval", "gsm8k", "--model", "tiny", "--topology", NAME, "--limit", "4", "--max-tokens", "16",
                      "--no-analyze", "--run-dir", "runs/gsm8k")
    assert gsm8k.returncode == 0, gsm8k.stdout + gsm8k.stderr
    records = _read_jsonl(fleet.cwd / "runs/gsm8k/results.jsonl")
    assert sorted(r["id"] for r in records) == [f"gsm8k/{i}@tiny" for i in range(4)]
    assert {r["status"] for r in records} == {"ok"}
    scores = json.loads((fleet.cwd / "runs/gsm8k/scores.json").read_text())
    assert scores["counts"] == {"units": 4, "ok": 4, "failed": 0, "failed_by_type": {}, "missing": 0}
    assert scores["datasets"]["gsm8k"]["tiny"]["n"] == 4


def test_lora_load_serves_a_different_model_then_unload(fleet: Fleet) -> None:
    loaded = fleet.ops("lora", "load", "ft", str(ADAPTER), "--model", "tiny", "--json")
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    report = json.loads(loaded.stdout)
    assert [o["status"] for o in report["replicas"]] == [200, 200]
    prompt = "tell me about the weather in paris"
    for port in fleet.ports:
        cards = httpx.get(f"{fleet.url(port)}/v1/models", timeout=10).json()["data"]
        assert {(c["id"], c["parent"]) for c in cards} == {("tiny", None), ("ft", "tiny")}
        base = _chat(port, "tiny", prompt, max_tokens=16, temperature=0).json()
        tuned = _chat(port, "ft", prompt, max_tokens=16, temperature=0).json()
        assert (base["model"], tuned["model"]) == ("tiny", "ft")
        assert base["choices"][0]["message"]["content"] != tuned["choices"][0]["message"]["content"]
    endpoints = json.loads(Path(fleet.state()["endpoints_file"]).read_text())
    assert endpoints["ft"] == endpoints["tiny"]

    unloaded = fleet.ops("lora", "unload", "ft", "--json")
    assert unloaded.returncode == 0, unloaded.stdout + unloaded.stderr
    for port in fleet.ports:
        cards = httpx.get(f"{fleet.url(port)}/v1/models", timeout=10).json()["data"]
        assert [c["id"] for c in cards] == ["tiny"]
        gone = _chat(port, "ft", prompt, max_tokens=4)
        assert gone.status_code == 404
        assert "The model `ft` does not exist" in gone.json()["error"]["message"]
    assert "ft" not in json.loads(Path(fleet.state()["endpoints_file"]).read_text())


# The orchestrator's calls forced to one tool call each (recipe §5.1: VLLM_ENFORCE_STRICT_TOOL_CALLING=0 and
# xgrammar without whitespace in the topology, tool_choice required + parallel_tool_calls false here, enum
# arguments in the tools, max_tokens >= 40); every context budget small enough that tools + prompt fit 2048.
HLE_ROUNDS = 2
HLE_ARGS = [
    "--max-rounds", str(HLE_ROUNDS),
    "--sampling", "orchestrator.tool_choice=required", "--sampling", "orchestrator.parallel_tool_calls=false",
    "--sampling", "orchestrator.max_tokens=64", "--sampling", "orchestrator.temperature=0",
    "--sampling", "search.max_tokens=16", "--sampling", "reasoner.max_tokens=32",
    "--sampling", "answer.max_tokens=16", "--sampling", "judge.max_completion_tokens=16",
    "--budget", "orchestrator_context=64", "--budget", "orchestrator_code=64", "--budget", "expert_context=256",
    "--budget", "expert_code=64", "--budget", "answer_code=64",
]


def test_hle_with_forced_tool_calls_finishes(fleet: Fleet) -> None:
    run = fleet.ops("eval", "hle", "--topology", NAME, "--limit", "4", "--no-analyze", "--run-dir", "runs/hle",
                    *HLE_ARGS)
    assert run.returncode == 0, run.stdout + run.stderr
    dataset = _read_jsonl(REPO / "evals" / "agent" / "data" / "hle_synthetic.jsonl")[:4]
    text_ids = sorted(s["id"] for s in dataset if not s.get("image"))
    records = _read_jsonl(fleet.cwd / "runs/hle/results.jsonl")
    assert sorted(r["id"] for r in records) == text_ids
    for record in records:
        assert record["status"] == "ok", record
        assert record["answered"] or record["rounds"] == HLE_ROUNDS, record
        assert record["invalid"] == {}, record  # every orchestrator reply was one valid tool call
        assert len(record["calls"]) == record["rounds"], record
        assert {c["status"] for c in record["calls"]} == {"ok"}, record
    scores = json.loads((fleet.cwd / "runs/hle/scores.json").read_text())
    assert (scores["units"], scores["ok"], scores["errors"], scores["grader_errors"], scores["missing"]) == \
        (len(text_ids), len(text_ids), 0, 0, 0)
    assert scores["answered"] + scores["no_answer"] == len(text_ids)
    calls = [e for e in _read_jsonl(fleet.cwd / "runs/hle/profile.jsonl")
             if e.get("type") == "model_call" and e["role"] == "orchestrator"]
    assert len(calls) == sum(r["rounds"] for r in records)
    assert {(c["status"], c["attempts"]) for c in calls} == {("ok", 1)}
    assert all(c["prompt_tokens"] + 64 <= MAX_MODEL_LEN for c in calls)


# ---- failures ---------------------------------------------------------------------------------------


def test_prompt_over_max_model_len_is_one_400_never_retried(fleet: Fleet) -> None:
    # ~5,500 characters the tiny tokenizer cuts into ~5,300 tokens: ops estimates ~1,400 (4 chars a token) and
    # sends it; vLLM refuses it (its token check, not the character pre-check: under 16 characters a token)
    text = " ".join(f"{(i * 7919) % 10007:x}" for i in range(1200))
    counted = httpx.post(f"{fleet.url(fleet.ports[0])}/tokenize", json={"model": "tiny", "prompt": text},
                         timeout=30).json()["count"]
    assert counted > MAX_MODEL_LEN and len(text) < 16 * MAX_MODEL_LEN
    dataset = fleet.cwd / "long.jsonl"
    dataset.write_text(json.dumps({"id": "long", "prompt": text, "params": {"max_tokens": 4}}) + "\n"
                       + json.dumps({"id": "short", "prompt": "hello", "params": {"max_tokens": 4}}) + "\n")
    run = fleet.ops("eval", "chat", "--dataset", str(dataset), "--model", "tiny", "--topology", NAME,
                    "--max-retries", "3", "--no-analyze", "--run-dir", "runs/long")
    assert run.returncode == 0, run.stdout + run.stderr  # the eval ran; the failure is the unit's, recorded
    assert "answered 1 of 2 prompts (1 failed, 0 without a result)" in (fleet.cwd / "runs/long/eval.log").read_text()
    records = {r["id"]: r for r in _read_jsonl(fleet.cwd / "runs/long/results.jsonl")}
    assert sorted(records) == ["long", "short"]
    assert records["short"]["status"] == "ok"
    failed = records["long"]
    assert (failed["status"], failed["error_type"]) == ("error", "context_length")
    assert "answered 400" in failed["error"]
    assert f"maximum context length is {MAX_MODEL_LEN} tokens" in failed["error"]
    assert "gave up after" not in failed["error"]
    calls = [e for e in _read_jsonl(fleet.cwd / "runs/long/profile.jsonl")
             if e.get("type", "model_call") == "model_call" and e["task"] == "long"]
    assert [(c["status"], c["attempts"]) for c in calls] == [("context_length", 1)]


def test_sigkill_of_an_api_server_orphans_its_engine_and_down_still_clears_all(fleet: Fleet) -> None:
    records = fleet.state()["processes"]
    victim = next(r for r in records if r["name"] == "tiny/0")
    assert victim["pgid"] == victim["pid"]
    before = _group(victim["pgid"])
    assert len(before) >= 3  # the API server, its EngineCore (and Worker), the resource tracker
    os.kill(victim["pid"], signal.SIGKILL)
    for _ in range(300):  # gone (or a zombie) within moments; a hang guard, not a timing claim
        if victim["pid"] not in {p.pid for p in _group(victim["pgid"])}:
            break
        time.sleep(0.1)
    time.sleep(2)  # give EngineCore time to notice (it does not: vLLM leaves it running)
    orphans = _group(victim["pgid"])
    assert victim["pid"] not in {p.pid for p in orphans}
    titles = [" ".join(p.cmdline()) for p in orphans]
    assert any(title.startswith("VLLM::EngineCore") for title in titles), titles
    assert all(p.ppid() != victim["pid"] for p in orphans)  # reparented

    down = fleet.ops("down", NAME)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "no process or port left" in down.stdout + down.stderr
    for record in records:
        assert _group(record["pgid"]) == [], record["name"]
    assert procs.listeners([*fleet.ports, fleet.retrieval_port]) == {}
    assert fleet.state()["status"] == "down"


def test_bad_engine_arg_fails_before_launch_with_vllms_message(fleet: Fleet, tmp_path: Path) -> None:
    port = free_port_block(2)
    bad = write_topology(tmp_path / "bad.yaml", "realvllm-bad", port, None, ("--dtype", "float13"))
    lines = bad.read_text().splitlines()
    # the topology's own `--dtype float32`, then the override vLLM refuses: ops names the override's line
    line = [i for i, text in enumerate(lines, 1) if text.strip() == "- --dtype"][-1]
    assert lines[line].strip() == "- float13"
    up = fleet.ops("up", str(bad))
    assert up.returncode == 2, up.stdout + up.stderr
    message = up.stderr
    assert f"{bad}:{line}" in message
    assert "vLLM 0.32.0+cpu on node cpu refuses the command of tiny/0" in message
    assert "argument --dtype: invalid choice: 'float13'" in message
    assert "Traceback" not in message
    home = Path(fleet.env["OPS_HOME"]) / "realvllm-bad"
    assert not (home / "state.json").exists()
    assert procs.listeners([port, port + 1]) == {}

    planned = fleet.ops("plan", "--check", str(bad))
    assert planned.returncode == 2
    assert f"{bad}:{line}" in planned.stderr and "invalid choice: 'float13'" in planned.stderr
    good = fleet.ops("plan", "--check", str(fleet.topology))
    assert good.returncode == 0, good.stdout + good.stderr
    assert f"tiny/0 on node cpu: vLLM {VERSION} accepts it" in good.stdout + good.stderr
