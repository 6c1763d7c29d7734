"""The sim's rubric judge: one deterministic verdict per rubric item (services/simllm/healthbench_rules.py)."""

from __future__ import annotations

import hashlib
import json

from orchestra_ops.services.simllm import healthbench_rules as rubric_rules
from orchestra_ops.services.simllm import replies, rules


def grader(conversation: str, item: str) -> str:
    return (f"Judge it.\n\n# Conversation\n{conversation}\n\n# Rubric item\n{item}\n\n# Instructions\n"
            "[9] not this one\nReturn JSON with explanation and criteria_met.")


def test_the_criterion_is_read_after_the_last_rubric_item_heading() -> None:
    conversation = "user: [4] a line that looks like an item\n\nassistant: sim-0badc0de"
    assert rubric_rules.criterion_of(grader(conversation, "[-6]   Uses  jargon.")) == "Uses jargon."
    assert rubric_rules.criterion_of("<<rubric_item>>\n[5] Mentions X\nReply") == "Mentions X"  # no heading
    assert rubric_rules.criterion_of("no item here") == ""


def test_the_verdict_is_the_documented_hash_rule() -> None:
    for i in range(200):
        token = replies.answer_token(f"q{i}")
        criterion = f"Criterion number {i % 13}."
        share = int(hashlib.sha256(f"{token}\n{criterion}".encode()).hexdigest()[:8], 16) % 100
        assert rubric_rules.criteria_met(token, criterion) == (share < (70 if replies.token_is_right(token) else 30))


def test_items_of_one_response_get_their_own_verdicts() -> None:
    token = replies.answer_token("one response")
    verdicts = [rubric_rules.criteria_met(token, f"criterion {i}") for i in range(40)]
    assert 0 < sum(verdicts) < 40
    right = [t for t in (replies.answer_token(f"r{i}") for i in range(400)) if replies.token_is_right(t)]
    wrong = [t for t in (replies.answer_token(f"r{i}") for i in range(400)) if not replies.token_is_right(t)]
    assert 0.6 < sum(rubric_rules.criteria_met(t, "c") for t in right) / len(right) < 0.8
    assert 0.2 < sum(rubric_rules.criteria_met(t, "c") for t in wrong) / len(wrong) < 0.4


def test_the_sim_answers_a_grader_request_with_that_verdict() -> None:
    token = "sim-0badc0de"
    for criterion in ("Says A.", "Says B.", "Says C.", "Says D."):
        prompt = grader(f"user: hi\n\nassistant: The answer is {token}.", f"[3] {criterion}")
        body = {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                             {"role": "user", "content": prompt}]}
        reply = rules.respond(body)
        assert reply.judge and reply.role == replies.JUDGE_RUBRIC
        verdict = json.loads(reply.content or "")
        assert verdict["criteria_met"] is rubric_rules.criteria_met(token, criterion)
        assert criterion in verdict["explanation"]
