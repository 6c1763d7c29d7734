"""AgentSuite: the `hle` and `frames` suites' shared class (options, routing, datasets, scores).

Routing: the orchestrator is `--model` (default the role `orchestrator`), the judge `--judge`
(default the role `judge`); each alias the tools allow goes to the topology's `aliases:` entry
(or `--alias ALIAS=NAME`), else to the role of its tool (`search`, `reasoner`, `answer`). Every
one of them is resolved before the first request, so an alias that names nothing fails at start.
"""

from __future__ import annotations

import fnmatch
import math
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.evals.agent import scoring
from orchestra_ops.evals.agent.config import AgentConfig
from orchestra_ops.evals.agent.grading import ANSWER_FORMATS, answer_format_for
from orchestra_ops.evals.agent.loop import run_task
from orchestra_ops.evals.agent.protocol import CAIS_JUDGE_SAMPLING, TOOL_ROLES, Protocol, sampling
from orchestra_ops.evals.agent.records import TRAJECTORY_DIR
from orchestra_ops.evals.agent.toolspec import load_tools
from orchestra_ops.evals.bundled import packaged

from orchestra_ops.client.callctx import session_scope
from orchestra_ops.client.retrieval import RetrievalSettings
from orchestra_ops.client.routing import Routing
from orchestra_ops.client.tokenizer import declared_tokenizer
from orchestra_ops.core.headline import Headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, load_dataset
from orchestra_ops.runner.generation import apply_shorthands, explicit_keys, generation_options
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import Alert, BaseSuite, SuiteOption, TaskContext, templates_of
from orchestra_ops.runner.toolbox import Toolbox
from orchestra_ops.sandbox import SandboxPolicy, require_isolation

COMMON_TEMPLATES = {
    "tools": "agent/templates/agent_tools.json",
    "orchestrator_system": "agent/templates/agent_orchestrator_system.txt",
    "code_writer": "agent/templates/agent_code_writer.txt",
    "answer_tag": "agent/templates/agent_answer_tag.txt",
    "answer_boxed_system": "agent/templates/agent_answer_boxed_system.txt",
    "judge": "agent/templates/agent_correct_judge.txt",
}
TEMPLATE_FIELDS = {
    "orchestrator": ("problem", "context"), "query_writer": ("problem", "context"),
    "code_writer": ("problem", "context"), "answerer": ("problem", "context"),
    "judge": ("question", "pred", "gold"), "cais_judge": ("question", "response", "correct_answer"),
}


def agent_options(protocol: Protocol) -> tuple[SuiteOption, ...]:
    options = [
        SuiteOption("max_rounds", "--max-rounds", "int", "Rounds per task; no answer by then is a wrong answer.",
                    default=50, minimum=1, everyday=True),
        SuiteOption("judge", "--judge", "str", "The role or model that judges answers.", default="judge",
                    everyday=True),
        SuiteOption("answer_format", "--answer-format", "choice",
                    "How the answer expert marks its answer: <answer> tags, \\boxed{}, or auto (\\boxed{} for "
                    "Qwen2.5-Math models, <answer> otherwise).", default="auto", choices=ANSWER_FORMATS),
        SuiteOption("aliases", "--alias", "str", "ALIAS=ROLE_OR_MODEL: where a tool alias goes (overrides the "
                    "topology's aliases:; ALIAS may be a pattern, e.g. 'search-*').", multiple=True, default=()),
        SuiteOption("budgets", "--budget", "str", "NAME=TOKENS: a context budget (orchestrator_context, "
                    "orchestrator_code, expert_context, expert_code, answer_code, *_doc_chars).",
                    multiple=True, default=()),
        SuiteOption("sampling", "--sampling", "str", "ROLE.KEY=VALUE: a sampling parameter of orchestrator, search, "
                    "reasoner, answer or judge calls (JSON value; empty removes it; e.g. judge.temperature=0).",
                    multiple=True, default=(), everyday=True),
        *generation_options(evaluated="the orchestrator"),
        SuiteOption("judge_attempts", "--judge-attempts", "int", "Judge replies that do not parse are asked "
                    "again up to this many times in all, then the task is a grader_error.", default=3, minimum=1),
        SuiteOption("exec_timeout", "--exec-timeout", "float", "Wall-time seconds of one program in the sandbox.",
                    default=60.0, minimum=0.1),
        SuiteOption("exec_python", "--exec-python", "path", "The Python that model-written code runs under "
                    "(default: the one running ops; pick an environment with the packages the code needs).",
                    default=None),
        SuiteOption("retrieval_attempts", "--retrieval-attempts", "int", "Attempts per retrieval service (all "
                    "within 60 s).", default=4, minimum=1),
        SuiteOption("retrieval_backoff", "--retrieval-backoff", "float", "First retrieval retry wait in seconds "
                    "(doubling, at most 15).", default=1.0, minimum=0.0),
        SuiteOption("on_retrieval_error", "--on-retrieval-error", "choice", "When no retrieval service answers a "
                    "search: fail the task (retrieval_unavailable; --retry-failed reruns it), or continue the round "
                    "without documents (counted in scores.json as retrieval_degraded).", default="fail",
                    choices=("fail", "continue")),
        SuiteOption("retrieval_timeout", "--retrieval-timeout", "float", "Seconds per retrieval request.",
                    default=60.0, minimum=0.1),
    ]
    if len(protocol.judge_protocols) > 1:
        options.append(SuiteOption("judge_protocol", "--judge-protocol", "choice",
                                   "toolorchestra: exact match, then the <correct> judge; cais: the official HLE "
                                   "judge fields, accuracy with its 95% half-width and calibration error.",
                                   default=protocol.judge_protocols[0], choices=protocol.judge_protocols))
    return tuple(options)


