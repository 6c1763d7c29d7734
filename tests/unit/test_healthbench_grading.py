"""HealthBench grading: the reference's parser, what counts as a verdict, the grader prompt and template."""

from __future__ import annotations

import json

import pytest
from orchestra_ops.evals.healthbench.dataset import render_conversation, rubric_item_text
from orchestra_ops.evals.healthbench.grading import (
    NO_EXPLANATION,
    JudgeSettings,
    grader_prompt,
    parse_json_to_dict,
    verdict_of,
)
from orchestra_ops.evals.healthbench.suite import HealthBenchSuite
from orchestra_ops.services.simllm import healthbench_rules as rubric_rules
from orchestra_ops.services.simllm import replies, rules

from orchestra_ops.runner.templates import load_templates

VERDICT = '{"explanation": "ok", "criteria_met": true}'


@pytest.mark.parametrize(("text", "expected"), [
    (VERDICT, {"explanation": "ok", "criteria_met": True}),
    (f"```json\n{VERDICT}\n```", {"explanation": "ok", "criteria_met": True}),
    (f"  \n```json{VERDICT}```\n ", {"explanation": "ok", "criteria_met": True}),
    (f"Here is my grade:\n```json\n{VERDICT}\n```", {}),  # prose before the fence: not parsed
    (f"```json\n{VERDICT}\n```\nDone.", {}),  # prose after it
    (f"```\n{VERDICT}\n```", {}),  # only a ```json fence is removed at the start
    ('{"explanation": "cut', {}),
    ("[1, 2]", {}),
    ("", {}),
])
def test_parse_json_to_dict_as_the_reference(text: str, expected: dict) -> None:
    assert parse_json_to_dict(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    (VERDICT, (True, "ok")),
    ('{"criteria_met": false}', (False, NO_EXPLANATION)),
    ('{"criteria_met": "true", "explanation": "x"}', None),
    ('{"criteria_met": 1}', None),
    ('{"criteria_met": null}', None),
    ('{"explanation": "no verdict"}', None),
    (None, None),
])
def test_only_a_boolean_criteria_met_is_a_verdict(text: str | None, expected: tuple | None) -> None:
    assert verdict_of(text) == expected


def test_judge_settings_default_to_the_reference() -> None:
    judge = JudgeSettings(name="judge")
    assert judge.params() == {"temperature": 0.5, "max_tokens": 2048}
    assert judge.messages("P") == [{"role": "system", "content": "You are a helpful assistant."},
                                   {"role": "user", "content": "P"}]
    assert JudgeSettings(name="j", system="").messages("P") == [{"role": "user", "content": "P"}]
    assert judge.attempts == 3


def test_conversation_and_rubric_item_render_as_the_reference() -> None:
    prompt = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Age?"},
              {"role": "user", "content": "40"}]
    assert render_conversation(prompt, "Rest.") == "user: Hi\n\nassistant: Age?\n\nuser: 40\n\nassistant: Rest."
    assert rubric_item_text({"criterion": "Says X.", "points": 7}) == "[7] Says X."
    assert rubric_item_text({"criterion": "Says X.", "points": -7.0}) == "[-7.0] Says X."


def test_the_packaged_grader_template_has_the_reference_structure() -> None:
    suite = HealthBenchSuite()
    template = load_templates(suite.template_files, {}, suite.template_fields)["grader"]
    text = template.text
    headings = [line for line in text.splitlines() if line.startswith("# ")]
    assert headings == ["# Conversation", "# Rubric item", "# Instructions", "# Example 1", "# Example 2",
                        "# Final instruction"]
    assert text.index("<<conversation>>") < text.index("<<rubric_item>>") < text.index("# Instructions")
    assert '"criteria_met"' in text and '"explanation"' in text
    filled = grader_prompt(template, "user: a {b} <<rubric_item>>\n\nassistant: sim-0badc0de",
                           {"criterion": "Mentions {x}.", "points": -3})
    assert "<<conversation>>" not in filled and "\n# Rubric item\n[-3] Mentions {x}.\n" in filled
    assert "user: a {b} <<rubric_item>>" in filled  # one pass: text in a value is never expanded again
    # the sim reads the same prompt as a rubric judge and grades this item
    reply = rules.respond({"messages": JudgeSettings(name="judge").messages(filled)})
    assert reply.role == replies.JUDGE_RUBRIC
    assert json.loads(reply.content or "")["criteria_met"] == rubric_rules.criteria_met("sim-0badc0de", "Mentions {x}.")
