"""Token counting and left truncation with a model's own tokenizer (the agent suites' context budgets).

Which tokenizer a model uses (`tokenizer_for`), in this order:

    tokenizer: estimate        the topology asks for a character estimate: 4 characters a token
    tokenizer: PATH            a HuggingFace tokenizer directory or tokenizer.json (the `tokenizers` package)
    the checkpoint directory   when the model is a local path that holds a tokenizer.json
    the replica                POST /tokenize and /detokenize on the model's own replicas (vLLM serves them)

There is no silent fallback to an estimate: a tokenizer that cannot be read is a ConfigError, a
replica that cannot tokenize is a CallError of the call that needed it.

`Tokenizer.keep_last(text, n)` is ToolOrchestra's `cut_seq`: the last `n` tokens of `text` and the full token
count. Text that already fits comes back unchanged (no decode). The kept tokens are decoded in one
piece (the original decodes each token alone and joins the pieces; that differs only where a
multi-byte character was split between tokens, which one decode keeps whole).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from orchestra_ops.client.call_errors import CallError, TransportError
from orchestra_ops.client.pool import Outcome, ReplicaPool
from orchestra_ops.client.retry import RetryPolicy, is_retryable_status
from orchestra_ops.errors import ConfigError

ESTIMATE = "estimate"
CHARS_PER_TOKEN = 4


class Tokenizer(Protocol):
    @property
    def description(self) -> str:
        """Which tokenizer this is, for the routing table."""
        ...

    async def count(self, text: str) -> int: ...

    async def keep_last(self, text: str, limit: int) -> tuple[str, int]:
        """(the last `limit` tokens of `text`, its full token count); `limit` <= 0 keeps nothing."""
        ...


class _EncodeDecode:
    """keep_last and count from encode/decode."""

    async def encode(self, text: str) -> list[int]:
        raise NotImplementedError

    async def decode(self, ids: list[int]) -> str:
        raise NotImplementedError

    async def count(self, text: str) -> int:
        return len(await self.encode(text)) if text else 0

    async def keep_last(self, text: str, limit: int) -> tuple[str, int]:
        if not text:
            return "", 0
        ids = await self.encode(text)
        if len(ids) <= limit:
            return text, len(ids)
        if limit <= 0:
            return "", len(ids)
        return await self.decode(ids[-limit:]), len(ids)


class EstimateTokenizer:
    """4 characters a token, counted from the start of the text (the last token may be shorter)."""

    description = "estimate (4 characters a token; the topology asks for it)"

    async def count(self, text: str) -> int:
        return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN

    async def keep_last(self, text: str, limit: int) -> tuple[str, int]:
        total = await self.count(text)
        if total <= limit:
            return text, total
        return (text[(total - limit) * CHARS_PER_TOKEN:] if limit > 0 else ""), total


class HuggingFaceTokenizer(_EncodeDecode):
    """A tokenizer.json read with the `tokenizers` package (no transformers, no torch)."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer as HFTokenizer
        except ImportError as exc:  # pragma: no cover - a dependency of orchestra-ops
            raise ConfigError(f"reading {path} needs the 'tokenizers' package: {exc}") from None
        try:
            self._tok = HFTokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises its own exception type
            raise ConfigError(f"{path}: not a tokenizer.json the 'tokenizers' package can read: {exc}") from None
        self.description = f"huggingface tokenizer {path}"

    async def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    async def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=True))


@dataclass
class ReplicaTokenizer(_EncodeDecode):
    """vLLM's POST /tokenize {"model", "prompt", "add_special_tokens"} -> {"tokens": [...]} and
    POST /detokenize {"model", "tokens"} -> {"prompt": text}, on the model's own replicas."""

    name: str
    served_name: str
    pool: ReplicaPool
    timeout_s: float
    retry: RetryPolicy

    @property
    def description(self) -> str:
        return f"the replicas' /tokenize and /detokenize ({self.served_name})"

    async def encode(self, text: str) -> list[int]:
        data = await self._post("tokenize", {"model": self.served_name, "prompt": text, "add_special_tokens": False})
        tokens = data.get("tokens")
        if not isinstance(tokens, list):
            raise CallError("bad_response", f"{self.name}: /tokenize answered without a 'tokens' list")
        return [int(t) for t in tokens]

    async def decode(self, ids: list[int]) -> str:
        data = await self._post("detokenize", {"model": self.served_name, "tokens": ids})
        prompt = data.get("prompt")
        if not isinstance(prompt, str):
            raise CallError("bad_response", f"{self.name}: /detokenize answered without a 'prompt' string")
        return prompt

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        body = json.dumps(payload).encode()
        last: CallError | None = None
        previous = None
        for attempt in range(1, self.retry.attempts + 1):
            replica = await self.pool.acquire(avoid=previous)
            previous = replica
            url = replica.chat_url.removesuffix("/v1/chat/completions") + f"/{path}"
            outcome: Outcome = "busy"
            try:
                resp = await self.pool.transport.post(replica, url, body, {"Content-Type": "application/json"},
                                                      self.timeout_s)
            except TransportError as exc:
                outcome = "down" if exc.kind == "connection" else "fail"
                last = CallError(exc.kind, f"/{path}: {exc.message}", attempts=attempt, replica=replica.address)
            else:
                outcome = "ok" if resp.status < 500 else "fail"
                if resp.status == 200:
                    try:
                        data = json.loads(resp.body)
                    except ValueError:
                        data = None
                    if isinstance(data, dict):
                        return data
                    raise CallError("bad_response", f"{replica.address}/{path}: not a JSON object",
                                    attempts=attempt, replica=replica.address)
                text = resp.body[:300].decode(errors="replace")
                last = CallError(f"http_{resp.status}", f"{replica.address}/{path} answered {resp.status}: {text}",
                                 attempts=attempt, replica=replica.address)
                if not is_retryable_status(resp.status):
                    raise last
            finally:
                self.pool.release(replica, outcome)
            if attempt < self.retry.attempts:
                await asyncio.sleep(self.retry.delay(attempt))
        assert last is not None
        raise last


def local_tokenizer_file(path: str) -> Path | None:
    """`path` itself when it is a tokenizer.json, `path/tokenizer.json` when it is a directory holding one."""
    candidate = Path(path).expanduser()
    if candidate.is_file():
        return candidate
    if candidate.is_dir() and (candidate / "tokenizer.json").is_file():
        return candidate / "tokenizer.json"
    return None


def declared_tokenizer(declared: str | None, checkpoint: str | None) -> Tokenizer | None:
    """The tokenizer a topology declares (or a local checkpoint holds); None: ask the replicas."""
    if declared == ESTIMATE:
        return EstimateTokenizer()
    if declared:
        found = local_tokenizer_file(declared)
        if found is None:
            raise ConfigError(f"tokenizer: {declared}: neither a tokenizer.json nor a directory holding one")
        return HuggingFaceTokenizer(found)
    if checkpoint and checkpoint.startswith(("/", "./", "~")):
        found = local_tokenizer_file(checkpoint)
        if found is not None:
            return HuggingFaceTokenizer(found)
    return None
