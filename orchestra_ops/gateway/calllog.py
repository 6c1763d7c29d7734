"""The request log's line: a `model_call` event of profile.jsonl, byte for byte as `CallEvent.to_json`
and `json.dumps` write it (tests/unit/test_gateway_calllog.py holds the two together), formatted
directly because the gateway writes one per request and the generic path costs ~5x more."""

from __future__ import annotations

from json.encoder import encode_basestring_ascii as _quote


def _text(value: str | None) -> str:
    return "null" if value is None else _quote(value)


def _int(value: int | None) -> str:
    return "null" if value is None else str(int(value))


def call_line(*, role: str, model: str, replica: str | None, start: float, latency_s: float,
              prompt_tokens: int | None, completion_tokens: int | None, attempts: int, status: str,
              error: str | None = None, task: str | None = None, cached: bool = False) -> str:
    line = (f'{{"type": "model_call", "task": {_text(task)}, "role": {_quote(role)}, "model": {_quote(model)}, '
            f'"replica": {_text(replica)}, "start": {round(start, 6)!r}, "latency": {round(latency_s, 6)!r}, '
            f'"prompt_tokens": {_int(prompt_tokens)}, "completion_tokens": {_int(completion_tokens)}, '
            f'"attempts": {attempts}, "status": {_quote(status)}')
    if error:
        line += f', "error": {_quote(error)}'
    if cached:
        line += ', "cache": "hit"'
    return line + "}"
