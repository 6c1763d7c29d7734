"""Errors one step from the fix, each with its exact message, on a real fleet of simulated engines brought up
with `ops up`: a mistyped key, an adapter that is not loaded, a role the suite needs that the topology lacks, a
port one of our own fleets holds, a dataset of other fields than the suite reads. And `ops up` on a fleet that
is already up and serving exits 0."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.integration.lab_fixtures import Lab, lab_fleet


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from lab_fleet(tmp_path_factory)


def test_a_mistyped_key_says_did_you_mean(lab: Lab) -> None:
    body = yaml.safe_load(lab.topology.read_text())
    body["name"] = "typo"
    body["models"]["judge"]["replica"] = body["models"]["judge"].pop("replicas")
    typo = lab.cwd / "typo.yaml"
    typo.write_text(yaml.safe_dump(body, sort_keys=False))
    line = typo.read_text().splitlines().index("    replica: 1") + 1
    result = lab.ops("plan", str(typo))
    assert result.returncode == 2
    assert result.stderr == f"{typo}:{line}: models.judge.replica: unknown key 'replica'; did you mean `replicas`?\n"


def test_up_twice_is_already_up_and_exits_0(lab: Lab) -> None:
    pids = {r["name"]: r["pid"] for r in json.loads((lab.home / "lab" / "state.json").read_text())["processes"]}
    again = lab.ops("up", str(lab.topology))
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[-1] == "lab: already up, 4/4 ready"
    assert again.stdout == f"{lab.home / 'lab' / 'model_config.json'}\n"
    after = {r["name"]: r["pid"] for r in json.loads((lab.home / "lab" / "state.json").read_text())["processes"]}
    assert after == pids  # nothing was started or restarted


def test_up_of_a_changed_file_still_refuses(lab: Lab) -> None:
    body = yaml.safe_load(lab.topology.read_text())
    body["models"]["judge"]["sim"]["latency_ms"] = 2
    changed = lab.cwd / "lab-changed.yaml"
    changed.write_text(yaml.safe_dump(body, sort_keys=False))
    result = lab.ops("up", str(changed))
    assert result.returncode == 3
    assert result.stderr.startswith("error: topology 'lab' is already up (4 of 4 processes alive")


def test_up_of_the_same_file_edited_names_what_changed(lab: Lab) -> None:
    original = lab.topology.read_text()
    body = yaml.safe_load(original)
    body["models"]["judge"]["sim"]["latency_ms"] = 2
    try:
        lab.topology.write_text(yaml.safe_dump(body, sort_keys=False))
        result = lab.ops("up", str(lab.topology))
    finally:
        lab.topology.write_text(original)
    assert result.returncode == 3
    assert result.stderr == (
        f"error: topology 'lab' is up, but lab.yaml changed since `ops up` (judge/0 runs with other settings); "
        f"`ops up --replace {lab.topology}` restarts it as the file says now, or `ops down lab` first\n")
    assert lab.ops("up", str(lab.topology)).returncode == 0  # the file as it was: already up


def test_an_adapter_that_is_not_loaded_points_to_ops_lora_load(lab: Lab) -> None:
    before = lab.requests_served()
    result = lab.ops("eval", "gsm8k", "--topology", str(lab.topology), "--model", "answer", "--model", "ft",
                     "--limit", "2")
    assert result.returncode == 2
    assert result.stderr == (
        f"error: 'ft' is neither a role nor a declared model or provider of {lab.topology} (roles: answer, "
        "candidate, judge, orchestrator; models/providers: answer, judge, orchestrator); nothing undeclared is "
        "ever called; an adapter? load it first: `ops lora load ft DIR --model answer`\n")
    assert lab.requests_served() == before


def test_a_missing_role_names_the_flag_that_sets_it(lab: Lab) -> None:
    result = lab.ops("eval", "tau2", "--topology", str(lab.topology), "--limit", "1")
    assert result.returncode == 2
    assert result.stderr == (
        f"error: no role 'user' (the user simulator) in {lab.topology}: name the model it goes to with --user, "
        "e.g. `--user answer` (roles: answer, candidate, judge, orchestrator; models/providers: orchestrator, "
        "answer, judge), or add `user: MODEL` under roles:\n")
    fixed = lab.ops("eval", "tau2", "--topology", str(lab.topology), "--limit", "1", "--user", "answer",
                    "--run-dir", str(lab.cwd / "runs" / "tau2-user"), "--no-analyze")
    assert fixed.returncode == 0, fixed.stderr


def test_a_port_held_by_our_own_fleet_names_the_topology_and_process(lab: Lab) -> None:
    pid = next(r["pid"] for r in json.loads((lab.home / "lab" / "state.json").read_text())["processes"]
               if r["name"] == "answer/1")
    port = lab.ports["answer"] + 1
    other = lab.cwd / "other.yaml"
    other.write_text(yaml.safe_dump({
        "name": "other", "backend": "local", "defaults": {"ulimit_nofile": 4096, "ready_timeout_s": 60},
        "nodes": {"cpu": {"host": "localhost", "gpus": 0}},
        "models": {"solo": {"model": "sim/solo", "engine": "sim", "node": "cpu", "replicas": 1,
                            "gpus_per_replica": 0, "port": port}}}))
    result = lab.ops("up", str(other))
    assert result.returncode == 3
    assert result.stderr == (
        "error: refusing to launch:\n"
        f"  solo/0: port {port} is held by answer/1 of topology 'lab' (pid {pid}), which `ops up` started; "
        "`ops down lab` stops it\n")
    assert not (lab.home / "other" / "state.json").exists()


def test_a_dataset_without_the_suites_field_exits_2_before_the_first_call(lab: Lab) -> None:
    data = lab.cwd / "questions.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?"}) + "\n" for i in range(3)))
    before = lab.requests_served()
    result = lab.ops("eval", "chat", "--topology", str(lab.topology), "--model", "answer", "--dataset", str(data),
                     "--run-dir", str(lab.cwd / "runs" / "chat-question"))
    assert result.returncode == 2
    assert result.stderr == (
        f"error: {data}: 3 of 3 samples cannot be sent: sample 'q0' has no \"prompt\" (its fields: id, question); "
        "the chat suite reads JSONL lines like {\"id\": \"q1\", \"prompt\": \"What is the capital of France?\"}\n")
    assert lab.requests_served() == before
    assert not (lab.cwd / "runs" / "chat-question" / "results.jsonl").exists()


def test_the_fixed_dataset_runs(lab: Lab, tmp_path: Path) -> None:
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"What is {i} + {i}?"}) + "\n" for i in range(3)))
    result = lab.ops("eval", "chat", "--topology", str(lab.topology), "--model", "answer", "--dataset", str(data),
                     "--run-dir", str(tmp_path / "run"), "--no-analyze")
    assert result.returncode == 0, result.stderr
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 3
