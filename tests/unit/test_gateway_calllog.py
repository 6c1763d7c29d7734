"""The gateway's request-log line is byte for byte the engine's `model_call` event (CallEvent + json.dumps)."""

from __future__ import annotations

import hashlib
import json

import pytest

from orchestra_ops.client.chat import CallEvent
from orchestra_ops.gateway.body import session_of
from orchestra_ops.gateway.calllog import call_line
from orchestra_ops.gateway.forward import usage_of

CASES = [
    {"role": "solver", "model": "answer", "replica": "127.0.0.1:8001", "start": 1795803631.7952019,
     "latency_s": 0.06429212, "prompt_tokens": 5, "completion_tokens": 12, "attempts": 1, "status": "ok"},
    {"role": "ex\"tr\u00e4 \\ role\n", "model": "m", "replica": None, "start": 1.0, "latency_s": 2.5,
     "prompt_tokens": None, "completion_tokens": None, "attempts": 3, "status": "stream_cut",
     "error": "127.0.0.1:9: the server closed \"it\"", "task": "task-7"},
    {"role": "m", "model": "m", "replica": "cache", "start": 1795803631.0, "latency_s": 1e-05, "prompt_tokens": 0,
     "completion_tokens": 1, "attempts": 0, "status": "ok", "cached": True},
]


@pytest.mark.parametrize("case", CASES)
def test_call_line_is_the_engines_event(case: dict) -> None:
    line = call_line(**case)
    assert line == json.dumps(CallEvent(**case).to_json())
    assert json.loads(line)["type"] == "model_call"


def test_usage_of_reads_the_last_usage_object() -> None:
    body = (b'{"choices": [{"message": {"content": "\\"usage\\" is a word"}}], "usage": {"prompt_tokens": 17, '
            b'"total_tokens": 21, "completion_tokens": 4, "prompt_tokens_details": null}}')
    assert usage_of(body) == (17, 4)
    assert usage_of(b'{"choices": []}') == (None, None)
    assert usage_of(b'data: {"choices": [], "usage": {"prompt_tokens":3,"completion_tokens":2}}\n\n') == (3, 2)


def test_session_of_header_first_then_first_system_and_user_message() -> None:
    messages = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "q1"},
                {"role": "assistant", "content": "a1"}, {"role": "user", "content": "q2"}]
    assert session_of({"x-session-id": "task-1"}, {"messages": messages}) == "task-1"
    key = session_of({}, {"messages": messages})
    assert key is not None and key.startswith("h:")
    assert session_of({}, {"messages": messages[:2]}) == key  # later rounds keep the key
    assert session_of({}, {"messages": [{"role": "system", "content": "be terse!"}, messages[1]]}) != key
    assert session_of({}, {"messages": [{"role": "system", "content": "be terse\x00q1"},
                                        {"role": "user", "content": ""}]}) != key  # no ambiguous join
    assert session_of({}, {"prompt": "a completion"}) is None


def _blake(text: str) -> str:
    return "h:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def test_session_of_hashes_exactly_the_documented_text() -> None:
    terse = [{"role": "system", "content": "be terse"}, {"role": "user", "content": "q1"}]
    assert session_of({}, {"messages": terse}) == _blake("8:be terse\x00q1")
    assert session_of({}, {"messages": [{"role": "user", "content": "q1"}]}) == _blake("-\x00q1")
    parts = [{"type": "text", "text": "q"}]
    assert session_of({}, {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": parts}]}) \
        == _blake('1:s\x00[{"text": "q", "type": "text"}]')
    assert session_of({}, {"messages": [{"role": "system", "content": "s"}]}) == _blake("1:s\x00null")
