"""The gateway in front of a real vLLM replica (the CPU build serving the tiny model): the openai client's
chat (whole and streamed, the same greedy tokens as asking the replica), /tokenize and /v1/models."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import openai
import pytest

from tests.gatewayserver import GatewayServer
from tests.realvllm import VllmServer

pytestmark = pytest.mark.vllm

QUESTION = [{"role": "user", "content": "Say something."}]


def test_gateway_over_real_vllm(real_vllm: VllmServer, tmp_path: Path) -> None:
    config = tmp_path / "fleet.json"
    config.write_text(json.dumps({real_vllm.served_name: [{"ip_addr": "127.0.0.1", "port": real_vllm.port}]}))
    direct = openai.OpenAI(base_url=f"{real_vllm.base_url}/v1", api_key="none", max_retries=0)
    expected = direct.chat.completions.create(model=real_vllm.served_name, messages=QUESTION, max_tokens=8,
                                              temperature=0)
    with GatewayServer(["--model-config", str(config)], cwd=tmp_path) as gw:
        client = openai.OpenAI(base_url=f"{gw.base_url}/v1", api_key="none", max_retries=0)
        answer = client.chat.completions.create(model=real_vllm.served_name, messages=QUESTION, max_tokens=8,
                                                temperature=0)
        pieces = [e.choices[0].delta.content or "" for e in client.chat.completions.create(
            model=real_vllm.served_name, messages=QUESTION, max_tokens=8, temperature=0, stream=True) if e.choices]
        request = urllib.request.Request(f"{gw.base_url}/tokenize", headers={"content-type": "application/json"},
                                         data=json.dumps({"model": real_vllm.served_name, "prompt": "hello"}).encode())
        with urllib.request.urlopen(request, timeout=30) as resp:
            tokens = json.loads(resp.read())
        assert [m.id for m in client.models.list()] == [real_vllm.served_name]
        metrics = gw.metrics()
    assert answer.choices[0].message.content == expected.choices[0].message.content
    assert answer.usage is not None and expected.usage is not None
    assert answer.usage.completion_tokens == expected.usage.completion_tokens
    assert "".join(pieces) == expected.choices[0].message.content
    assert tokens["count"] == len(tokens["tokens"]) > 0
    assert metrics[f'ops_gateway_requests_total{{model="{real_vllm.served_name}",replica="127.0.0.1:'
                   f'{real_vllm.port}",code="200"}}'] == 3.0
