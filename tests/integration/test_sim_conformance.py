"""The simulator answers as vLLM does: the same probes to a sim replica and a real vLLM replica (the CPU
build serving the tiny model, tests/realvllm.py), compared field by field.

What is compared is the wire, not the text: a random-weight model writes newlines where the sim writes
its rules' answers, so contents differ; keys, types, statuses, error bodies, finish reasons, token
accounting (usage against /tokenize, the context limit, prefix-cache blocks) and metric names must not.
Both replicas serve the name `tiny` with max_model_len 2048, LoRA with runtime updates,
--enable-prompt-tokens-details and --enable-force-include-usage (the recipe's §3 command).

One real vLLM replica (~45 s to start) and one sim serve the whole module; skipped where `.venv-vllm`
or `.tiny-model` is missing. Nothing here depends on timing: every request is answered before the
next is sent, and the real model is greedy (temperature 0, ignore_eos) so its lengths are exact.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestra_ops.client.call_errors import CallError
from orchestra_ops.client.chat import ChatResult, ModelClient
from orchestra_ops.client.pool import ReplicaPool
from orchestra_ops.client.replica import Replica as PoolReplica
from orchestra_ops.client.retry import RetryPolicy
from orchestra_ops.client.transport import AiohttpTransport
from orchestra_ops.fleet import probes as health
from orchestra_ops.fleet.lora import calls
from orchestra_ops.fleet.state import ProcessRecord
from tests.realvllm import MAX_MODEL_LEN, SERVED_NAME, TINY_ADAPTER, VllmServer
from tests.simserver import SimServer

pytestmark = pytest.mark.timeout(900)  # the first test also waits for the real replica to start

BLOCK = 128  # vLLM's KV block on the CPU build: prefix-cache hits come in whole blocks
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["paris", "rome"]}},
                   "required": ["city"], "additionalProperties": False}}}


@dataclass(frozen=True)
class Replica:
    """One side of the comparison: 'vllm' or 'sim', and where it serves."""

    label: str
    base_url: str
    port: int

    def get(self, route: str) -> httpx.Response:
        return httpx.get(f"{self.base_url}{route}", timeout=120)

    def post(self, route: str, body: Any) -> httpx.Response:
        return httpx.post(f"{self.base_url}{route}", json=body, timeout=120)

    def chat(self, **fields: Any) -> httpx.Response:
        return self.post("/v1/chat/completions", {"model": SERVED_NAME, "temperature": 0, **fields})

    def tokenize_count(self, messages: list[dict[str, Any]]) -> int:
        response = self.post("/tokenize", {"model": SERVED_NAME, "messages": messages})
        assert response.status_code == 200, response.text
        return int(response.json()["count"])

    def stream(self, **fields: Any) -> tuple[list[dict[str, Any]], str]:
        """The JSON chunks of a streamed chat answer, and its last `data:` line."""
        with httpx.stream("POST", f"{self.base_url}/v1/chat/completions", timeout=120,
                          json={"model": SERVED_NAME, "temperature": 0, "stream": True, **fields}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
        return [json.loads(line) for line in lines[:-1]], lines[-1]


@pytest.fixture(scope="module")
def sim_tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimServer]:
    """The sim configured as the real replica is (tests/realvllm.py ENGINE_ARGS)."""
    server = SimServer(SERVED_NAME, args=["--max-model-len", str(MAX_MODEL_LEN), "--latency-ms", "1",
                                          "--enable-lora", "--max-lora-rank", "16",
                                          "--enable-prompt-tokens-details", "--enable-force-include-usage"],
                       env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"},
                       log_dir=tmp_path_factory.mktemp("sim"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def both(real_vllm: VllmServer, sim_tiny: SimServer) -> list[Replica]:
    return [Replica("vllm", real_vllm.base_url, real_vllm.port), Replica("sim", sim_tiny.base_url, sim_tiny.port)]


def shape(value: Any) -> Any:
    """The structure of a JSON value: keys kept, leaves replaced by their type (list: its items' shapes)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        shapes: list[Any] = []
        for item in value:
            if shape(item) not in shapes:
                shapes.append(shape(item))
        return shapes
    return None if value is None else type(value).__name__


def each(both: list[Replica], probe: Callable[[Replica], Any]) -> dict[str, Any]:
    return {replica.label: probe(replica) for replica in both}


def same(answers: dict[str, Any]) -> Any:
    """The common answer of both replicas (asserting that they agree)."""
    assert answers["sim"] == answers["vllm"], answers
    return answers["vllm"]


def numbers_out(text: str) -> str:
    return re.sub(r"\d+", "N", text)


# ---- health, version, models ------------------------------------------------------------------


def test_health_is_200_with_an_empty_body_and_version_is_a_string(both: list[Replica]) -> None:
    assert same(each(both, lambda r: (r.get("/health").status_code, r.get("/health").content))) == (200, b"")
    versions = each(both, lambda r: r.get("/version").json())
    assert same({k: sorted(v) for k, v in versions.items()}) == ["version"]
    assert all(re.fullmatch(r"\d+\.\d+\.\d+\S*", v["version"]) for v in versions.values())


def test_models_lists_the_served_name_with_its_context(both: list[Replica]) -> None:
    models = each(both, lambda r: r.get("/v1/models").json())
    assert same({k: shape(v) for k, v in models.items()})
    for listed in models.values():
        assert [(c["id"], c["object"], c["owned_by"], c["parent"], c["max_model_len"])
                for c in listed["data"]] == [(SERVED_NAME, "model", "vllm", None, MAX_MODEL_LEN)]


# ---- chat ---------------------------------------------------------------------------------------


HELLO = [{"role": "user", "content": "hello"}]


def test_chat_answer_has_vllms_fields_and_usage(both: list[Replica]) -> None:
    answers = each(both, lambda r: r.chat(messages=HELLO, max_tokens=4, ignore_eos=True))
    assert same({k: v.status_code for k, v in answers.items()}) == 200
    bodies = {k: v.json() for k, v in answers.items()}
    same({k: shape(v) for k, v in bodies.items()})
    for label, body in bodies.items():
        choice = body["choices"][0]
        assert (body["object"], body["model"], choice["finish_reason"]) == ("chat.completion", SERVED_NAME, "length")
        assert "reasoning" in choice["message"] and "reasoning_content" not in choice["message"]
        assert "tool_calls" not in choice["message"]  # vLLM leaves the key out when there are none
        usage = body["usage"]
        prompt = next(r for r in both if r.label == label).tokenize_count(HELLO)
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (prompt, 4, prompt + 4)
        assert sorted(usage["prompt_tokens_details"]) == ["cached_tokens", "created_cache_tokens", "multimodal_tokens"]


def test_stream_chunks_first_delta_finish_usage_and_done(both: list[Replica]) -> None:
    streams = each(both, lambda r: r.stream(messages=HELLO, max_tokens=3, ignore_eos=True,
                                            stream_options={"include_usage": True}))
    for label, (chunks, last) in streams.items():
        assert last == "[DONE]", label
        *with_choices, usage_chunk = chunks
        assert with_choices[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        finishing = with_choices[-1]["choices"][0]
        assert finishing["finish_reason"] == "length" and finishing["delta"]["content"], label  # on the last content
        assert all(c["choices"][0]["finish_reason"] is None for c in with_choices[:-1])
        assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 3
        # --enable-force-include-usage: usage on every chunk, counting the tokens sent so far
        assert with_choices[0]["usage"]["completion_tokens"] == 0
        assert with_choices[-1]["usage"]["completion_tokens"] == 3
    same({k: shape(chunks[0]) for k, (chunks, _) in streams.items()})
    same({k: shape(chunks[-1]) for k, (chunks, _) in streams.items()})
    same({k: shape(chunks[-2]) for k, (chunks, _) in streams.items()})
    same({k: [shape(c) for c in chunks[1:-2]][:1] for k, (chunks, _) in streams.items()})


def sized_prompt(replica: Replica, tokens: int) -> list[dict[str, Any]]:
    """A user message that is `tokens` prompt tokens, give or take 8, by the replica's own /tokenize."""

    def messages(n: int) -> list[dict[str, Any]]:
        return [{"role": "user", "content": "a clamp probe " + "hello world " * n}]

    low, high = replica.tokenize_count(messages(10)), replica.tokenize_count(messages(110))
    n = 10 + round((tokens - low) * 100 / (high - low))
    while replica.tokenize_count(messages(n)) > tokens:
        n -= 1
    assert tokens - 8 <= replica.tokenize_count(messages(n)) <= tokens
    return messages(n)


def test_prompt_plus_max_tokens_over_the_context_is_clamped_not_refused(both: list[Replica]) -> None:
    for replica in both:
        messages = sized_prompt(replica, MAX_MODEL_LEN - 16)
        answer = replica.chat(messages=messages, max_tokens=2000, ignore_eos=True)
        assert answer.status_code == 200, (replica.label, answer.text)
        usage = answer.json()["usage"]
        assert answer.json()["choices"][0]["finish_reason"] == "length", replica.label
        assert usage["total_tokens"] == MAX_MODEL_LEN, (replica.label, usage)
        assert 16 <= usage["completion_tokens"] == MAX_MODEL_LEN - usage["prompt_tokens"] <= 24, replica.label


def test_refusals_have_vllms_status_and_error_body(both: list[Replica]) -> None:
    def error(response: httpx.Response) -> tuple[int, dict[str, Any]]:
        return response.status_code, response.json()["error"]

    too_many_tokens = same(each(both, lambda r: error(r.chat(
        messages=[{"role": "user", "content": "hello world " * 1500}], max_tokens=4))))
    assert too_many_tokens == (400, {
        "message": f"This model's maximum context length is {MAX_MODEL_LEN} tokens. However, your prompt contains "
                   f"at least {MAX_MODEL_LEN + 1} input tokens, which exceeds this limit even without any output "
                   f"tokens. Please reduce the length of the input prompt. (parameter=input_tokens, "
                   f"value={MAX_MODEL_LEN + 1})",
        "type": "BadRequestError", "param": "input_tokens", "code": 400})
    too_many_chars = each(both, lambda r: error(r.chat(messages=[{"role": "user", "content": "a" * 40000}],
                                                       max_tokens=4)))
    same({k: (status, {**body, "message": numbers_out(body["message"])}) for k, (status, body)
          in too_many_chars.items()})
    assert too_many_chars["sim"][1]["param"] == "input_text"
    assert "characters (more than 32768 characters, which is the upper bound for 2048 input tokens)" in \
        too_many_chars["sim"][1]["message"]
    assert same(each(both, lambda r: error(r.chat(messages=HELLO, max_tokens=3000)))) == (400, {
        "message": "max_tokens=3000 cannot be greater than max_model_len=2048. Please request fewer output tokens. "
                   "(parameter=max_tokens, value=3000)", "type": "BadRequestError", "param": "max_tokens", "code": 400})
    unknown = {"message": "The model `nope` does not exist. Valid aliases: tiny.", "type": "NotFoundError",
               "param": "model", "code": 404}
    assert same(each(both, lambda r: error(r.post("/v1/chat/completions",
                                                  {"model": "nope", "messages": HELLO})))) == (404, unknown)
    assert same(each(both, lambda r: error(r.post("/tokenize", {"model": "nope", "prompt": "x"})))) == (404, unknown)


# ---- tool calls -----------------------------------------------------------------------------------


def test_required_tool_choice_gives_one_schema_valid_call(both: list[Replica]) -> None:
    answers = each(both, lambda r: r.chat(messages=HELLO, tools=[WEATHER], tool_choice="required",
                                          parallel_tool_calls=False, max_tokens=60).json())
    same({k: shape(v["choices"][0]) for k, v in answers.items()})
    for body in answers.values():
        choice = body["choices"][0]
        assert (choice["finish_reason"], choice["message"]["content"]) == ("tool_calls", "")
        [call] = choice["message"]["tool_calls"]
        assert call["id"].startswith("chatcmpl-tool-") and call["type"] == "function"
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"])["city"] in ("paris", "rome")


def test_named_tool_choice_ends_with_stop(both: list[Replica]) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    answers = each(both, lambda r: r.chat(messages=HELLO, tools=[WEATHER], tool_choice=named, max_tokens=60).json())
    same({k: shape(v["choices"][0]) for k, v in answers.items()})
    for body in answers.values():
        choice = body["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert [c["function"]["name"] for c in choice["message"]["tool_calls"]] == ["get_weather"]


def test_streamed_tool_call_names_then_fragments(both: list[Replica]) -> None:
    streams = each(both, lambda r: r.stream(messages=HELLO, tools=[WEATHER], tool_choice="required",
                                            parallel_tool_calls=False, max_tokens=60))
    for label, (chunks, last) in streams.items():
        assert last == "[DONE]"
        deltas = [d for c in chunks if c["choices"] for d in c["choices"][0]["delta"].get("tool_calls") or []]
        first, *rest = deltas
        assert sorted(first) == ["function", "id", "index", "type"] and first["function"]["name"] == "get_weather"
        assert all(sorted(d) == ["function", "index"] and d["function"]["name"] is None for d in rest), label
        arguments = "".join(d["function"]["arguments"] for d in deltas)
        assert json.loads(arguments)["city"] in ("paris", "rome")
        assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    same({k: sorted(chunks[1]["choices"][0]["delta"]) for k, (chunks, _) in streams.items()})


def client_calls(replica: Replica) -> tuple[ChatResult, ChatResult, CallError]:
    """ops' own chat client (orchestra_ops/client) against one replica: a plain answer, a forced tool
    call, and a prompt over max_model_len (no max_model_len given, so the server decides)."""

    async def main() -> tuple[ChatResult, ChatResult, CallError]:
        transport = AiohttpTransport()
        pool = ReplicaPool("tiny", [PoolReplica.for_server("127.0.0.1", replica.port, 8)], transport)
        client = ModelClient(name="tiny", served_name=SERVED_NAME, pool=pool, request_timeout_s=120,
                             retry=RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_max_s=0.02))
        try:
            plain = await client.chat(HELLO, max_tokens=4, temperature=0, ignore_eos=True)
            tool = await client.chat(HELLO, tools=[WEATHER], tool_choice="required", parallel_tool_calls=False,
                                     max_tokens=60, temperature=0)
            try:
                await client.chat([{"role": "user", "content": "hello world " * 1500}], max_tokens=4)
            except CallError as exc:
                return plain, tool, exc
            raise AssertionError("a prompt over max_model_len was answered")
        finally:
            await pool.close()
            await transport.close()

    return asyncio.run(main())


def test_ops_chat_client_reads_both_alike(both: list[Replica]) -> None:
    results = each(both, client_calls)
    for label, (plain, tool, refused) in results.items():
        assert isinstance(plain.content, str) and plain.finish_reason == "length", label
        assert (plain.completion_tokens, plain.attempts) == (4, 1), label
        assert plain.prompt_tokens == next(r for r in both if r.label == label).tokenize_count(HELLO)
        assert tool.content == "" and tool.finish_reason == "tool_calls", label
        assert [c["function"]["name"] for c in tool.message["tool_calls"]] == ["get_weather"]
        assert (refused.kind, refused.attempts) == ("context_length", 1), label  # a 400 is not retried
        assert "maximum context length is 2048 tokens" in refused.message, label


# ---- tokenize ---------------------------------------------------------------------------------------


def test_tokenize_and_detokenize(both: list[Replica]) -> None:
    plain = each(both, lambda r: r.post("/tokenize", {"model": SERVED_NAME, "prompt": "hello world"}).json())
    assert same({k: sorted(v) for k, v in plain.items()}) == ["count", "max_model_len", "token_strs", "tokens"]
    for body in plain.values():
        assert (body["count"], body["max_model_len"], body["token_strs"]) == (len(body["tokens"]), MAX_MODEL_LEN, None)
    back = each(both, lambda r: r.post("/detokenize", {"model": SERVED_NAME, "tokens": plain[r.label]["tokens"]}))
    assert same({k: v.json() for k, v in back.items()}) == {"prompt": "hello world"}
    chat = each(both, lambda r: r.post("/tokenize", {"model": SERVED_NAME, "messages": HELLO,
                                                     "return_token_strs": True}).json())
    same({k: shape(v) for k, v in chat.items()})
    for label, body in chat.items():
        assert len(body["token_strs"]) == len(body["tokens"]) == body["count"]
        replica = next(r for r in both if r.label == label)
        usage = replica.chat(messages=HELLO, max_tokens=1).json()["usage"]
        assert usage["prompt_tokens"] == body["count"], label  # /tokenize counts what a chat request is billed


# ---- metrics ----------------------------------------------------------------------------------------

# What ops reads (orchestra_ops/fleet/probes.py) and what the issue names, with vLLM 0.32's types.
METRICS = {
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_waiting_by_reason": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:engine_sleep_state": "gauge", "vllm:cache_config_info": "gauge",
    "vllm:prefix_cache_queries_total": "counter", "vllm:prefix_cache_hits_total": "counter",
    "vllm:prompt_tokens_cached_total": "counter", "vllm:num_preemptions_total": "counter",
    "vllm:prompt_tokens_total": "counter", "vllm:generation_tokens_total": "counter",
    "vllm:request_success_total": "counter",
}


def families(text: str) -> dict[str, tuple[str, set[frozenset[str]]]]:
    """name -> (TYPE, the label-key sets of its samples) of a Prometheus text."""
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    labels: dict[str, set[frozenset[str]]] = {}
    for name, inner in re.findall(r"^([a-zA-Z_:][\w:]*)\{([^}]*)\} \S+$", text, re.M):
        labels.setdefault(name, set()).add(frozenset(re.findall(r'(\w+)="', inner)))
    return {name: (kind, labels.get(name, set())) for name, kind in types.items()}


def sample(text: str, name: str) -> float:
    """A metric's value summed over its label sets."""
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? (\S+)$", text, re.M))


def test_metric_names_types_labels_and_units(both: list[Replica]) -> None:
    texts = each(both, lambda r: r.get("/metrics").text)
    found = {k: families(t) for k, t in texts.items()}
    for name, kind in METRICS.items():
        assert found["vllm"][name][0] == kind, name  # our list is vLLM's truth
        if name == "vllm:cache_config_info":  # an info gauge: the labels are the news (the sim has fewer)
            assert found["sim"][name][0] == kind, name
            continue
        assert found["sim"][name] == found["vllm"][name], name
    for label, text in texts.items():
        load = health.parse_metrics(text)  # ops' own reader
        assert (load.running, load.waiting) == (0.0, 0.0), label
        assert load.kv_cache is not None and 0.0 <= load.kv_cache <= 1.0, label
        assert re.search(r'^vllm:cache_config_info\{.*block_size="128".*\} 1\.0$', text, re.M), label


def settled_metrics(replica: Replica, name: str, at_least: float) -> str:
    """/metrics once `name` has reached `at_least` (vLLM's engine reports its step stats with the outputs,
    which the API server records as it hands them on; read until they are in, for at most 10 s)."""
    for _ in range(100):
        text = replica.get("/metrics").text
        if sample(text, name) >= at_least:
            return text
        time.sleep(0.1)
    return text


def test_prefix_cache_counts_tokens_in_whole_blocks(both: list[Replica]) -> None:
    for replica in both:
        messages = [{"role": "user", "content": "prefix cache probe " + "lorem ipsum dolor " * 160}]
        n = replica.tokenize_count(messages)
        assert n > 3 * BLOCK
        before = replica.get("/metrics").text
        first = replica.chat(messages=messages, max_tokens=1).json()["usage"]
        second = replica.chat(messages=messages, max_tokens=1).json()["usage"]
        queries = "vllm:prefix_cache_queries_total"
        after = settled_metrics(replica, queries, sample(before, queries) + 2 * n)
        assert first["prompt_tokens"] == second["prompt_tokens"] == n
        assert first["prompt_tokens_details"] == {"cached_tokens": 0, "created_cache_tokens": n // BLOCK * BLOCK,
                                                  "multimodal_tokens": None}, replica.label
        assert second["prompt_tokens_details"]["cached_tokens"] == (n - 1) // BLOCK * BLOCK, replica.label
        delta = {name: sample(after, name) - sample(before, name) for name in (
            "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:prompt_tokens_total")}
        assert delta == {"vllm:prefix_cache_queries_total": 2 * n,
                         "vllm:prefix_cache_hits_total": (n - 1) // BLOCK * BLOCK,
                         "vllm:prompt_tokens_total": 2 * n}, replica.label


# ---- LoRA ---------------------------------------------------------------------------------------------


def record(replica: Replica) -> ProcessRecord:
    return ProcessRecord(name=f"{replica.label}-0", group="tiny", kind="vllm", host="127.0.0.1", port=replica.port,
                         log="", argv=[], env={}, served_model_name=SERVED_NAME, endpoint_key=SERVED_NAME)


def test_runtime_lora_answers_and_ops_readers(both: list[Replica], tmp_path: Path) -> None:
    path = str(TINY_ADAPTER)
    missing = str(tmp_path / "no-such-adapter")  # under /tmp: vLLM writes it "<path>" in its errors

    def load(r: Replica, name: str, where: str) -> httpx.Response:
        return r.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": where})

    def answer(response: httpx.Response) -> tuple[int, Any]:
        is_json = response.headers.get("content-type", "").startswith("application/json")
        return response.status_code, response.json() if is_json else response.text

    assert same(each(both, lambda r: answer(load(r, "ft", path)))) == (
        200, "Success: LoRA adapter 'ft' added successfully.")
    try:
        assert same(each(both, lambda r: answer(load(r, "ft", path)))) == (400, {"error": {
            "message": "The lora adapter 'ft' has already been loaded. If you want to load the adapter in place, "
                       "set 'load_inplace' to True.", "type": "InvalidUserInput", "param": None, "code": 400}})
        assert same(each(both, lambda r: answer(load(r, "bad", missing)))) == (404, {"error": {
            "message": "Loading lora bad failed: No adapter found for <path>", "type": "NotFoundError",
            "param": None, "code": 404}})
        models = each(both, lambda r: r.get("/v1/models").json()["data"])
        same({k: shape(v) for k, v in models.items()})
        assert same({k: [(c["id"], c["parent"], c["root"], c["max_model_len"]) for c in v[1:]]
                     for k, v in models.items()}) == [("ft", SERVED_NAME, path, None)]
        replies = each(both, lambda r: r.chat(model="ft", messages=HELLO, max_tokens=2).json())
        assert same({k: (v["model"], shape(v)) for k, v in replies.items()})[0] == "ft"
        assert same(each(both, lambda r: answer(r.chat(model="nope", messages=HELLO)))) == (404, {"error": {
            "message": "The model `nope` does not exist. Valid aliases: tiny.", "type": "NotFoundError",
            "param": "model", "code": 404}})  # adapters are not aliases
        lora_info = {k: families(r.get("/metrics").text)["vllm:lora_requests_info"][1] for k, r in
                     ((r.label, r) for r in both)}
        assert same(lora_info) == {frozenset({"max_lora", "running_lora_adapters", "waiting_lora_adapters"})}
        # ops' readers: the health probe lists the adapter, `ops lora` sees it loaded
        probes = asyncio.run(health.probe_all([health.Target(r.label, "127.0.0.1", r.port, "vllm", SERVED_NAME)
                                               for r in both]))
        assert [(p.state, p.adapters) for p in probes] == [(health.State.READY, ("ft",))] * 2
        outcomes = asyncio.run(calls.each([record(r) for r in both], 30,
                                          lambda client, rec: calls.load_one(client, rec, "ft", path)))
        assert [(o.ok, o.status) for o in outcomes] == [(False, 400)] * 2
        assert all("already been loaded" in o.message for o in outcomes)
    finally:
        unloaded = each(both, lambda r: answer(r.post("/v1/unload_lora_adapter", {"lora_name": "ft"})))
    assert same(unloaded) == (200, "Success: LoRA adapter 'ft' removed successfully.")
    outcomes = asyncio.run(calls.each([record(r) for r in both], 30,
                                      lambda client, rec: calls.unload_one(client, rec, "ft")))
    assert [(o.ok, o.status, o.message) for o in outcomes] == [(True, 404, "was not loaded")] * 2
    assert same(each(both, lambda r: answer(r.post("/v1/unload_lora_adapter", {"lora_name": "ft"})))) == (
        404, {"error": {"message": "The lora adapter 'ft' cannot be found.", "type": "NotFoundError",
                        "param": None, "code": 404}})
    assert same(each(both, lambda r: answer(r.chat(model="ft", messages=HELLO))))[0] == 404
