"""The sim on the wire, with the official openai client as the caller: chat, stream, tools, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from orchestra_ops.services.simllm import replies

from tests.simserver import SimServer

MODEL = "sim-test-model"
ANSWER_TOOL: Any = {"type": "function", "function": {"name": "answer", "description": "final answer",
                                                     "parameters": {
    "type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}}}
SEARCH_TOOL: Any = {"type": "function", "function": {"name": "search", "description": "web search",
                                                     "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(model=MODEL, args=["--latency-ms", "1", "--max-model-len", "1000"]) as server:
        yield server


@pytest.fixture
def client(sim: SimServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.base_url}/v1", api_key="unused", max_retries=0, timeout=10)


def test_health_and_models(sim: SimServer, client: openai.OpenAI) -> None:
    assert httpx.get(f"{sim.base_url}/health").status_code == 200
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    raw = httpx.get(f"{sim.base_url}/v1/models").json()
    assert raw["data"][0]["max_model_len"] == 1000


def test_chat_completion(client: openai.OpenAI) -> None:
    question = "What is the capital of France?"
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}])
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert f"\\boxed{{{replies.answer_token(question)}}}" in (choice.message.content or "")
    usage = completion.usage
    assert usage is not None and usage.prompt_tokens == replies.prompt_tokens(
        {"messages": [{"role": "user", "content": question}]})
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > usage.prompt_tokens


def test_stream_with_usage(client: openai.OpenAI) -> None:
    question = "Stream me an answer"
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": question}],
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == replies.expert_text(replies.answer_token(question))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == replies.completion_tokens(replies.Reply("expert", text))
    plain = list(client.chat.completions.create(model=MODEL, stream=True,
                                                messages=[{"role": "user", "content": question}]))
    assert all(c.usage is None for c in plain)
    # vLLM 0.32: the finish rides on the last content chunk, which (with no usage chunk after it)
    # carries system_fingerprint; with a usage chunk, that one carries it instead
    assert plain[-1].choices[0].finish_reason == "stop" and plain[-1].choices[0].delta.content
    assert plain[-1].system_fingerprint and chunks[-1].system_fingerprint
    assert [c.system_fingerprint for c in plain[:-1]] == [None] * (len(plain) - 1)
    assert [c.system_fingerprint for c in chunks[:-1]] == [None] * (len(chunks) - 1)


def test_tools_give_tool_calls_then_answer(client: openai.OpenAI) -> None:
    question = "Who discovered penicillin?"
    messages: list = [{"role": "user", "content": question}]
    names = []
    for _ in range(6):
        completion = client.chat.completions.create(model=MODEL, messages=messages,
                                                    tools=[SEARCH_TOOL, ANSWER_TOOL], tool_choice="auto")
        choice = completion.choices[0]
        assert choice.finish_reason == "tool_calls"
        calls = choice.message.tool_calls or []
        assert len(calls) == 1 and calls[0].type == "function" and calls[0].id
        names.append(calls[0].function.name)
        args = json.loads(calls[0].function.arguments)
        if calls[0].function.name == "answer":
            assert args == {"answer": replies.answer_token(question)}
            break
        assert args == {"query": question}
        messages.append(choice.message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": calls[0].id, "content": "Fleming, 1928"})
    assert names == ["search"] * replies.orchestrator_rounds(question) + ["answer"]


def test_streamed_tool_call(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "q"}], tools=[ANSWER_TOOL], stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    # as vLLM: the first delta names the call (id, type, name), the next ones carry argument fragments
    assert calls[0].id and calls[0].function is not None and calls[0].function.name == "answer"
    assert all(c.index == 0 and c.id is None and c.function and c.function.name is None for c in calls[1:])
    arguments = "".join(c.function.arguments or "" for c in calls if c.function)
    assert json.loads(arguments) == {"answer": replies.answer_token("q")}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"


def test_hle_judge_json(client: openai.OpenAI) -> None:
    question = "What is 6 * 7?"
    prompt = (f"[question]: {question}\n\n[response]: \\boxed{{{replies.answer_token(question)}}}\n\n"
              "Answer with extracted_final_answer, reasoning, correct, confidence.")
    content = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompt}]).choices[0].message.content
    verdict = json.loads(content or "")
    assert verdict["correct"] == ("yes" if replies.answer_is_right(question) else "no")


def test_over_max_model_len_is_vllms_400_and_max_tokens_is_clamped(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x" * 5000}])
    assert "maximum context length" in info.value.message
    assert info.value.status_code == 400
    # vLLM 0.32 does not refuse prompt + max_tokens over max_model_len: it cuts the answer at the limit
    clamped = client.chat.completions.create(model=MODEL, max_tokens=999,
                                             messages=[{"role": "user", "content": "x" * 3900}])
    assert clamped.usage is not None and clamped.usage.prompt_tokens == 3900 // 4 + 4
    assert (clamped.choices[0].finish_reason, clamped.usage.total_tokens) == ("length", 1000)
    with pytest.raises(openai.BadRequestError, match="max_tokens=1001 cannot be greater than max_model_len=1000"):
        client.chat.completions.create(model=MODEL, max_tokens=1001, messages=[{"role": "user", "content": "hi"}])


def test_unknown_model_and_bad_body(sim: SimServer, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "hi"}])
    resp = httpx.post(f"{sim.base_url}/v1/chat/completions", content=b"{not json")
    assert resp.status_code == 400 and resp.json()["error"]["code"] == 400


def test_metrics_counters(sim: SimServer, client: openai.OpenAI) -> None:
    before = sim.metrics()
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "count me"}])
    after = sim.metrics()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "sim_max_requests_in_flight"):
        assert name in after
    assert after["sim_requests_total"] == before["sim_requests_total"] + 1
    assert after["vllm:prompt_tokens_total"] > before["vllm:prompt_tokens_total"]
    assert after["vllm:generation_tokens_total"] > before["vllm:generation_tokens_total"]
    assert after["vllm:num_requests_running"] == 0
