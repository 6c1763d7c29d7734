"""`ops eval tau2`: τ²-bench simulations over the fleet, one unit per (task, trial).

Routing: the agent is `--model` (default the role `orchestrator`), the user simulator `--user`
(default the role `user`), the NL-assertion judge `--judge` (default `judge`; needed only when a
task's reward_basis has NL_ASSERTION). Tasks come from `--data-dir` (a τ²-bench data dir; default:
the bundled synthetic domain) for `--domain`, filtered by `--task-split` (`base` when the domain has
a split_tasks.json), or from `--task-file`. Each unit's messages, tool calls, DB hashes and reward
breakdown go to trajectories/<unit>.json beside results.jsonl; resume is per (task, trial). The NL-assertion
judge's request and the parsing of its verdicts are in nl_judge.py.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.evals.agent.records import TRAJECTORY_DIR, write_trajectory
from orchestra_ops.evals.agent.suite import parse_pairs
from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.tau2 import metrics, toolorchestra
from orchestra_ops.evals.tau2.domain import Domain
from orchestra_ops.evals.tau2.environment import DOMAIN_NAMES, fresh_env, get_domain
from orchestra_ops.evals.tau2.llm_args import JUDGE_DEFAULT, ROLES, llm_args
from orchestra_ops.evals.tau2.loop import LoopSettings, Simulation, now, simulate
from orchestra_ops.evals.tau2.nl_judge import judge_nl_assertions
from orchestra_ops.evals.tau2.reward import NORMAL_ENDINGS, evaluate
from orchestra_ops.evals.tau2.tasks import DomainData, domain_dir, load_domain_data, render_scenario, reward_basis

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.routing import Routing
from orchestra_ops.core.headline import Headline
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample
from orchestra_ops.runner.generation import generation_options
from orchestra_ops.runner.results import TaskId
from orchestra_ops.runner.suite import BaseSuite, SuiteOption, TaskContext, UnitFailed, templates_of
from orchestra_ops.runner.templates import Template

BUNDLED_DATA = packaged("tau2/data")
SEED = 300  # τ²-bench's default: random.seed(300), then one randint(0, 1e6) per trial


def trial_seeds(trials: int, seed: int = SEED) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(0, 1_000_000) for _ in range(trials)]


def unit_id(task_id: str, trial: int) -> str:
    return f"{task_id}#{trial}"


class Tau2Suite(BaseSuite):
    """τ²-bench: an agent serves a simulated user over a domain's tools; reward as τ²-bench computes it."""

    name = "tau2"
    summary_fields = ("reward", "termination_reason")
    template_files: Mapping[str, str] = {"agent_system": packaged("tau2/templates/tau2_agent_system.txt"),
                      "user_system": packaged("tau2/templates/tau2_user_system.txt"),
                      "user_system_tools": packaged("tau2/templates/tau2_user_system_tools.txt"),
                      "nl_judge_system": packaged("tau2/templates/tau2_nl_judge_system.txt"),
                      "nl_judge": packaged("tau2/templates/tau2_nl_judge.txt")}
    template_fields: Mapping[str, tuple[str, ...]] = {"agent_system": ("policy",), "user_system": ("scenario",),
                       "user_system_tools": ("scenario",), "nl_judge": ("conversation", "assertions")}
    options = (
        SuiteOption("domain", "--domain", "choice", "The τ²-bench domain.", default="synthetic",
                    choices=DOMAIN_NAMES, everyday=True),
        SuiteOption("data_dir", "--data-dir", "path", "A τ²-bench data dir (domains/<domain>/{tasks.json, "
                    "db.json|db.toml, policy.md, split_tasks.json}); default: the bundled synthetic domain."),
        SuiteOption("task_split", "--task-split", "str", "A split of split_tasks.json (base, train, test); "
                    "default: base when the domain has splits and no --task-file is given."),
        SuiteOption("task_file", "--task-file", "path", "A tasks file used instead of the domain's tasks.json "
                    "(e.g. the pre-v1.0 files ToolOrchestra ran)."),
        SuiteOption("trials", "--trials", "int", "Simulations per task (pass^k for k up to this).", default=1,
                    minimum=1, everyday=True),
        SuiteOption("max_steps", "--max-steps", "int", "Steps (hops) per simulation.", default=200, minimum=1),
        SuiteOption("max_errors", "--max-errors", "int", "Failed tool calls per simulation.", default=10,
                    minimum=1),
        SuiteOption("user", "--user", "str", "The role or model that plays the user simulator.", default="user",
                    everyday=True),
        SuiteOption("judge", "--judge", "str", "The role or model that judges NL assertions.", default="judge"),
        SuiteOption("protocol", "--protocol", "choice", "tau2: τ²-bench's own agent; toolorchestra: ToolOrchestra's "
                    "(call_expert over expert-1..3, transfer_to_human_agents hidden, the history budget, a filler "
                    "for an empty turn).", default="tau2", choices=("tau2", "toolorchestra")),
        SuiteOption("aliases", "--alias", "str", "EXPERT=ROLE_OR_MODEL: where a call_expert alias goes "
                    "(toolorchestra; default: the topology's aliases:, else a role named like the alias).",
                    multiple=True, default=()),
        SuiteOption("history_budget", "--history-budget", "int", "Tokens of the agent's history (toolorchestra; "
                    "the tools JSON counts against it).", default=toolorchestra.HISTORY_BUDGET, minimum=1),
        SuiteOption("agent_args", "--agent-args", "str", "JSON sampling arguments of agent calls (default: "
                    '{"temperature": 0.0}; toolorchestra: {"temperature": 1.0, "max_tokens": 8000}).'),
        SuiteOption("user_args", "--user-args", "str", "JSON sampling arguments of user-simulator calls (default: "
                    '{"temperature": 0.0}; toolorchestra: {"temperature": 1.0}).'),
        SuiteOption("seed", "--seed", "int", "Seeds the per-trial seeds sent with agent and user calls.",
                    default=SEED),
        *generation_options(ROLES, evaluated="the agent"),
    )

    def __init__(self) -> None:
        self.domain: Domain | None = None
        self.domain_name = "synthetic"
        self.data: DomainData | None = None
        self.task_split: str | None = None
        self.task_file: Path | None = None
        self.templates: Mapping[str, Template] = {}
        self.settings: dict[str, Any] = {}
        self.judge_ok = False
        self.trajectories = Path(TRAJECTORY_DIR)
        self.default_dataset: str | None = str(Path(BUNDLED_DATA) / "domains" / "synthetic")

    # routing and data

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        if len(options.get("models") or ()) > 1:
            raise ConfigError("the tau2 suite evaluates one agent: give --model once")
        self.domain_name = str(options.get("domain") or "synthetic")
        self.domain = get_domain(self.domain_name)
        data_dir = Path(str(options.get("data_dir") or BUNDLED_DATA)).expanduser().resolve()
        self.default_dataset = str(domain_dir(data_dir, self.domain_name))
        self.task_split = options.get("task_split") or None
        self.task_file = Path(str(options["task_file"])).resolve() if options.get("task_file") else None
        self.templates = templates_of(options)
        agent = str(options.get("model") or "orchestrator")
        user = str(options.get("user") or "user")
        judge = str(options.get("judge") or "judge")
        # a name the routing lacks fails now, naming the flag that sets it
        routing.chat_target(agent, flag="--model", avoid=(user, judge), purpose="the agent")
        routing.chat_target(user, flag="--user", avoid=(agent, judge), purpose="the user simulator")
        try:
            routing.chat_target(judge)
            self.judge_ok = True
        except ConfigError:
            self.judge_ok = False
        protocol = str(options.get("protocol") or "tau2")
        theirs = protocol == "toolorchestra"
        args = llm_args(options)
        experts = self._experts(routing, options) if theirs else {}
        self.settings = {
            "agent": agent, "user": user, "judge": judge, "protocol": protocol,
            "max_steps": int(options["max_steps"]), "max_errors": int(options["max_errors"]),
            "trials": int(options["trials"]), "seed": int(options["seed"]),
            "agent_args": args["agent"], "user_args": args["user"], "judge_args": args["judge"], "experts": experts,
            "history_budget": int(options.get("history_budget") or toolorchestra.HISTORY_BUDGET),
        }
        # every hop may call a model (an expert too under toolorchestra), then the judge
        self.calls_per_task = self.settings["max_steps"] * (2 if theirs else 1) + 1
        self.trajectories = Path(str(options.get("run_dir") or ".")) / TRAJECTORY_DIR
        return [agent, user, *([judge] if self.judge_ok else []), *sorted(set(experts.values()))]

    @staticmethod
    def _experts(routing: Routing, options: Mapping[str, Any]) -> dict[str, str]:
        given = parse_pairs(options.get("aliases"), "--alias")
        unknown = sorted(set(given) - set(toolorchestra.EXPERTS))
        if unknown:
            raise ConfigError(f"--alias {unknown[0]}: call_expert offers {', '.join(toolorchestra.EXPERTS)}")
        experts = {alias: given.get(alias) or routing.aliases.get(alias, alias) for alias in toolorchestra.EXPERTS}
        for alias, target in experts.items():
            try:
                routing.chat_target(target)
            except ConfigError as exc:
                raise ConfigError(f"{exc} (call_expert's {alias} goes there; map it with aliases: in the "
                                  f"topology or --alias {alias}=ROLE)") from None
        return experts

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        self.data = load_domain_data(path, self.domain_name, task_file=self.task_file, split=self.task_split)
        for task in self.data.tasks:
            history = (task.get("initial_state") or {}).get("message_history")
            if history:
                raise ConfigError(f"{self.data.task_source}: task {task['id']!r}: a prefilled message_history "
                                  "is not supported by ops eval tau2")
        return [{"id": task["id"], "task_id": task["id"]} for task in self.data.tasks]

    def units(self, samples: list[Sample], options: Mapping[str, Any]) -> list[Sample]:
        needs_judge = [s["task_id"] for s in samples if "NL_ASSERTION" in reward_basis(self._task(s["task_id"]))]
        if needs_judge and not self.judge_ok:
            raise ConfigError(f"task(s) {', '.join(needs_judge[:5])} are graded by NL assertions, but the judge "
                              f"'{self.settings['judge']}' is not declared; give --judge ROLE_OR_MODEL")
        seeds = trial_seeds(self.settings["trials"], self.settings["seed"])
        return [{"id": unit_id(s["task_id"], trial), "task_id": s["task_id"], "trial": trial, "seed": seeds[trial]}
                for s in samples for trial in range(self.settings["trials"])]

    def _task(self, task_id: str) -> dict[str, Any]:
        assert self.data is not None, "load() runs first"
        for task in self.data.tasks:
            if task["id"] == task_id:
                return task
        raise KeyError(task_id)

    def loop_settings(self, task: dict[str, Any], seed: int) -> LoopSettings:
        assert self.domain is not None and self.data is not None
        user_tools = self.domain.user_schemas()
        if task.get("user_tools") is not None:
            user_tools = [t for t in user_tools if t["function"]["name"] in task["user_tools"]]
        template = self.templates["user_system_tools" if user_tools else "user_system"]
        s = self.settings
        return LoopSettings(
            agent=s["agent"], user=s["user"],
            agent_system=self.templates["agent_system"].render(policy=self.data.policy),
            user_system=template.render(scenario=render_scenario(task["user_scenario"])),
            agent_tools=self.domain.agent_schemas(), user_tools=user_tools,
            agent_params=self._params(s["agent_args"], seed), user_params=self._params(s["user_args"], seed),
            max_steps=s["max_steps"], max_errors=s["max_errors"], protocol=s["protocol"], experts=s["experts"],
            expert_params=dict(toolorchestra.DEFAULT_SAMPLING), history_budget=s["history_budget"])

    def _params(self, args: dict[str, Any], seed: int) -> dict[str, Any]:
        """τ²-bench sends each trial's seed with agent and user calls; ToolOrchestra sends none."""
        return dict(args) if self.settings["protocol"] == "toolorchestra" else {**args, "seed": seed}

    # running

    async def run(self, sample: Sample, ctx: TaskContext) -> dict[str, Any]:
        assert self.domain is not None and self.data is not None, "prepare() and load() run first"
        domain, data = self.domain, self.data
        task = self._task(sample["task_id"])
        env = fresh_env(domain, data, task)
        sim = Simulation()
        start = time.monotonic()
        trajectory: dict[str, Any] = {"id": str(uuid.uuid4()), "task_id": task["id"], "trial": sample["trial"],
                                      "seed": sample["seed"], "domain": self.domain_name, "start_time": now()}
        failure: CallError | None = None
        try:
            await simulate(env, ctx, self.loop_settings(task, sample["seed"]), sim)
        except CallError as exc:
            failure = exc
            sim.termination = "infrastructure_error"
        nl_checks = None
        if failure is None and sim.termination in NORMAL_ENDINGS and \
                "NL_ASSERTION" in reward_basis(task) and task.get("evaluation_criteria"):
            try:
                nl_checks = await self._judge(task, sim, ctx)
            except CallError as exc:
                failure = exc
        agent_hash, user_hash = env.hashes()
        trajectory.update(end_time=now(), duration=round(time.monotonic() - start, 6),
                          termination_reason=sim.termination, steps=sim.step_count, errors=sim.num_errors,
                          db_hashes={"agent": agent_hash, "user": user_hash}, messages=sim.messages)
        fields: dict[str, Any] = {"task_id": task["id"], "trial": sample["trial"], "seed": sample["seed"],
                                  "termination_reason": sim.termination, "steps": sim.step_count,
                                  "errors": sim.num_errors, "agent_calls": sim.agent_calls,
                                  "user_calls": sim.user_calls, "expert_calls": sim.expert_calls,
                                  "tool_calls": sum(len(m.get("tool_calls") or ()) for m in sim.messages)}
        if failure is None:
            info = evaluate(task, sim.messages, str(sim.termination), lambda: fresh_env(domain, data, task), nl_checks)
            trajectory["reward_info"] = info
            fields.update(reward=info["reward"], reward_breakdown=info.get("reward_breakdown"),
                          db_match=(info.get("db_check") or {}).get("db_match"))
        fields["trajectory"] = write_trajectory(self.trajectories, sample["id"], trajectory)
        if failure is not None:
            raise UnitFailed(failure.kind, f"step {sim.step_count}: {failure.message}", fields)
        return fields

    async def _judge(self, task: dict[str, Any], sim: Simulation, ctx: TaskContext) -> list[dict[str, Any]]:
        """The NL-assertion judge's verdicts on this simulation (nl_judge.py)."""
        return await judge_nl_assertions(task, sim.messages, ctx, self.templates, self.settings["judge"],
                                         self.settings.get("judge_args", JUDGE_DEFAULT))

    # scores

    def score(self, records: Mapping[TaskId, dict[str, Any]], units: list[Sample]) -> dict[str, Any] | None:
        return metrics.score(records, units, domain=self.domain_name, trials=int(self.settings.get("trials", 1)))

    def score_lines(self, scores: Mapping[str, Any]) -> list[str]:
        return metrics.score_lines(scores)

    def headline(self, scores: Mapping[str, Any], records: Mapping[TaskId, dict[str, Any]],
                 units: list[Sample]) -> Headline | None:
        return metrics.headline(scores, records, str(self.settings.get("agent") or "orchestrator"))

    def routing_notes(self, toolbox: Any) -> list[str]:
        s = self.settings
        data = self.data
        lines = [f"agent: {s['agent']}, user simulator: {s['user']}, judge: "
                 f"{s['judge'] if self.judge_ok else '(none declared; NL assertions cannot be graded)'}",
                 f"domain {self.domain_name}: {len(data.tasks) if data else '?'} task(s) from "
                 f"{data.task_source if data else '?'}, {s['trials']} trial(s), max steps {s['max_steps']}, "
                 f"max errors {s['max_errors']}, protocol {s['protocol']}"]
        if s["experts"]:
            lines.append("call_expert aliases: " + ", ".join(f"{a} -> {t}" for a, t in s["experts"].items())
                         + f"; history budget {s['history_budget']} tokens")
        return lines
