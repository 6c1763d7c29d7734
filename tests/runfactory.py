"""Synthetic run dirs for the analysis tests: results.jsonl, profile.jsonl, run.json (with a real
manifest built by orchestra_ops.runner.manifest), scores.json, written as `ops eval` writes them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.client.chat import CallEvent
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.fleet.endpoints import read_endpoints
from orchestra_ops.runner.manifest import manifest_fields
from orchestra_ops.runner.profile import ToolEvent
from orchestra_ops.runner.templates import read_template

T0 = 1_700_000_000.0


def model_event(role: str, start: float, latency: float, *, model: str | None = None, status: str = "ok",
                prompt_tokens: int | None = 100, completion_tokens: int | None = 10, task: Any = None,
                attempts: int = 1, typed: bool = True) -> dict[str, Any]:
    """A model_call line exactly as the engine writes it (`typed=False`: as written before events had a type)."""
    event = CallEvent(role=role, model=model or f"{role}-model", replica="127.0.0.1:9", start=T0 + start,
                      latency_s=latency, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                      attempts=attempts, status=status, error=None if status == "ok" else f"{status} happened",
                      task=task).to_json()
    if not typed:
        del event["type"], event["task"]
    return event


def tool_event(tool: str, start: float, latency: float, *, expert: float | None, parts: Mapping[str, float],
               task: Any = None, status: str = "ok", model: str = "expert") -> dict[str, Any]:
    """A tool_call line exactly as a suite records it through its task context."""
    return ToolEvent(task=task, tool=tool, start=T0 + start, latency_s=latency, status=status, round=1,
                     alias=f"{tool}-1", target=tool, model=model, expert_s=expert, parts=dict(parts)).to_json()


def write_run(run_dir: Path, *, results: Iterable[Mapping[str, Any]] = (), events: Iterable[Mapping[str, Any]] = (),
              run_info: Mapping[str, Any] | None = None, scores: Mapping[str, Any] | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    (run_dir / "profile.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    if run_info is not None:
        (run_dir / "run.json").write_text(json.dumps(run_info, indent=2))
    if scores is not None:
        (run_dir / "scores.json").write_text(json.dumps(scores))
    return run_dir


def manifest_run_info(folder: Path, *, ids: Sequence[Any], templates: Mapping[str, str],
                      judge_defaults: Mapping[str, Any] | None = None, suite: str = "hle",
                      models: Sequence[str] = ("m",), dataset_text: str | None = None,
                      suite_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """run.json as `ops eval` writes it (the engine's fields plus runner.manifest's), from real files
    written under `folder`: a dataset, the templates, an endpoints file with `models` and a judge."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "data.jsonl"
    dataset.write_text(dataset_text if dataset_text is not None
                       else "".join(json.dumps({"id": i, "question": f"q{i}"}) + "\n" for i in ids))
    loaded = {}
    for name, text in templates.items():
        (folder / f"{name}.txt").write_text(text)
        loaded[name] = read_template(name, folder / f"{name}.txt")
    endpoints = folder / "model_config.json"
    keys = [*models, "judge"]
    endpoints.write_text(json.dumps({m: [{"ip_addr": "127.0.0.1", "port": 9000 + n}] for n, m in enumerate(keys)}))
    routing = from_model_config(read_endpoints(endpoints), source=str(endpoints), name="test")
    if judge_defaults is not None:  # the judge's request defaults, as a topology would declare them
        targets = dict(routing.targets)
        targets["judge"] = dataclasses.replace(targets["judge"], request_defaults=dict(judge_defaults))
        routing = dataclasses.replace(routing, targets=targets)
    options = dict(suite_options or {"max_rounds": 5})
    unit_ids = list(ids)
    return {"suite": suite, "dataset": str(dataset), "models": list(models), "suite_options": options,
            "templates": {n: t.to_json() for n, t in loaded.items()},
            **manifest_fields(dataset=dataset, dataset_sha256=None, unit_ids=unit_ids, suite=object(),
                              routing=routing, names=[*models, "judge"], suite_options=options,
                              cli={"concurrency": 8}, mode="new run")}
