"""Tasks and data of a domain as the user's τ²-bench data dir holds them (reference §1.2-1.3).

`domains/<domain>/` holds `tasks.json` (a list of Task objects), `db.json` or `db.toml`, an optional
`user_db.json|toml`, `policy.md` (telecom: `main_policy.md` + `tech_support_manual.md`) and an
optional `split_tasks.json` ({split: [task ids]}). `--task-file` replaces tasks.json (e.g. the pre-v1.0
files ToolOrchestra ran). Tasks stay the dicts they were read as (so an export embeds them
unchanged); `check_task` validates the fields the loop and the reward use and names the bad one.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestra_ops.errors import ConfigError

REWARD_TYPES = ("DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE")
DEFAULT_REWARD_BASIS = ("DB", "COMMUNICATE")

Task = dict[str, Any]


@dataclass(frozen=True)
class DomainData:
    name: str
    directory: Path
    tasks: list[Task]
    db: dict[str, Any]
    user_db: dict[str, Any] | None
    policy: str
    task_source: Path


def _read_structured(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if path.suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None


def _find(directory: Path, stem: str) -> Path | None:
    for suffix in (".json", ".toml"):
        if (directory / f"{stem}{suffix}").is_file():
            return directory / f"{stem}{suffix}"
    return None


def domain_dir(data_dir: Path, domain: str) -> Path:
    """`<data_dir>/domains/<domain>`, or data_dir itself when it is already a domain folder."""
    nested = data_dir / "domains" / domain
    if nested.is_dir():
        return nested
    if (data_dir / "tasks.json").is_file() and data_dir.name == domain:
        return data_dir
    raise ConfigError(f"{data_dir}: no domains/{domain}/ folder (a τ²-bench data dir holds "
                      f"domains/<domain>/{{tasks.json, db.json|db.toml, policy.md}})")


def load_domain_data(directory: Path, domain: str, *, task_file: Path | None = None,
                     split: str | None = None) -> DomainData:
    source = task_file or directory / "tasks.json"
    raw = _read_structured(source)
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: expected a JSON list of tasks")
    tasks = [check_task(task, source, index) for index, task in enumerate(raw)]
    seen: set[str] = set()
    for task in tasks:
        if task["id"] in seen:
            raise ConfigError(f"{source}: task id {task['id']!r} appears twice")
        seen.add(task["id"])
    tasks = _apply_split(tasks, directory, split, explicit_file=task_file is not None)
    db_path = _find(directory, "db")
    if db_path is None:
        raise ConfigError(f"{directory}: no db.json or db.toml")
    db = _read_structured(db_path)
    if not isinstance(db, dict):
        raise ConfigError(f"{db_path}: expected an object")
    user_path = _find(directory, "user_db")
    user_db = _read_structured(user_path) if user_path else None
    return DomainData(domain, directory, tasks, db, user_db, read_policy(directory), source)


def read_policy(directory: Path) -> str:
    if (directory / "policy.md").is_file():
        return (directory / "policy.md").read_text(encoding="utf-8")
    main, manual = directory / "main_policy.md", directory / "tech_support_manual.md"
    if main.is_file() and manual.is_file():
        return (f"<main_policy>\n{main.read_text(encoding='utf-8')}\n</main_policy>\n"
                f"<tech_support_policy>\n{manual.read_text(encoding='utf-8')}\n</tech_support_policy>")
    raise ConfigError(f"{directory}: no policy.md (or main_policy.md + tech_support_manual.md)")


def _apply_split(tasks: list[Task], directory: Path, split: str | None, *, explicit_file: bool) -> list[Task]:
    split_path = directory / "split_tasks.json"
    if split is None:
        if explicit_file or not split_path.is_file():
            return tasks
        split = "base"
    if not split_path.is_file():
        raise ConfigError(f"--task-split {split}: {split_path} does not exist")
    splits = _read_structured(split_path)
    if not isinstance(splits, dict) or split not in splits:
        names = ", ".join(sorted(splits)) if isinstance(splits, dict) else "none"
        raise ConfigError(f"{split_path}: no split {split!r} (splits: {names})")
    wanted = [str(i) for i in splits[split]]
    by_id = {t["id"]: t for t in tasks}
    absent = [i for i in wanted if i not in by_id]
    if absent:
        raise ConfigError(f"{split_path}: split {split!r} names task id(s) the task file lacks: "
                          f"{', '.join(absent[:10])}")
    return [by_id[i] for i in wanted]


def check_task(task: Any, source: Path, index: int) -> Task:
    where = f"{source}: task #{index}"
    if not isinstance(task, dict) or "id" not in task:
        raise ConfigError(f"{where}: each task is an object with an \"id\"")
    task = dict(task)
    task["id"] = str(task["id"])
    where = f"{source}: task {task['id']!r}"
    scenario = task.get("user_scenario")
    if not isinstance(scenario, dict) or "instructions" not in scenario:
        raise ConfigError(f"{where}: \"user_scenario.instructions\" is required")
    instructions = scenario["instructions"]
    if isinstance(instructions, dict):
        for key in ("domain", "reason_for_call", "task_instructions"):
            if not isinstance(instructions.get(key), str):
                raise ConfigError(f"{where}: \"user_scenario.instructions.{key}\" must be a string")
    elif not isinstance(instructions, str):
        raise ConfigError(f"{where}: \"user_scenario.instructions\" must be a string or an object")
    criteria = task.get("evaluation_criteria")
    if criteria is not None:
        if not isinstance(criteria, dict):
            raise ConfigError(f"{where}: \"evaluation_criteria\" must be an object")
        for kind in criteria.get("reward_basis") or ():
            if kind not in REWARD_TYPES:
                raise ConfigError(f"{where}: reward_basis {kind!r} is not one of {', '.join(REWARD_TYPES)}")
        for n, action in enumerate(criteria.get("actions") or ()):
            if not isinstance(action, dict) or not isinstance(action.get("name"), str) \
                    or not isinstance(action.get("arguments", {}), dict):
                raise ConfigError(f"{where}: evaluation_criteria.actions[{n}] needs a \"name\" and an "
                                  "\"arguments\" object")
            compare = action.get("compare_args")
            if compare is not None and not isinstance(compare, list):
                raise ConfigError(f"{where}: evaluation_criteria.actions[{n}].compare_args must be a list or null")
        for key in ("communicate_info", "nl_assertions"):
            values = criteria.get(key) or []
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise ConfigError(f"{where}: evaluation_criteria.{key} must be a list of strings")
    return task


def reward_basis(task: Task) -> list[str]:
    criteria = task.get("evaluation_criteria") or {}
    basis = criteria.get("reward_basis")
    return list(DEFAULT_REWARD_BASIS if basis is None else basis)


def render_instructions(instructions: Any) -> str:
    if isinstance(instructions, str):
        return instructions
    tab = "\t"
    lines = [f"Domain: {instructions['domain']}",
             f"Reason for call:\n{textwrap.indent(instructions['reason_for_call'], tab)}"]
    for key, label in (("known_info", "Known info"), ("unknown_info", "Unknown info")):
        if instructions.get(key) is not None:
            lines.append(f"{label}:\n{textwrap.indent(instructions[key], tab)}")
    lines.append(f"Task instructions:\n{textwrap.indent(instructions['task_instructions'], tab)}")
    return "\n".join(lines)


def render_scenario(scenario: Mapping[str, Any]) -> str:
    """The user scenario as the user simulator receives it (§1.3)."""
    lines = []
    if scenario.get("persona") is not None:
        lines += ["Persona:", textwrap.indent(str(scenario["persona"]), "\t")]
    lines += ["Instructions:", textwrap.indent(render_instructions(scenario["instructions"]), "\t")]
    return "\n".join(lines)
