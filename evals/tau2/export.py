"""`ops export RUN_DIR --format tau2 --out FILE.json`: a tau2 run as τ²-bench's results file (§1.10).

    {timestamp, info: {git_commit, num_trials, max_steps, max_errors, user_info, agent_info,
     environment_info: {domain_name, policy, tool_defs: {name: {name, doc, params, returns}}}, seed},
     tasks: [the Task objects, embedded as read], simulations: [{id, task_id, timestamp, start_time, end_time, duration,
     termination_reason, agent_cost, user_cost, reward_info, messages, trial, seed}]}

Every unit with a trajectory is exported: infrastructure errors as `infrastructure_error` (which τ²-bench's
metrics leave out too) without reward_info. Messages keep τ²-bench's fields: role, content,
tool_calls [{id, name, arguments, requestor}], turn_idx, timestamp, usage; tool messages id (= the
call's id), content, requestor, error. Costs are not known to ops: 0.0.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.evals.agent.records import read_trajectory
from orchestra_ops.evals.tau2.environment import get_domain
from orchestra_ops.evals.tau2.llm_args import llm_args
from orchestra_ops.evals.tau2.tasks import domain_dir, load_domain_data

from orchestra_ops import __version__
from orchestra_ops.core.fsutil import atomic_write_text, writable_dir
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.results import ResultsStore
from orchestra_ops.runner.rundir import read_run_info, recorded_dataset

TOOL_CALL_FIELDS = ("id", "name", "arguments", "requestor")


@dataclass
class Tau2Export:
    out: Path
    simulations: int
    without_trajectory: int
    tasks: int


def _served(info: dict[str, Any], role: str) -> str:
    for row in info.get("routing") or ():
        if isinstance(row, dict) and role in (row.get("role"), row.get("target")):
            return str(row.get("served_name") or role)
    return role


def tool_signatures(schemas: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """τ²-bench's `tool_defs`: name -> ToolSignature {name, doc, params (JSON schema), returns}; its
    Results model rejects an OpenAI tool schema there (name and doc are required)."""
    signatures = {}
    for schema in schemas:
        function = schema["function"]
        signatures[function["name"]] = {"name": function["name"], "doc": function.get("description") or "",
                                        "params": function.get("parameters"), "returns": None}
    return signatures


def export_message(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("role") == "tool":
        keys = ("id", "role", "content", "requestor", "error", "turn_idx", "timestamp")
        return {k: message.get(k) for k in keys}
    out = {k: message.get(k) for k in ("role", "content", "turn_idx", "timestamp")}
    calls = message.get("tool_calls")
    out["tool_calls"] = [{k: call.get(k) for k in TOOL_CALL_FIELDS} for call in calls] if calls else None
    out["cost"] = 0.0
    out["usage"] = message.get("usage")
    out["raw_data"] = message.get("raw_data")
    return out


def export_tau2(run_dir: Path, out: Path, *, overwrite: bool = False) -> Tau2Export:
    info = read_run_info(run_dir)
    if info is None:
        raise ConfigError(f"{run_dir}: not a run dir (no run.json)")
    if info.get("suite") != "tau2":
        raise ConfigError(f"{run_dir} is a '{info.get('suite')}' run; --format tau2 exports tau2 runs")
    if out.exists() and (out.is_dir() or not overwrite):
        raise ConfigError(f"--out {out}: exists; pass --overwrite to replace it" if not out.is_dir()
                          else f"--out {out}: is a directory; --format tau2 writes one JSON file")
    writable_dir(out.parent, flag=f"--out {out}: its folder")  # read-only or unwritable: one line, exit 2
    options = info.get("suite_options") or {}
    domain_name = str(options.get("domain") or "synthetic")
    dataset = Path(recorded_dataset(str(info.get("dataset"))))
    task_file = Path(str(options["task_file"])) if options.get("task_file") else None
    data = load_domain_data(dataset if dataset.is_dir() else domain_dir(dataset, domain_name), domain_name,
                            task_file=task_file, split=options.get("task_split") or None)
    domain = get_domain(domain_name)
    agent_role = str(info.get("model") or "orchestrator")
    user_role = str(options.get("user") or "user")
    args = llm_args(options)
    simulations = []
    missing = 0
    for record in ResultsStore(run_dir).final_records().values():
        trajectory = read_trajectory(run_dir, record)
        if trajectory is None:
            missing += 1
            continue
        simulations.append({
            "id": trajectory["id"], "task_id": trajectory["task_id"], "timestamp": trajectory.get("end_time"),
            "start_time": trajectory["start_time"], "end_time": trajectory.get("end_time"),
            "duration": trajectory.get("duration"), "termination_reason": trajectory["termination_reason"],
            "agent_cost": 0.0, "user_cost": 0.0, "reward_info": trajectory.get("reward_info"),
            "messages": [export_message(m) for m in trajectory.get("messages") or ()],
            "trial": trajectory["trial"], "seed": trajectory.get("seed")})
    results = {
        "timestamp": datetime.datetime.now().isoformat(),
        "info": {
            "git_commit": f"orchestra-ops {__version__}", "num_trials": int(options.get("trials") or 1),
            "max_steps": int(options.get("max_steps") or 200), "max_errors": int(options.get("max_errors") or 10),
            "user_info": {"implementation": "user_simulator", "llm": _served(info, user_role),
                          "llm_args": args["user"],
                          "global_simulation_guidelines": None},
            "agent_info": {"implementation": "llm_agent", "llm": _served(info, agent_role),
                           "llm_args": args["agent"]},
            "environment_info": {"domain_name": domain_name, "policy": data.policy,
                                 "tool_defs": tool_signatures(domain.agent_schemas())},
            "seed": options.get("seed"),
        },
        "tasks": data.tasks,
        "simulations": simulations,
    }
    atomic_write_text(out, json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    return Tau2Export(out, len(simulations), missing, len(data.tasks))