def parse_pairs(items: Any, flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ConfigError(f"{flag} {item!r}: expected NAME=VALUE")
        pairs[key.strip()] = value.strip()
    return pairs


class AgentSuite(BaseSuite):
    protocol: Protocol
    summary_fields = ("correct",)

    def __init__(self) -> None:
        self.config: AgentConfig | None = None
        self.images_excluded = 0
        self.include_images = False

    # datasets

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        """The reference's JSONL lines (`id`, `question`, `answer`, …); each gets `_eid`, its 0-based line index."""
        samples = load_dataset(path, dedupe=dedupe)
        kept: list[Sample] = []
        self.images_excluded = 0
        for index, sample in enumerate(samples):
            for key in ("question", "answer"):
                if key not in sample:
                    raise ConfigError(f"{path}: id {sample['id']!r} has no \"{key}\" (its fields: "
                                      f"{', '.join(map(str, sample))}); the {self.name} suite reads JSONL lines like "
                                      f"{self.dataset_example}")
                if not isinstance(sample.get(key), (str, int, float)) or str(sample.get(key)).strip() == "":
                    raise ConfigError(f"{path}: id {sample['id']!r}: \"{key}\" must be a non-empty string")
            if sample.get("image") and not self.include_images:
                self.images_excluded += 1
                continue
            kept.append({**sample, "_eid": sample.get("eid", index)})
        return kept

    # routing

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        templates = dict(templates_of(options))
        tools = load_tools(templates["tools"])
        judge_protocol = str(options.get("judge_protocol") or self.protocol.judge_protocols[0])
        orchestrator = str(options.get("model") or "orchestrator")
        if len(options.get("models") or ()) > 1:
            raise ConfigError(f"the {self.name} suite evaluates one orchestrator: give --model once")
        judge = str(options.get("judge") or "judge")
        given = parse_pairs(options.get("aliases"), "--alias")
        everyone = [alias for allowed in tools.allowed.values() for alias in allowed]
        unknown = sorted(p for p in given if not fnmatch.filter(everyone, p))
        if unknown:
            raise ConfigError(f"--alias {unknown[0]}: the tools offer no such alias ({', '.join(sorted(everyone))})")
        aliases: dict[str, str] = {}
        for tool, allowed in tools.allowed.items():
            for alias in allowed:
                matched = [target for pattern, target in given.items() if fnmatch.fnmatchcase(alias, pattern)]
                aliases[alias] = matched[-1] if matched else routing.aliases.get(alias, TOOL_ROLES[tool])
        names = [orchestrator, judge, *sorted(set(aliases.values()))]
        served = {}
        flags = {orchestrator: ("--model", "the orchestrator"), judge: ("--judge", "the judge of answers")}
        for name in names:
            try:
                flag, purpose = flags.get(name, (None, ""))
                served[name] = routing.chat_target(name, flag=flag, avoid=(orchestrator, judge),
                                                   purpose=purpose).served_name
            except ConfigError as exc:
                used_by = sorted(a for a, t in aliases.items() if t == name)
                hint = f" (tool aliases {', '.join(used_by)} go there; map them with aliases: in the topology or " \
                       "--alias ALIAS=NAME)" if used_by else ""
                raise ConfigError(f"{exc}{hint}") from None
        orchestrator_target = routing.chat_target(orchestrator)
        declared_tokenizer(orchestrator_target.tokenizer, orchestrator_target.checkpoint)  # a bad path fails now
        services = [s for s in self.protocol.retrieval_services if s in routing.targets]
        if not services:
            raise ConfigError(f"the {self.name} suite searches with the retrieval service "
                              f"'{self.protocol.retrieval_services[-1]}', which {routing.source} does not declare")
        calls = sampling(options.get("sampling") or ())
        calls["orchestrator"] = apply_shorthands(calls["orchestrator"], options,
                                                 explicit_keys(options.get("sampling") or (), "orchestrator"))
        if judge_protocol == "cais":
            keys = [s.split("=")[0].split(".", 1)[1] for s in options.get("sampling") or () if s.startswith("judge.")]
            calls["judge"] = {**CAIS_JUDGE_SAMPLING, **{k: calls["judge"][k] for k in keys if k in calls["judge"]}}
        answer_format = str(options.get("answer_format") or "auto")
        self.config = AgentConfig(
            protocol=_with_budgets(self.protocol, options.get("budgets") or ()), tools=tools, templates=templates,
            sampling=calls, orchestrator=orchestrator, judge=judge, judge_protocol=judge_protocol,
            answer_format=answer_format, aliases=aliases, served=served, max_rounds=int(options["max_rounds"]),
            judge_attempts=int(options["judge_attempts"]),
            on_retrieval_error=str(options.get("on_retrieval_error") or "fail"),
            retrieval=RetrievalSettings(attempts=int(options["retrieval_attempts"]),
                                        timeout_s=float(options["retrieval_timeout"]),
                                        backoff_s=float(options["retrieval_backoff"])),
            sandbox=SandboxPolicy(wall_time_s=float(options["exec_timeout"]),
                                  cpu_s=math.ceil(float(options["exec_timeout"])) + 1,
                                  python=_interpreter(options.get("exec_python")),
                                  unsafe=bool(options.get("exec_unsafe"))),
            trajectories=Path(str(options.get("run_dir") or ".")) / TRAJECTORY_DIR,
            answer_formats={a: answer_format_for(served[t], answer_format)
                            for a, t in aliases.items() if a in tools.allowed["answer"]})
        # an orchestrator and an expert call a round, then the judge: the default task deadline
        self.calls_per_task = 2 * self.config.max_rounds + self.config.judge_attempts
        self.include_images = bool(options.get("include_images"))
        if tools.allowed.get("enhance_reasoning"):  # code will run: no isolation and no --exec-unsafe stops it now
            require_isolation(self.config.sandbox)
        _remove_stale_temp_files(self.config.trajectories)
        return names

    def routing_notes(self, toolbox: Toolbox) -> list[str]:
        cfg = self.config
        assert cfg is not None
        width = max(len(a) for a in cfg.aliases)
        lines = ["tool aliases (the orchestrator names an alias; unknown ones are invalid calls, never sent):"]
        for tool, allowed in cfg.tools.allowed.items():
            for alias in allowed:
                target = cfg.aliases[alias]
                extra = f", answers in {cfg.answer_formats[alias]} format" if tool == "answer" else ""
                lines.append(f"  {alias:<{width}} -> {target} ({cfg.served[target]}){extra}")
        tokenizer = toolbox.tokenizer(cfg.orchestrator)
        lines.append(f"context budgets counted by {cfg.orchestrator}'s tokenizer: {tokenizer.description}")
        budgets = cfg.protocol.budgets.to_json()
        lines.append("budgets: " + ", ".join(f"{name} {value}" for name, value in budgets.items()))
        sandbox = f"code runs in the sandbox: {toolbox.sandbox.describe(cfg.sandbox)}"
        lines.append(sandbox if toolbox.sandbox.isolation.full else Alert(sandbox))
        lines.append(f"retrieval: {', '.join(cfg.protocol.retrieval_services)} (first declared that answers), "
                     f"topk {cfg.protocol.topk}, {cfg.retrieval.attempts} attempt(s); when none answers: "
                     + ("the task fails (retrieval_unavailable)" if cfg.on_retrieval_error == "fail"
                        else "the round goes on without documents (counted)"))
        lines.append(f"judge: {cfg.judge} ({cfg.judge_protocol} protocol, {cfg.judge_attempts} attempt(s) per verdict)")
        return lines

    # running and scoring

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        assert self.config is not None, "prepare() runs first"
        with session_scope(str(ctx.task_id)):  # every call of the task: one session (its replica's prefix cache)
            return await run_task(sample, ctx, self.config)

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        protocol = self.config.judge_protocol if self.config else self.protocol.judge_protocols[0]
        return scoring.score(self.name, records, units, judge_protocol=protocol, images_excluded=self.images_excluded)

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        return scoring.score_lines(scores)

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        return scoring.headline(scores, self.config.orchestrator if self.config else "orchestrator")


def _interpreter(given: Any) -> str:
    if not given:
        return sys.executable
    path = shutil.which(str(given))
    if path is None:
        raise ConfigError(f"--exec-python {given}: no such executable")
    return path


def _remove_stale_temp_files(directory: Path) -> None:
    """Temp files a killed run left behind (its trajectory was never renamed into place: the task reruns)."""
    if directory.is_dir():
        for stale in directory.glob(".*.tmp"):
            stale.unlink(missing_ok=True)


def _with_budgets(protocol: Protocol, items: Any) -> Protocol:
    from dataclasses import replace

    return replace(protocol, budgets=protocol.budgets.with_overrides(items))


def packaged_templates(specific: Mapping[str, str]) -> dict[str, str]:
    return {name: packaged(path) for name, path in {**COMMON_TEMPLATES, **specific}.items()}

