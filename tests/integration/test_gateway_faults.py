"""The gateway when things go wrong: a replica killed under load, a stream cut by its replica, a
connection dropped before the answer, keys and tokens, a bind that would expose provider keys; and a
session pinned to one rank of vLLM's internal data parallelism."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import textwrap
from collections import Counter
from pathlib import Path

import httpx
import openai
import pytest

from orchestra_ops.client.dp_ranks import rank_for
from orchestra_ops.gateway.body import session_of
from tests.fake_replica import FakeReplica
from tests.gatewayserver import GatewayServer
from tests.helpers import run_ops
from tests.integration.gateway_fixtures import SERVED, profile_lines, write_fleet, write_model_config
from tests.simserver import SimServer

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


def test_replica_killed_with_sigkill_under_load_fails_no_request(tmp_path: Path) -> None:
    sims = [SimServer("m", args=["--latency-ms", "40"]) for _ in range(3)]
    try:
        for sim in sims:
            sim.start()
        config = write_model_config(tmp_path, [s.port for s in sims])
        with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
            total, killed_at = 300, 60

            async def load() -> list[str]:
                client = openai.AsyncOpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0,
                                            timeout=60)
                done = 0
                gate = asyncio.Semaphore(32)

                async def one(index: int) -> str:
                    nonlocal done
                    async with gate:
                        answer = await client.chat.completions.create(
                            model="m", messages=[{"role": "user", "content": f"question {index}"}], max_tokens=4)
                    done += 1
                    if done == killed_at:
                        os.kill(sims[0].pid, signal.SIGKILL)  # a replica we started, by pid
                    return str(answer.choices[0].message.content)

                async with client:
                    return await asyncio.gather(*(one(i) for i in range(total)))  # raises on any failure

            answers = asyncio.run(load())
            assert len(answers) == total and all(answers)
            assert sims[0].process is not None and sims[0].process.wait(10) == -signal.SIGKILL
            metrics = gw.metrics()
            assert metrics.get("ops_gateway_errors_total", 0.0) == 0.0
            answered = {port: metrics.get(f'ops_gateway_requests_total{{model="m",replica="127.0.0.1:{port}",'
                                          'code="200"}', 0.0) for port in (s.port for s in sims)}
            assert sum(answered.values()) == total
            assert 0 < answered[sims[0].port] < total / 3  # it took its share until it died, then none
    finally:
        for sim in sims:
            sim.stop()


def test_stream_cut_by_the_replica_is_an_error_and_never_retried(tmp_path: Path) -> None:
    with FakeReplica(mode="cut_stream", chunks_before_cut=2) as cutting:
        config = write_model_config(tmp_path, [cutting.port])
        with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            received = []
            with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):
                for event in client.chat.completions.create(model="m", messages=QUESTION, stream=True):
                    if event.choices and event.choices[0].delta.content:
                        received.append(event.choices[0].delta.content)
            assert received == ["fake ", "answer "]  # the bytes that came, then the cut
            metrics = gw.metrics()
            assert gw.stop() == 0
    assert len(cutting.requests) == 1  # after the first byte: never retried (a retry would come here again)
    assert metrics['ops_gateway_errors_total{model="m",kind="stream_cut"}'] == 1.0
    [line] = profile_lines(tmp_path / "runs" / "gateway-fleet")
    assert (line["status"], line["attempts"], line["replica"]) == ("stream_cut", 1, f"127.0.0.1:{cutting.port}")


def test_connection_dropped_before_the_first_byte_is_retried_elsewhere(tmp_path: Path) -> None:
    with FakeReplica(mode="drop") as dropping, FakeReplica() as healthy:
        config = write_model_config(tmp_path, [dropping.port, healthy.port])
        with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            answers = []
            for index in range(16):  # sessions land on either replica; those on the dropping one are retried
                session = {"x-session-id": f"s{index}"}
                if index % 2:
                    answers.append("".join(e.choices[0].delta.content or "" for e in client.chat.completions.create(
                        model="m", messages=QUESTION, stream=True, extra_headers=session) if e.choices))
                else:
                    answers.append(str(client.chat.completions.create(
                        model="m", messages=QUESTION, extra_headers=session).choices[0].message.content))
            gw.stop()
    assert answers == ["fake answer", "fake answer here"] * 8
    assert len(dropping.requests) >= 1 and len(healthy.requests) == 16
    lines = profile_lines(tmp_path / "runs" / "gateway-fleet")
    assert [(e["status"], e["replica"]) for e in lines] == [("ok", f"127.0.0.1:{healthy.port}")] * 16
    assert sum(e["attempts"] - 1 for e in lines) == len(dropping.requests)


def test_provider_key_injected_and_gateway_token_checked(tmp_path: Path) -> None:
    provider_key, token = "sk-provider-abcdef123456", "gw-token-0987654321"
    env = {"OPS_HOME": str(tmp_path / "ops"), "EXT_KEY": provider_key, "GW_TOKEN": token}
    with FakeReplica(content="from the provider") as provider, SimServer(SERVED, args=["--latency-ms", "1"]) as sim:
        topology = write_fleet(tmp_path, [sim.port], providers={
            "ext": {"model": "gpt-x", "base_url": f"{provider.base_url}/v1", "api_key_env": "EXT_KEY"}})
        with GatewayServer(["--topology", str(topology), "--api-key-env", "GW_TOKEN"], cwd=tmp_path, env=env) as gw:
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="wrong", max_retries=0).models.list()
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key=token, max_retries=0)
            answer = client.chat.completions.create(model="ext-role", messages=QUESTION,
                                                    extra_headers={"x-session-id": "task-9"})
            local = client.chat.completions.create(model="solver", messages=QUESTION, max_tokens=3)
            assert httpx.get(f"{gw.base_url}/health").status_code == 200  # no token needed
            gw.stop()
    assert answer.choices[0].message.content == "from the provider"
    assert local.usage is not None and local.usage.completion_tokens == 3
    [seen] = provider.requests
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == "gpt-x"
    assert seen.headers["authorization"] == f"Bearer {provider_key}"  # its own key, not the client's token
    assert "x-session-id" not in seen.headers  # nothing about the client's tasks leaves the machine
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert provider_key not in written and token not in written  # logs, profile, run.json


def test_non_loopback_bind_with_provider_keys_needs_a_token(tmp_path: Path) -> None:
    topology = write_fleet(tmp_path, [9], providers={
        "ext": {"model": "gpt-x", "base_url": "https://api.example.invalid/v1", "api_key_env": "EXT_KEY"}})
    env = {"OPS_HOME": str(tmp_path / "ops"), "EXT_KEY": "sk-provider-abcdef123456"}
    done = run_ops(["serve", "gateway", "--topology", str(topology), "--host", "0.0.0.0", "--port", "9"], env=env,
                   cwd=tmp_path)
    assert done.returncode == 2
    assert "--host 0.0.0.0 is not loopback" in done.stderr and "--api-key-env" in done.stderr
    assert "Traceback" not in done.stderr
    unset = run_ops(["serve", "gateway", "--topology", str(topology), "--api-key-env", "NOT_SET_ANYWHERE",
                     "--port", "9"], env=env, cwd=tmp_path)
    assert unset.returncode == 2 and "--api-key-env NOT_SET_ANYWHERE: the variable is not set" in unset.stderr


def test_sessions_stick_to_one_replica(tmp_path: Path) -> None:
    sims = [SimServer("m", args=["--latency-ms", "2"]) for _ in range(3)]
    try:
        for sim in sims:
            sim.start()
        config = write_model_config(tmp_path, [s.port for s in sims])
        with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            history: dict[str, list[dict[str, str]]] = {f"task-{i}": [] for i in range(12)}
            for round_ in range(3):
                for session, messages in history.items():
                    messages.append({"role": "user", "content": f"{session} round {round_}"})
                    answer = client.chat.completions.create(model="m", messages=messages, max_tokens=2,
                                                            extra_headers={"x-session-id": session})
                    messages.append({"role": "assistant", "content": str(answer.choices[0].message.content)})
            for _ in range(3):  # no header: the first system and user message place it
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "same start"}],
                                               max_tokens=2)
            gw.stop()
    finally:
        for sim in sims:
            sim.stop()
    lines = profile_lines(tmp_path / "runs" / "gateway-fleet")
    by_session: dict[str, set[str]] = {}
    for line in lines[:36]:
        by_session.setdefault(line["task"], set()).add(line["replica"])
    assert sorted(by_session) == sorted(history)
    assert all(len(replicas) == 1 for replicas in by_session.values())
    assert len(Counter(next(iter(r)) for r in by_session.values())) > 1  # sessions spread over replicas
    assert len({line["replica"] for line in lines[36:]}) == 1


def test_a_session_is_pinned_to_one_rank_of_vllm_internal_dp(tmp_path: Path) -> None:
    """One endpoint in front of 4 internal DP ranks: a session's calls carry its rank (the client's hash),
    a call without x-session-id the rank of its first messages' hash, a client's own rank header wins."""
    with FakeReplica() as replica:
        topology = tmp_path / "dp.yaml"
        topology.write_text(textwrap.dedent(f"""\
            name: gwdp
            nodes: {{cpu: {{host: localhost, gpus: 0}}}}
            models:
              answer: {{model: /ckpt/a, served_model_name: {SERVED}, node: cpu, replicas: 4, gpus_per_replica: 0,
                       port: {replica.port}, data_parallel: {{mode: vllm-internal}}}}
            roles: {{solver: answer}}
            """))
        endpoints = tmp_path / "ops" / "gwdp" / "model_config.json"
        endpoints.parent.mkdir(parents=True)
        endpoints.write_text(json.dumps({SERVED: [{"ip_addr": "127.0.0.1", "port": replica.port}]}))
        env = {"OPS_HOME": str(tmp_path / "ops")}
        with GatewayServer(["--topology", str(topology)], cwd=tmp_path, env=env) as gw:
            client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
            sessions = [f"task-{i}" for i in range(8)]
            for session in [*sessions, *sessions]:
                client.chat.completions.create(model="solver", messages=QUESTION,
                                               extra_headers={"x-session-id": session})
            client.chat.completions.create(model="solver", messages=QUESTION)
            client.chat.completions.create(model="solver", messages=QUESTION,
                                           extra_headers={"x-session-id": "task-1", "X-data-parallel-rank": "3"})
            gw.stop()
    sent = [seen.headers.get("x-data-parallel-rank") for seen in replica.requests]
    expected = [str(rank_for(session, 4)) for session in [*sessions, *sessions]]
    assert sent == [*expected, str(rank_for(session_of({}, {"messages": QUESTION}) or "", 4)), "3"]
    assert len(set(expected)) > 1  # the sessions spread over the ranks (a fixed hash: this never flakes)
