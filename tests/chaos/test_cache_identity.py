"""The response cache keys on what a name stands for: a second checkpoint under the name `ft` (a copy of the
first with another lora_alpha) is asked of the model, never answered with the first one's answers; the same
directory again is answered from the cache; a model replaced under the same served name misses too."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestra_ops.client.identity import directory_fingerprint
from tests.adapters import make_adapter
from tests.chaos.adapter_fixtures import BASE, SimFleet, fleet_of

GSM8K = 40  # the bundled gsm8k set


@pytest.fixture
def sim_fleet(tmp_path: Path) -> Iterator[SimFleet]:
    yield from fleet_of(tmp_path)


def scores(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "scores.json").read_text())
    return data


def profile_hits(run_dir: Path) -> dict[str, tuple[int, int]]:
    """model -> (calls answered from the cache, calls made to a replica)."""
    out: dict[str, list[int]] = {}
    for line in (run_dir / "profile.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "model_call":
            counts = out.setdefault(event["model"], [0, 0])
            counts[0 if event.get("cache") == "hit" else 1] += 1
    return {model: (hits, calls) for model, (hits, calls) in out.items()}


def test_a_second_checkpoint_under_the_same_name_is_asked_of_the_model(sim_fleet: SimFleet, tmp_path: Path) -> None:
    topology = sim_fleet.topology()
    dir_a = make_adapter(tmp_path / "ckpt-200")
    dir_b = tmp_path / "ckpt-400"
    shutil.copytree(dir_a, dir_b)
    config = json.loads((dir_b / "adapter_config.json").read_text())
    config["lora_alpha"] = 64
    (dir_b / "adapter_config.json").write_text(json.dumps(config))
    cache = tmp_path / "C.sqlite"

    def posttrain(adapter: Path, run_dir: str, *extra: str) -> Any:
        proc = sim_fleet.ops("posttrain", "--topology", str(topology), "--model", "answer", "--adapter",
                             f"ft={adapter}", "--datasets", "gsm8k", "--cache-file", str(cache), "--run-dir",
                             run_dir, "--max-drop", "101", "--json", *extra)
        assert proc.returncode == 0, proc.stderr  # the gate is not what this is about: no drop exceeds 101 points
        return json.loads(proc.stdout)

    first = posttrain(dir_a, "R1", "--up")
    assert first["cache"] == {"hits": 0, "calls": 2 * GSM8K, "model_calls": 2 * GSM8K}
    before = sum(sim_fleet.requests())

    second = posttrain(dir_b, "R2")
    # the base model is the same model: its 40 answers replay; the new checkpoint's 40 are asked of it
    assert second["cache"] == {"hits": GSM8K, "calls": 2 * GSM8K, "model_calls": GSM8K}
    assert profile_hits(tmp_path / "R2") == {"answer": (GSM8K, 0), "ft": (0, GSM8K)}
    assert sum(sim_fleet.requests()) == before + GSM8K  # those 40 reached the replicas
    identities = json.loads((tmp_path / "R2" / "run.json").read_text())["cache"]["identities"]
    ft = {"path": str(dir_b.resolve()), "fingerprint": directory_fingerprint(dir_b)}
    assert identities["ft"] == {"served": "ft", "revision": None, "declared": ft, "roots": [ft]}
    base = {"path": BASE, "fingerprint": None}
    assert identities["answer"] == {"served": BASE, "revision": None, "declared": base, "roots": [base]}

    third = posttrain(dir_a, "R3")  # the first checkpoint again, same files: every answer replays
    assert third["cache"] == {"hits": 2 * GSM8K, "calls": 2 * GSM8K, "model_calls": 0}
    assert sum(sim_fleet.requests()) == before + GSM8K
    assert third["datasets"]["gsm8k"] == first["datasets"]["gsm8k"]


def test_a_model_replaced_under_the_same_served_name_misses(sim_fleet: SimFleet, tmp_path: Path) -> None:
    sim_fleet.topology(replicas=1, served_model_name="answer-model")
    sim_fleet.up()
    cache = tmp_path / "C.sqlite"

    def gsm8k(run_dir: str) -> dict[str, Any]:
        proc = sim_fleet.ops("eval", "gsm8k", "--model", "answer", "--cache-file", str(cache), "--run-dir",
                             run_dir, "--no-analyze", "--limit", "5")
        assert proc.returncode == 0, proc.stderr
        return scores(sim_fleet.cwd / run_dir)

    assert gsm8k("one")["cache"] == {"hits": 0, "calls": 5, "model_calls": 5}
    assert gsm8k("two")["cache"] == {"hits": 5, "calls": 5, "model_calls": 0}  # nothing changed: replayed
    sim_fleet.topology(replicas=1, served_model_name="answer-model", model="sim/other")
    sim_fleet.up("--replace")
    assert gsm8k("three")["cache"] == {"hits": 0, "calls": 5, "model_calls": 5}
