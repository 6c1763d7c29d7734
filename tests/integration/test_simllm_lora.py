"""The simulated engine serves LoRA adapters the way vLLM does, over real HTTP (services/simllm/lora.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from orchestra_ops.services.simllm import replies, rules
from orchestra_ops.services.simllm.lora import adapter_reply

from tests.adapters import make_adapter
from tests.helpers import free_port, run_ops
from tests.simserver import SimServer

RUNTIME = {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true"}


def post(sim: SimServer, route: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{sim.base_url}{route}", json=body, timeout=10)


def cards(sim: SimServer) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = httpx.get(f"{sim.base_url}/v1/models", timeout=10).json()["data"]
    return data


def chat(sim: SimServer, model: str | None, text: str) -> httpx.Response:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
    if model is not None:
        body["model"] = model
    return httpx.post(f"{sim.base_url}/v1/chat/completions", json=body, timeout=10)


def test_static_and_runtime_adapters(tmp_path: Path, sim_server: Callable[..., SimServer]) -> None:
    static = make_adapter(tmp_path / "static")
    ft, big, dora = make_adapter(tmp_path / "ft", r=8), make_adapter(tmp_path / "big", r=16), \
        make_adapter(tmp_path / "dora", config={"use_dora": True})
    item = json.dumps({"name": "st", "path": str(static), "base_model_name": "sim/base"})
    sim = sim_server("sim/base", args=["--enable-lora", "--max-lora-rank", "8", "--lora-modules", item], env=RUNTIME)
    listed = cards(sim)
    assert [(c["id"], c["root"], c["parent"], c["max_model_len"]) for c in listed] == [
        ("sim/base", "sim/base", None, 32768), ("st", str(static), "sim/base", None)]

    loaded = post(sim, "/v1/load_lora_adapter", {"lora_name": "ft", "lora_path": str(ft)})
    assert (loaded.status_code, loaded.text) == (200, "Success: LoRA adapter 'ft' added successfully.")
    assert [c["id"] for c in cards(sim)] == ["sim/base", "st", "ft"]
    refusals = [
        ({"lora_name": "ft", "lora_path": str(ft)}, 400, "The lora adapter 'ft' has already been loaded. "
         "If you want to load the adapter in place, set 'load_inplace' to True."),
        ({"lora_name": "x"}, 400, "1 validation error: 'lora_path' is required"),
        ({"lora_name": "sim/base", "lora_path": str(ft)}, 400,
         "The lora adapter name 'sim/base' is the name of a base model."),
        ({"lora_name": "x", "lora_path": str(tmp_path / "nope")}, 404,
         "Loading lora x failed: No adapter found for <path>"),  # vLLM writes paths under /tmp as <path>
        ({"lora_name": "x", "lora_path": str(big)}, 500, "LoRA rank 16 is greater than max_lora_rank 8."),
        ({"lora_name": "x", "lora_path": str(dora)}, 500, "Loading lora x failed: uses DoRA (use_dora: true), which "
         "vLLM cannot serve; merge the adapter into the base model and serve the merged checkpoint instead"),
    ]
    for body, status, message in refusals:
        answer = post(sim, "/v1/load_lora_adapter", body)
        assert (answer.status_code, answer.json()["error"]["message"]) == (status, message)
    assert post(sim, "/v1/load_lora_adapter", {"lora_name": "ft", "lora_path": str(ft),
                                               "load_inplace": True}).status_code == 200

    question = "What is the boiling point of water at sea level?"
    base_text = rules.respond({"model": "sim/base", "messages": [{"role": "user", "content": question}]}).content
    answered = {model: chat(sim, model, question).json() for model in (None, "sim/base", "st", "ft")}
    assert answered[None]["choices"][0]["message"]["content"] == base_text
    assert answered["sim/base"]["choices"][0]["message"]["content"] == base_text
    for name in ("st", "ft"):
        expected = adapter_reply(replies.Reply(replies.EXPERT, base_text), name).content
        assert answered[name]["choices"][0]["message"]["content"] == expected != base_text
        assert answered[name]["model"] == name
    missing = chat(sim, "other", question)
    assert (missing.status_code, missing.json()["error"]["message"]) == (
        404, "The model `other` does not exist. Valid aliases: sim/base.")

    removed = post(sim, "/v1/unload_lora_adapter", {"lora_name": "ft"})
    assert (removed.status_code, removed.text) == (200, "Success: LoRA adapter 'ft' removed successfully.")
    again = post(sim, "/v1/unload_lora_adapter", {"lora_name": "ft"})
    assert (again.status_code, again.json()["error"]["message"]) == (404, "The lora adapter 'ft' cannot be found.")
    assert [c["id"] for c in cards(sim)] == ["sim/base", "st"]
    assert chat(sim, "ft", question).status_code == 404


def test_without_runtime_updating_the_routes_do_not_exist(tmp_path: Path,
                                                          sim_server: Callable[..., SimServer]) -> None:
    sim = sim_server("sim/base", args=["--enable-lora"], env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "0"})
    answer = post(sim, "/v1/load_lora_adapter", {"lora_name": "ft", "lora_path": str(make_adapter(tmp_path / "ft"))})
    assert answer.status_code == 404 and "error" not in answer.text


def test_a_static_adapter_that_fails_aborts_startup(tmp_path: Path) -> None:
    big = make_adapter(tmp_path / "big", r=32)
    proc = run_ops(["serve", "sim", "--port", str(free_port()), "--model", "m", "--enable-lora",
                    "--lora-modules", f"ft={big}"], timeout=60)
    assert proc.returncode == 2
    assert "error: --lora-modules: cannot load adapter 'ft': LoRA rank 32 is greater than max_lora_rank 16." \
        in proc.stderr
    assert "Traceback" not in proc.stderr
