"""What a served name stands for (client/identity.py) and the cache key built from it: a changed adapter,
a replaced model or another provider changes the key; the same files keep it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from orchestra_ops.client.cache import request_key
from orchestra_ops.client.identity import EDGE_BYTES, directory_fingerprint, identity_digest, static_identity
from orchestra_ops.client.routing import Target, engine_arg
from tests.adapters import make_adapter

BODY = {"model": "ft", "messages": [{"role": "user", "content": "2+2?"}], "temperature": 0}


def adapter_target(path: str | None, name: str = "ft") -> Target:
    return Target(name=name, kind="model", served_name=name, addresses=(("127.0.0.1", 1),), adapter_of="base",
                  adapter_path=path, checkpoint="sim/base")


def key_of(target: Target, workdir: str | None = None, roots: tuple[str, ...] = ()) -> str:
    return request_key(BODY, identity_digest(static_identity(target, workdir, roots)))


def test_a_copy_with_another_lora_alpha_is_another_key_and_the_same_dir_the_same(tmp_path: Path) -> None:
    first = make_adapter(tmp_path / "ckpt-200")
    second = tmp_path / "ckpt-400"
    shutil.copytree(first, second)
    config = json.loads((second / "adapter_config.json").read_text())
    config["lora_alpha"] = 64
    (second / "adapter_config.json").write_text(json.dumps(config, indent=2))

    key_a = key_of(adapter_target(str(first)))
    assert key_a == key_of(adapter_target(str(first)))  # the same dir, read again
    assert key_a != key_of(adapter_target(str(second)))
    assert key_a != request_key(BODY)  # the body alone is not the key
    identity = static_identity(adapter_target(str(first)))
    assert identity == {"served": "ft", "revision": None, "roots": [],
                        "declared": {"path": str(first.resolve()), "fingerprint": directory_fingerprint(first)}}


def test_the_fingerprint_follows_the_weights_head_tail_size_and_mtime(tmp_path: Path) -> None:
    adapter = make_adapter(tmp_path / "a", weights=None)
    weights = adapter / "adapter_model.bin"
    weights.write_bytes(bytes(3 * EDGE_BYTES))
    os.utime(weights, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    before = directory_fingerprint(adapter)
    assert directory_fingerprint(adapter) == before

    def rewrite(offset: int) -> str:
        data = bytearray(3 * EDGE_BYTES)
        data[offset] = 1
        weights.write_bytes(bytes(data))
        os.utime(weights, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))  # the same mtime
        return directory_fingerprint(adapter)

    assert rewrite(0) != before  # a byte of the head
    assert rewrite(3 * EDGE_BYTES - 1) != before  # a byte of the tail
    assert rewrite(EDGE_BYTES + 5) == before  # the middle is not read (size and mtime stand for it)
    os.utime(weights, ns=(1_700_000_000_000_000_001, 1_700_000_000_000_000_001))
    assert directory_fingerprint(adapter) != before  # rewritten in place: another mtime
    weights.write_bytes(bytes(3 * EDGE_BYTES + 1))
    os.utime(weights, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    assert directory_fingerprint(adapter) != before  # another size

    config = adapter / "adapter_config.json"
    weights.write_bytes(bytes(3 * EDGE_BYTES))
    os.utime(weights, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
    os.utime(config, ns=(1, 1))
    assert directory_fingerprint(adapter) == before  # a JSON file is keyed on its bytes, not its mtime


def test_what_the_replicas_serve_and_what_was_recorded_both_count(tmp_path: Path) -> None:
    recorded = make_adapter(tmp_path / "recorded")
    served = make_adapter(tmp_path / "served", r=4)
    target = adapter_target(str(recorded))
    with_roots = static_identity(target, roots=(str(served), str(served)))
    assert with_roots["roots"] == [{"path": str(served.resolve()), "fingerprint": directory_fingerprint(served)}]
    assert key_of(target, roots=(str(served),)) != key_of(target, roots=(str(recorded),))
    relative = adapter_target("served")  # a lora_modules path relative to where `ops up` ran
    assert key_of(relative, workdir=str(tmp_path)) == key_of(adapter_target(str(served)))
    # a directory on another node, not visible here: its path is all there is to key on
    remote = static_identity(adapter_target(None), roots=("/node7/ckpt-200",))
    assert (remote["declared"], remote["roots"]) == (None, [{"path": "/node7/ckpt-200", "fingerprint": None}])
    assert key_of(adapter_target(None), roots=("/node7/ckpt-200",)) != \
        key_of(adapter_target(None), roots=("/node7/ckpt-400",))
    # an endpoints file names no directory: only what the replicas report keys the name
    bare = static_identity(adapter_target(str(recorded)), roots=(str(served),), declared=False)
    assert bare["declared"] is None and bare["roots"] == with_roots["roots"]


def test_a_replaced_model_or_revision_or_provider_is_another_key(tmp_path: Path) -> None:
    def model(checkpoint: str, revision: str | None = None) -> Target:
        return Target(name="answer", kind="model", served_name="m", addresses=(("127.0.0.1", 1),),
                      checkpoint=checkpoint, revision=revision)

    assert key_of(model("Qwen/Qwen3-8B")) == key_of(model("Qwen/Qwen3-8B"))
    assert key_of(model("Qwen/Qwen3-8B")) != key_of(model("Qwen/Qwen3-14B"))  # same served name
    assert key_of(model("Qwen/Qwen3-8B", "abc123")) != key_of(model("Qwen/Qwen3-8B", "def456"))
    ckpt = tmp_path / "latest"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"hidden_size": 8}')
    before = key_of(model(str(ckpt)))
    (ckpt / "config.json").write_text('{"hidden_size": 16}')  # a new checkpoint written over the old one
    assert key_of(model(str(ckpt))) != before

    def provider(url: str) -> Target:
        return Target(name="judge", kind="provider", served_name="gpt-x", base_url=url, api_key_env="K")

    assert static_identity(provider("https://a.example/v1")) == {"provider": "https://a.example/v1", "model": "gpt-x"}
    assert key_of(provider("https://a.example/v1")) != key_of(provider("https://b.example/v1"))


def test_engine_arg_reads_both_spellings_and_the_last_wins() -> None:
    assert engine_arg(["--dtype", "bfloat16", "--revision", "r1"], "--revision") == "r1"
    assert engine_arg(["--revision=r1", "--revision", "r2"], "--revision") == "r2"
    assert engine_arg(["--revision"], "--revision") is None
    assert engine_arg(["--tokenizer-revision", "x"], "--revision") is None
