"""The NL-assertion judge request as τ²-bench's judge gets it (reference §1.8 item 5): a system message
with the grading instructions, then a user message with every message of the trajectory as
`role: content` (tool results and empty turns included) and the outcomes as a Python list; the
verdicts come back as τ²-bench's NLAssertionCheck dicts."""

from __future__ import annotations

import asyncio

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.tau2.loop import Simulation
from orchestra_ops.evals.tau2.suite import Tau2Suite

from orchestra_ops.runner.templates import read_template
from tests.unit.test_tau2_loop import SimContext

MESSAGES = [
    {"role": "assistant", "content": "Hi! How can I help you today?"},
    {"role": "user", "content": "I'd like the 'spin' class, please."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "name": "find_class", "arguments": {}}]},
    {"role": "tool", "id": "c1", "content": '{"class_id": "c3"}', "requestor": "assistant"},
    {"role": "assistant", "content": "You are booked into Spin."},
]


def test_the_judge_gets_the_system_instructions_and_every_message_with_a_python_list() -> None:
    suite = Tau2Suite()
    suite.templates = {name: read_template(name, packaged(f"tau2/templates/tau2_{name}.txt"))
                       for name in ("nl_judge", "nl_judge_system")}
    suite.settings = {"judge": "judge"}
    task = {"id": "t", "evaluation_criteria": {"nl_assertions": ["The agent says 'booked'", "The agent says 'refund'"]}}
    ctx = SimContext()
    checks = asyncio.run(suite._judge(task, Simulation(messages=list(MESSAGES)), ctx))  # type: ignore[arg-type]

    (body,) = ctx.bodies
    system, user = body["messages"]
    assert system == {"role": "system", "content": suite.templates["nl_judge_system"].text}
    assert user == {"role": "user", "content": (
        "conversation:\n"
        "assistant: Hi! How can I help you today?\n"
        "user: I'd like the 'spin' class, please.\n"
        "assistant: None\n"
        'tool: {"class_id": "c3"}\n'
        "assistant: You are booked into Spin.\n\n"
        "expectedOutcomes:\n"
        "[\"The agent says 'booked'\", \"The agent says 'refund'\"]\n")}
    assert body["temperature"] == 0.0
    assert [(c["nl_assertion"], c["met"]) for c in checks] == [("The agent says 'booked'", True),
                                                               ("The agent says 'refund'", False)]
