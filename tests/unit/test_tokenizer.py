"""Which tokenizer counts the budgets: a tokenizer.json, a checkpoint dir, an estimate; never silently."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from orchestra_ops.client.tokenizer import EstimateTokenizer, HuggingFaceTokenizer, declared_tokenizer
from orchestra_ops.errors import ConfigError

TEXT = "The luthier Ada Okafor grew up in Lisbon and collects antique maps. " * 20


def _tokenizer_json(path: Path) -> Path:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([TEXT] * 5, trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    return path


def test_a_tokenizer_json_keeps_the_last_tokens(tmp_path: Path) -> None:
    directory = _tokenizer_json(tmp_path / "ckpt")
    found = declared_tokenizer(str(directory), None)
    assert isinstance(found, HuggingFaceTokenizer) and str(directory) in found.description
    total = asyncio.run(found.count(TEXT))
    kept, length = asyncio.run(found.keep_last(TEXT, 25))
    assert length == total > 25 and TEXT.endswith(kept) and asyncio.run(found.count(kept)) == 25
    assert asyncio.run(found.keep_last("short", 25)) == ("short", asyncio.run(found.count("short")))
    same = declared_tokenizer(None, str(directory))  # a local checkpoint dir holding one
    assert isinstance(same, HuggingFaceTokenizer)
    assert declared_tokenizer(None, "Qwen/Qwen3-8B") is None  # a hub id: ask the replicas


def test_estimate_only_when_asked_and_a_bad_path_is_an_error(tmp_path: Path) -> None:
    estimate = declared_tokenizer("estimate", None)
    assert isinstance(estimate, EstimateTokenizer)
    assert asyncio.run(estimate.keep_last("abcdefghij", 2)) == ("efghij", 3)
    with pytest.raises(ConfigError, match=r"neither a tokenizer\.json nor a directory holding one"):
        declared_tokenizer(str(tmp_path / "missing"), None)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"not a tokenizer\.json"):
        declared_tokenizer(str(tmp_path / "bad.json"), None)
