"""`ops export RUN --format inspect --out FILE.eval`: a run of any suite as an Inspect AI eval log.

Written with inspect_ai's own log API (`write_eval_log`; the optional `[inspect]` extra, imported
only here), so `inspect view` opens the file and `inspect_ai.log.read_eval_log` reads it. One
sample per task of results.jsonl (its last record), with:

    input    the record's question-like field (input, question, prompt, problem), else the suite's
             unit for that id (its dataset, loaded by the suite as `ops eval` did), else the id
    output   the record's answer-like field (prediction, response, answer, final_answer, output)
    target   the record's reference (gold, target, reference, correct_answer, answer_key), else ""
    scores   `correct` (C/I), `score` (a number) or `reward` (tau2), whichever the record has
    usage    the record's `usage`, else the sum of the task's model calls in profile.jsonl, per model
    error    an errored task keeps its error

The log's results carry the suite's headline score from scores.json when it has one. A gateway
run dir (traffic from other harnesses: no samples, no suite) is refused.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from orchestra_ops.analysis.rundata import load_run
from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

INPUT_KEYS = ("input", "question", "prompt", "problem", "query")
OUTPUT_KEYS = ("prediction", "response", "answer", "final_answer", "output", "completion")
TARGET_KEYS = ("gold", "target", "reference", "correct_answer", "answer_key", "expected")


@dataclass(frozen=True)
class InspectExport:
    out: Path
    samples: int
    errors: int
    suite: str

    def to_json(self) -> dict[str, Any]:
        return {"out": str(self.out), "samples": self.samples, "errors": self.errors, "suite": self.suite}


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(m, dict) and "content" in m for m in value):
        return "\n\n".join(str(m["content"]) for m in value)  # a chat prompt
    return str(value)


def _first(record: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        text = _text(record.get(key))
        if text is not None:
            return text
    return None


def _units(run_json: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """id -> the suite's unit of work, as `ops eval` built them (best effort: {} when it cannot)."""
    try:
        from orchestra_ops.evals.registry import load_suite

        suite = load_suite(str(run_json["suite"]))
        samples = suite.load(Path(str(run_json["dataset"])), dedupe=bool(run_json.get("dedupe")))
        options = {**dict(run_json.get("suite_options") or {}), "models": run_json.get("models") or []}
        return {str(unit["id"]): unit for unit in suite.units(samples, options) if isinstance(unit, Mapping)}
    except Exception as exc:
        log.info("inspect export: the suite's units are not available (%s); inputs from the records", exc)
        return {}


def _scores(record: Mapping[str, Any]) -> dict[str, Any]:
    from inspect_ai.scorer import Score

    if isinstance(record.get("correct"), bool):
        return {"correct": Score(value="C" if record["correct"] else "I", answer=_text(record.get("extracted")))}
    for key in ("score", "reward"):
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return {key: Score(value=float(value))}
    return {}


def _usage(record: Mapping[str, Any], calls: list[Any], default_model: str) -> dict[str, Any]:
    from inspect_ai.model import ModelUsage

    usage = record.get("usage")
    if isinstance(usage, Mapping):
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        return {str(record.get("model") or default_model): ModelUsage(input_tokens=prompt, output_tokens=completion,
                                                                     total_tokens=prompt + completion)}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for call in calls:
        totals[call.model][0] += call.prompt_tokens or 0
        totals[call.model][1] += call.completion_tokens or 0
    return {model: ModelUsage(input_tokens=p, output_tokens=c, total_tokens=p + c) for model, (p, c) in totals.items()}


def export_inspect(run_dir: Path, out: Path, *, overwrite: bool = False) -> InspectExport:
    try:
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalError,
            EvalLog,
            EvalResults,
            EvalSample,
            EvalScore,
            EvalSpec,
            EvalStats,
            write_eval_log,
        )
        from inspect_ai.model import ModelOutput
    except ImportError as exc:
        raise ConfigError(f"--format inspect needs the [inspect] extra (pip install 'orchestra-ops[inspect]'): "
                          f"{exc}") from None
    if out.suffix != ".eval":
        raise ConfigError(f"--out {out}: an Inspect log file ends in .eval")
    if out.exists() and not overwrite:
        raise ConfigError(f"--out {out} exists; pass --overwrite to replace it")
    run = load_run(run_dir)
    info = run.run_json or {}
    suite = str(info.get("suite") or "")
    if suite == "gateway":
        raise ConfigError(f"{run_dir} is a gateway run dir (traffic from other harnesses): it has no samples, "
                          f"no targets and no scores to export; `ops analyze {run_dir}` reads its request log")
    if not run.final:
        raise ConfigError(f"{run_dir}: no finished task in results.jsonl; nothing to export")
    model = str(info.get("model") or (info.get("models") or ["unknown"])[0])
    units = _units(info) if any(_first(r, INPUT_KEYS) is None for r in run.final.values()) else {}
    calls: dict[str, list[Any]] = defaultdict(list)
    for call in run.profile.model_calls:
        calls[str(call.task)].append(call)
    samples = []
    errors = 0
    for task_id, record in run.final.items():
        unit = units.get(str(task_id), {})
        text_in = _first(record, INPUT_KEYS) or _first(unit, INPUT_KEYS) or f"(task {task_id}: input not recorded)"
        output = _first(record, OUTPUT_KEYS) or ""
        error = None
        if record.get("status") != "ok":
            errors += 1
            message = str(record.get("error") or record.get("error_type") or "error")
            error = EvalError(message=message, traceback="", traceback_ansi="")
        samples.append(EvalSample(
            id=task_id, epoch=1, input=text_in, target=_first(record, TARGET_KEYS) or _first(unit, TARGET_KEYS) or "",
            output=ModelOutput.from_content(model=str(record.get("model") or model), content=output),
            scores=_scores(record), metadata={k: v for k, v in record.items() if k not in ("usage",)},
            model_usage=_usage(record, calls.get(str(task_id), []), model), error=error,
            total_time=float(record["elapsed"]) if isinstance(record.get("elapsed"), (int, float)) else None))
    created = str(info.get("created") or datetime.now(timezone.utc).isoformat())
    headline = (run.scores or {}).get("score", (run.scores or {}).get("accuracy"))
    metrics = {}
    if isinstance(headline, (int, float)) and not isinstance(headline, bool):
        from inspect_ai.log import EvalMetric

        metrics = {"score": EvalMetric(name="score", value=float(headline))}
    scorer = next(iter(samples[0].scores), suite) if samples[0].scores else suite
    eval_log = EvalLog(
        status="success" if not errors else "error",
        eval=EvalSpec(created=created, task=suite or "ops-eval", dataset=EvalDataset(
            name=Path(str(info.get("dataset") or "")).name or None, location=str(info.get("dataset") or "") or None,
            samples=len(samples)), model=model, config=EvalConfig(),
            metadata={"orchestra_ops_run_dir": str(run_dir), "suite": suite}),
        results=EvalResults(total_samples=len(samples), completed_samples=len(samples) - errors,
                            scores=[EvalScore(name=scorer, scorer=scorer, metrics=metrics)]),
        stats=EvalStats(started_at=created, completed_at=str(info.get("updated") or created)),
        samples=samples,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    write_eval_log(eval_log, str(out))
    return InspectExport(out=out, samples=len(samples), errors=errors, suite=suite)
