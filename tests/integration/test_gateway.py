"""`ops serve gateway` over real sims, driven by the `openai` client (sync, async, streaming)."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.fake_replica import FakeReplica
from tests.gatewayserver import GatewayServer
from tests.helpers import run_ops
from tests.integration.gateway_fixtures import SERVED, profile_lines, write_fleet
from tests.simserver import SimServer

QUESTION = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2 + 2?"}]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayServer, list[SimServer], Path]]:
    root = tmp_path_factory.mktemp("gw")
    sims = [SimServer(SERVED, args=["--latency-ms", "5"]) for _ in range(2)]
    try:
        for sim in sims:
            sim.start()
        topology = write_fleet(root, [s.port for s in sims],
                               request_defaults={"chat_template_kwargs": {"enable_thinking": False}})
        with GatewayServer(["--topology", str(topology)], cwd=root, env={"OPS_HOME": str(root / "ops")}) as gw:
            yield gw, sims, root
    finally:
        for sim in sims:
            sim.stop()


def direct(sim: SimServer, **kwargs: object) -> str:
    client = openai.OpenAI(base_url=f"{sim.base_url}/v1", api_key="none", max_retries=0)
    answer = client.chat.completions.create(model=SERVED, messages=QUESTION, temperature=0, **kwargs)  # type: ignore[call-overload]
    return str(answer.choices[0].message.content)


def test_openai_sync_async_and_stream_answer_as_the_replica_does(fleet) -> None:
    gw, sims, _ = fleet
    expected = direct(sims[0], max_tokens=12)
    client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
    for name in ("solver", "answer", SERVED):  # a role, the model key, the served name
        answer = client.chat.completions.create(model=name, messages=QUESTION, temperature=0, max_tokens=12)
        assert answer.choices[0].message.content == expected
        assert answer.model == SERVED
        assert answer.usage is not None and answer.usage.completion_tokens == 12

    async def many() -> list[str]:
        aclient = openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
        async with aclient:
            answers = await asyncio.gather(*(aclient.chat.completions.create(
                model="solver", messages=QUESTION, temperature=0, max_tokens=12) for _ in range(20)))
        return [str(a.choices[0].message.content) for a in answers]

    assert asyncio.run(many()) == [expected] * 20

    pieces = []
    stream = client.chat.completions.create(model="solver", messages=QUESTION, temperature=0, max_tokens=12,
                                            stream=True, stream_options={"include_usage": True})
    usage = None
    for event in stream:
        if event.choices and event.choices[0].delta.content:
            pieces.append(event.choices[0].delta.content)
        if event.usage is not None:
            usage = event.usage
    assert len(pieces) > 1  # passed through chunk by chunk, not gathered into one
    assert "".join(pieces) == expected
    assert usage is not None and usage.completion_tokens == 12


def test_models_lists_roles_keys_and_served_names(fleet) -> None:
    gw, _, _ = fleet
    client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
    ids = sorted(model.id for model in client.models.list())
    assert ids == sorted(["solver", "answer", SERVED])


def test_undeclared_model_is_a_404_naming_the_keys(fleet) -> None:
    gw, _, _ = fleet
    client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    message = str(caught.value)
    assert "'gpt-4o' is neither a role nor a declared model" in message
    assert "roles: solver" in message and "models/providers: answer" in message


def test_admin_routes_are_not_forwarded(fleet) -> None:
    gw, sims, _ = fleet
    before = [sim.metrics().get("vllm:num_requests_running", 0.0) for sim in sims]
    for path in ("/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/reset_prefix_cache", "/sleep"):
        request = urllib.request.Request(f"{gw.base_url}{path}", data=b'{"lora_name": "x", "lora_path": "/x"}',
                                         headers={"content-type": "application/json"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == 404
        body = json.loads(caught.value.read())
        assert f"POST {path} is not a route of the gateway" in body["error"]["message"]
    assert [sim.metrics().get("vllm:num_requests_running", 0.0) for sim in sims] == before


def test_tokenize_and_detokenize_reach_a_replica(fleet) -> None:
    gw, sims, _ = fleet

    def post(base: str, path: str, body: dict) -> dict:
        request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as resp:
            return dict(json.loads(resp.read()))

    via = post(gw.base_url, "/tokenize", {"model": "solver", "prompt": "hello gateway"})
    assert via == post(sims[0].base_url, "/tokenize", {"model": SERVED, "prompt": "hello gateway"})
    back = post(gw.base_url, "/detokenize", {"model": "answer", "tokens": via["tokens"]})
    assert back["prompt"] == "hello gateway"


def test_request_defaults_and_served_name_reach_the_replica(tmp_path: Path) -> None:
    with FakeReplica() as replica:
        topology = write_fleet(tmp_path, [replica.port],
                               request_defaults={"chat_template_kwargs": {"enable_thinking": False}, "top_k": 5})
        with GatewayServer(["--topology", str(topology)], cwd=tmp_path, env={"OPS_HOME": str(tmp_path / "ops")}) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="client-secret", max_retries=0)
            client.chat.completions.create(model="solver", messages=QUESTION,
                                           extra_body={"top_k": 9, "chat_template_kwargs": {"custom": 1}},
                                           extra_headers={"x-session-id": "task-7"})
    [seen] = replica.requests
    assert seen.body["model"] == SERVED
    assert seen.body["top_k"] == 9  # the client's value wins over the default
    assert seen.body["chat_template_kwargs"] == {"enable_thinking": False, "custom": 1}
    assert seen.headers["x-session-id"] == "task-7"
    assert "authorization" not in seen.headers  # the client's key never goes further


def test_request_log_is_what_ops_analyze_reads(tmp_path: Path) -> None:
    with SimServer(SERVED, args=["--latency-ms", "5"]) as sim:
        topology = write_fleet(tmp_path, [sim.port])
        with GatewayServer(["--topology", str(topology)], cwd=tmp_path, env={"OPS_HOME": str(tmp_path / "ops")}) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            for index in range(5):
                client.chat.completions.create(model="solver", messages=QUESTION, max_tokens=4,
                                               extra_headers={"x-session-id": f"s{index % 2}"})
            with pytest.raises(openai.NotFoundError):
                client.chat.completions.create(model="nope", messages=QUESTION)
            assert gw.stop() == 0  # SIGTERM: a clean stop, the log flushed
    run_dir = tmp_path / "runs" / "gateway-gwtest"
    lines = profile_lines(run_dir)
    assert [(e["type"], e["role"], e["model"], e["status"], e["completion_tokens"], e["replica"]) for e in lines] == \
        [("model_call", "solver", "answer", "ok", 4, f"127.0.0.1:{sim.port}")] * 5
    assert [e["task"] for e in lines] == ["s0", "s1", "s0", "s1", "s0"]
    done = run_ops(["analyze", str(run_dir), "--json"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stats = json.loads((run_dir / "analysis" / "stats.json").read_text())
    assert stats["calls"]["model_calls"] == 5
    assert stats["by_role"]["solver"]["count"] == 5
    assert json.loads((run_dir / "run.json").read_text())["suite"] == "gateway"


def test_cache_answers_a_repeat_without_a_model_call(tmp_path: Path) -> None:
    with FakeReplica() as replica:
        topology = write_fleet(tmp_path, [replica.port])
        args = ["--topology", str(topology), "--cache-file", str(tmp_path / "cache.sqlite")]
        with GatewayServer(args, cwd=tmp_path, env={"OPS_HOME": str(tmp_path / "ops")}) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            first = client.chat.completions.create(model="solver", messages=QUESTION, temperature=0)
            again = client.chat.completions.create(model=SERVED, messages=QUESTION, temperature=0)
            sampled = [client.chat.completions.create(model="solver", messages=QUESTION, temperature=1)
                       for _ in range(2)]
            time.sleep(1.5)  # the request log is flushed every second
            lines = profile_lines(tmp_path / "runs" / "gateway-gwtest")
    assert again.model_dump() == first.model_dump()
    assert len(replica.requests) == 1 + len(sampled)  # the repeat was answered from the cache
    assert [e.get("cache") for e in lines] == [None, "hit", None, None]
