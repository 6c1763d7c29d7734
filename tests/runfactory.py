"""Synthetic run dirs for the analysis tests: results.jsonl, profile.jsonl, run.json (with a real
manifest built by orchestra_ops.runner.manifest), scores.json, written as `ops eval` writes them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.client.routing import from_model_config
from orchestra_ops.endpoints import read_endpoints
from orchestra_ops.runner.manifest import MANIFEST_KEY, build_manifest

T0 = 1_700_000_000.0


def model_event(role: str, start: float, latency: float, *, model: str | None = None, status: str = "ok",
                prompt_tokens: int | None = 100, completion_tokens: int | None = 10, task: Any = None,
                attempts: int = 1, typed: bool = True) -> dict[str, Any]:
    event: dict[str, Any] = {"role": role, "model": model or f"{role}-model", "replica": "127.0.0.1:9",
                             "start": T0 + start, "latency": latency, "prompt_tokens": prompt_tokens,
                             "completion_tokens": completion_tokens, "attempts": attempts, "status": status}
    if typed:
        event["type"] = "model_call"
    if task is not None:
        event["task"] = task
    return event


def tool_event(tool: str, start: float, latency: float, *, expert: float | None, parts: Mapping[str, float],
               task: Any = None, status: str = "ok", model: str = "expert") -> dict[str, Any]:
    return {"type": "tool_call", "tool": tool, "model": model, "start": T0 + start, "latency": latency,
            "expert": expert, "parts": dict(parts), "status": status, "task": task}


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
                      judge: Mapping[str, Any] | None = None, suite: str = "hle", models: Sequence[str] = ("m",),
                      dataset_text: str | None = None, suite_options: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
    """A run.json whose manifest is built from real files written under `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    dataset = folder / "data.jsonl"
    dataset.write_text(dataset_text if dataset_text is not None
                       else "".join(json.dumps({"id": i, "question": f"q{i}"}) + "\n" for i in ids))
    paths = {}
    for name, text in templates.items():
        paths[name] = folder / f"{name}.txt"
        paths[name].write_text(text)
    endpoints = folder / "model_config.json"
    endpoints.write_text(json.dumps({m: [{"ip_addr": "127.0.0.1", "port": 9000 + n}] for n, m in enumerate(models)}))
    routing = from_model_config(read_endpoints(endpoints), source=str(endpoints), name="test")
    manifest = build_manifest(suite=suite, suite_options=suite_options or {"max_rounds": 5}, dataset=dataset,
                              ids=list(ids), templates=paths, judge=judge, routing=routing, names=list(models),
                              cli={"concurrency": 8})
    return {"suite": suite, "dataset": str(dataset), MANIFEST_KEY: manifest}
