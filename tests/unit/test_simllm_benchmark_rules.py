"""The sim's benchmark rules: which prompts they answer, per persona, deterministically."""

from __future__ import annotations

from orchestra_ops.services.simllm import opencompass_rules as br
from orchestra_ops.services.simllm import rules


def test_prompt_shapes() -> None:
    gsm8k = "Question: How many apples are left?\nThink it through.\nAnswer:"
    zero = "Pick one; end with ANSWER: X.\n\nWhich is it?\n\nA) one\nB) two\nC) three\nD) four"
    five = "Hint.\nQuestion: Which is it?\nA. one\nB. two\nC. three\nD. four\nAnswer: "
    assert (br.kind(gsm8k), br.kind(zero), br.kind(five), br.kind("What is the capital of France?")) == (
        br.GSM8K, br.MMLU, br.MMLU, None)
    hle_like = "Which is it?\nAnswer Choices:\nA. one\nB. two\nC. three\nD. four\nThink, then answer.\nAnswer:"
    assert (br.kind(zero.replace("ANSWER", "answer")), br.kind(zero + "\nExplain."), br.kind(hle_like)) == (
        None, None, None)
    assert br.kind("Context first.\nQuestion: how many?\nAnswer:") is None
    assert br.gsm8k_question(gsm8k) == "How many apples are left?"
    assert br.mmlu_question(zero) == ("Which is it?", br.ZERO_SHOT)
    assert br.mmlu_question(five) == ("Which is it?", br.FIVE_SHOT)


def test_the_last_user_turn_is_the_question_and_the_persona_is_the_model() -> None:
    shots = [{"role": "user", "content": "Question: shot one?\nAnswer:"}, {"role": "assistant", "content": "7"}]
    body = {"model": "base", "messages": [*shots, {"role": "user", "content": "Question: the real one?\nAnswer:"}]}
    assert rules.classify(body) == br.GSM8K
    assert rules.respond(body).content == br.gsm8k_reply("base", "the real one?")
    replies = {model: [br.gsm8k_reply(model, f"q{i}") for i in range(50)] for model in ("base", "ft")}
    assert replies["base"] != replies["ft"]
    assert replies["base"] == [br.gsm8k_reply("base", f"q{i}") for i in range(50)]


def test_every_style_occurs_and_reads_as_documented() -> None:
    styles = {br.style("gsm8k", "base", f"q{i}") for i in range(200)}
    assert styles == set(range(10))
    q = next(f"q{i}" for i in range(500)
             if br.style("gsm8k", "m", f"q{i}") == 6 and br.gsm8k_value("m", f"q{i}") >= 1000)
    assert f"{br.gsm8k_value('m', q):,}" in br.gsm8k_reply("m", q)
    q = next(f"q{i}" for i in range(500) if br.style("mmlu", "m", f"q{i}") == 7)
    assert br.mmlu_reply("m", q).endswith(f"answer: {br.mmlu_letter('m', q).lower()}")
    assert 30 <= br.skill("anything") < 90
