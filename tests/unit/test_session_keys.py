"""The session key each suite gives its calls: each side of a tau2 simulation its own, a HealthBench example
one for its rubric judge calls (and none for its candidate call). In process, answered by the sim's rules."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestra_ops.evals.healthbench.suite import HealthBenchSuite
from orchestra_ops.evals.tau2.environment import base_env, get_domain
from orchestra_ops.evals.tau2.loop import Simulation, simulate
from orchestra_ops.evals.tau2.tasks import load_domain_data
from orchestra_ops.services.simllm import rules

from orchestra_ops.client.callctx import current_session
from orchestra_ops.client.chat import ChatResult
from orchestra_ops.client.routing import from_model_config
from orchestra_ops.runner.templates import load_templates
from tests.integration.tau2_fixtures import SYNTHETIC
from tests.unit.test_tau2_loop import SimContext, _settings


class SessionContext(SimContext):
    """Answers as the sim would, and keeps (model, session key) of every call."""

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.calls: list[tuple[str, str | None]] = []

    async def chat(self, name: str, messages: Sequence[Any], **params: Any) -> ChatResult:
        self.calls.append((name, current_session.get()))
        return await super().chat(name, messages, **params)


def test_each_side_of_a_tau2_simulation_has_its_own_session() -> None:
    data = load_domain_data(SYNTHETIC, "synthetic")
    ctx = SessionContext("task-7#0")
    scenario = '[sim:call find_member_by_email {"email":"ada.park@example.com"}] [sim:say Found you.]'
    asyncio.run(simulate(base_env(get_domain("synthetic"), data), ctx, _settings(scenario), Simulation()))  # type: ignore[arg-type]
    assert {name for name, _ in ctx.calls} == {"agent", "user"}
    assert all(session == f"task-7#0/{name}" for name, session in ctx.calls)
    assert current_session.get() is None  # nothing leaks out of the simulation


def test_a_healthbench_examples_judge_calls_share_its_session() -> None:
    suite = HealthBenchSuite()
    routing = from_model_config({"candidate": [{"ip_addr": "127.0.0.1", "port": 9}],
                                 "judge": [{"ip_addr": "127.0.0.1", "port": 10}]}, source="t", name="t")
    options = {option.name: option.default for option in suite.options}
    options.update(model="candidate", models=["candidate"],
                   templates=load_templates(suite.template_files, {}, suite.template_fields))
    suite.prepare(routing, options)
    sample = suite.load(Path(str(suite.default_dataset)), dedupe=False)[0]  # the bundled synthetic examples

    class Context(SessionContext):
        async def chat(self, name: str, messages: Sequence[Any], **params: Any) -> ChatResult:
            self.calls.append((name, current_session.get()))
            reply = rules.respond({"model": name, "messages": list(messages), **params})
            return ChatResult(reply.content, {"role": "assistant", "content": reply.content}, "stop", 1, 1,
                              "local", 1, 0.0)

    ctx = Context(str(sample["id"]))
    asyncio.run(suite.run(sample, ctx))  # type: ignore[arg-type]
    judged = [session for name, session in ctx.calls if name == "judge"]
    assert len(judged) == len(sample["rubrics"]) and set(judged) == {str(sample["id"])}
    assert [session for name, session in ctx.calls if name == "candidate"] == [None]
