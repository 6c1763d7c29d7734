"""`ops export RUN_DIR --format toolorchestra --out DIR`: ToolOrchestra's per-task files (§4.1, §9.1).

One `{id}.json` per task with a result (its last one), shaped as the original OSS scripts write them,
so `analyze_tool_latency.py` and friends read our runs unchanged:

    hle:    {id, problem, all_tool_calls, all_tool_responses, answer, all_message_responses, correct,
             status: "done"|"error"[, error_type]}
    frames: {id, all_tool_calls, all_tool_responses, correct, status[, error_type]}

`all_tool_calls` has one entry per round: the string `342 invalid tool calls []` for a reply
without calls, else a list of the checked calls: an error string per invalid one (350, 351, 360)
and the executed call (`[{name, arguments}]` for hle, `{name, arguments}` for frames).
`all_tool_responses["turn_k_response"]` is `[turn]` for each round that ran a tool: the turn's
fields in the original's names (tool, model, context_str, problem, id, eid, step; search: query,
search_results_data, _query_llm_ms, _retrieval_ms, _retrieval_retries, _search_backend,
_search_local_hits, _search_tavily_hits[, _retrieval_error]; enhance_reasoning: generated_code,
exec_result, _llm_ms, _exec_ms; answer: answer, messages, response, pred, correctness,
_expert_ms[, _judge_ms]). The original's `vllm_model_configs` and `cur_output_dir` are not written.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.evals.agent.protocol import BAD_ARGUMENTS, NO_CALL
from orchestra_ops.evals.agent.records import read_trajectory, trajectory_name

from orchestra_ops.core.fsutil import atomic_write_text, writable_dir
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.results import ResultsStore
from orchestra_ops.runner.rundir import read_run_info

FORMATS = ("toolorchestra",)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")


@dataclass
class ExportSummary:
    out: Path
    written: int
    without_trajectory: int
    suite: str


def export_run(run_dir: Path, out: Path, fmt: str = "toolorchestra", *, overwrite: bool = False) -> ExportSummary:
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt}: not a known format ({', '.join(FORMATS)})")
    info = read_run_info(run_dir)
    if info is None:
        raise ConfigError(f"{run_dir}: not a run dir (no run.json)")
    suite = str(info.get("suite"))
    if suite not in ("hle", "frames"):
        raise ConfigError(f"{run_dir} is a '{suite}' run; --format toolorchestra exports hle and frames runs")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"--out {out} is not empty; pass --overwrite to replace the files it holds for this run")
    writable_dir(out)  # a read-only or unwritable --out: one line, exit 2
    records = ResultsStore(run_dir).final_records()
    written = missing = 0
    for task_id, record in records.items():
        trajectory = read_trajectory(run_dir, record)
        if trajectory is None:
            missing += 1
        task = to_toolorchestra(record, trajectory, suite)
        atomic_write_text(out / file_name(task_id), json.dumps(task, indent=2, ensure_ascii=False, default=str) + "\n")
        written += 1
    return ExportSummary(out, written, missing, suite)


def file_name(task_id: Any) -> str:
    """`{id}.json` as the original names them; an id unsafe as a file name gets a readable part + its hash."""
    text = str(task_id)
    return f"{text}.json" if _SAFE.match(text) else trajectory_name(task_id)


def _calls_entry(log: dict[str, Any], suite: str) -> str | list[Any]:
    raw = log.get("calls") or []
    if not raw:
        return f"{NO_CALL} invalid tool calls []"
    entries: list[Any] = []
    for index, code in enumerate(log.get("codes") or []):
        if code is None:
            call = raw[index]
            arguments = call["arguments"]
            if isinstance(arguments, str):
                arguments = json.loads(arguments)
            executed = {"name": call["name"], "arguments": arguments}
            entries.append([executed] if suite == "hle" else executed)
        elif code == BAD_ARGUMENTS:
            detail = "invalid tool call args (not json object)" if suite == "hle" else "invalid tool call args"
            entries.append(f"{code} {detail} {raw}")
        else:
            entries.append(f"{code} invalid tool calls {raw}")
    return entries


def _message_entry(log: dict[str, Any]) -> dict[str, Any]:
    calls = []
    for call in log.get("calls") or []:
        arguments = call.get("arguments")
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = None
        calls.append({"tool_name": call.get("name"), "tool_arguments": parsed})
    return {"content": log.get("content"), "tool_calls": calls}


_DROP = ("alias", "target", "exec", "exec_stderr", "answer_format", "grade", "retrieval_service",
         "retrieval_replica", "judge_response")


def to_toolorchestra(record: dict[str, Any], trajectory: dict[str, Any] | None, suite: str) -> dict[str, Any]:
    """One task's file in ToolOrchestra's layout (see the module docstring)."""
    status = "done" if record.get("status") == "ok" else "error"
    all_calls: list[Any] = []
    responses: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for log in (trajectory or {}).get("rounds") or []:
        if "orchestrator_error" in log:
            continue  # the original writes nothing for a round whose orchestrator call failed
        all_calls.append(_calls_entry(log, suite))
        turn = log.get("tool")
        if isinstance(turn, dict):
            step = log["round"]
            responses[f"turn_{step}_response"] = [{k: v for k, v in turn.items() if k not in _DROP}]
            messages[f"turn_{step}_message"] = _message_entry(log)
    task: dict[str, Any] = {"id": record["id"]}
    if suite == "hle":
        task["problem"] = (trajectory or {}).get("problem")
    task["all_tool_calls"] = all_calls
    task["all_tool_responses"] = responses
    if suite == "hle":
        task["answer"] = (trajectory or {}).get("answer")
        task["all_message_responses"] = messages
    task["correct"] = bool(record.get("correct"))
    task["status"] = status
    if status == "error":
        task["error_type"] = record.get("error_type")
    return task
