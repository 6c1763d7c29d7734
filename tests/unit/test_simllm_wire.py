"""The sim's vLLM-shaped pieces that need no server: prefix-cache accounting, cutting an answer to its
budget, error-message sanitizing, and the /tokenize count of a chat prompt."""

from __future__ import annotations

import json

from orchestra_ops.services.simllm import replies, tokens, wire
from orchestra_ops.services.simllm.prefix_cache import BLOCK_CHARS, BLOCK_TOKENS, PrefixCache
from orchestra_ops.services.simllm.tokenize_routes import chat_prompt_ids

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "enum": ["paris", "rome"]}}}}}


def test_prefix_cache_hits_whole_blocks_of_a_shared_prefix_never_the_last_token() -> None:
    cache = PrefixCache()
    key = "k" * (BLOCK_CHARS * 6)
    assert cache.admit(key, 5 * BLOCK_TOKENS + 70) == (0, 5 * BLOCK_TOKENS)  # 5 full blocks created
    assert cache.admit(key, 5 * BLOCK_TOKENS + 70) == (5 * BLOCK_TOKENS, 0)  # all of them hit
    # exactly 3 blocks long: the block holding the last token is recomputed, so 2 hit
    assert cache.admit(key, 3 * BLOCK_TOKENS) == (2 * BLOCK_TOKENS, 0)
    # a prompt that shares only its first block hits only that one, and adds its own next blocks
    other = key[:BLOCK_CHARS] + "x" * (BLOCK_CHARS * 2)
    assert cache.admit(other, 3 * BLOCK_TOKENS + 1) == (BLOCK_TOKENS, 2 * BLOCK_TOKENS)
    assert cache.admit("short", BLOCK_TOKENS - 1) == (0, 0)


def test_prefix_cache_forgets_the_least_recently_used_blocks() -> None:
    cache = PrefixCache(capacity_blocks=2)
    first, second = "a" * BLOCK_CHARS * 2, "b" * BLOCK_CHARS * 2
    assert cache.admit(first, 2 * BLOCK_TOKENS + 1) == (0, 2 * BLOCK_TOKENS)
    assert cache.admit(second, 2 * BLOCK_TOKENS + 1) == (0, 2 * BLOCK_TOKENS)  # pushes `first` out
    assert cache.admit(first, 2 * BLOCK_TOKENS + 1) == (0, 2 * BLOCK_TOKENS)


def test_fit_cuts_an_answer_to_its_budget_with_finish_length() -> None:
    reply = replies.Reply(replies.EXPERT, "x" * 100)  # 25 tokens
    assert replies.fit(reply, 25) is reply and reply.finish_reason == "stop"
    cut = replies.fit(reply, 4)
    assert (cut.content, cut.finish_reason, replies.completion_tokens(cut)) == ("x" * 16, "length", 4)
    call = replies.Reply(replies.ORCHESTRATOR, None, [{"name": "get_weather", "arguments": '{"city": "rome"}'}])
    assert replies.fit(call, 40) is call and call.finish_reason == "tool_calls"
    written = replies.fit(call, 3)  # a call cut short is text, no longer a call (as vLLM's parser sees it)
    assert (written.tool_calls, written.finish_reason, written.content) == ([], "length", "<tool_call>\n")
    assert replies.hermes_text(call) == \
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "rome"}}\n</tool_call>'


def test_error_messages_hide_paths_as_vllm_does() -> None:
    assert wire.sanitize_message("Loading lora x failed: No adapter found for /tmp/a/b-c") == \
        "Loading lora x failed: No adapter found for <path>"
    assert wire.sanitize_message("bad file ./data/x/model.safetensors here") == "bad file .<path> here"
    assert wire.sanitize_message("The lora adapter 'ft' cannot be found.") == "The lora adapter 'ft' cannot be found."
    assert wire.sanitize_message("<Obj at 0x7f00ab>") == "<Obj>"


def test_tokenize_of_chat_messages_counts_what_the_chat_prompt_is_billed() -> None:
    bodies = [
        {"messages": [{"role": "user", "content": "hello"}]},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q" * 37}],
         "tools": [WEATHER]},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "rome"}'}}]},
            {"role": "tool", "tool_call_id": "c", "content": "sunny"}]},
    ]
    for body in bodies:
        ids = chat_prompt_ids(body)
        assert len(ids) == replies.prompt_tokens(body), json.dumps(body)
        assert tokens.decode([i for i in ids if i != tokens.TEMPLATE_TOKEN]).startswith(
            replies.message_text(body["messages"][0]))
