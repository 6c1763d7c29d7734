"""The generic orchestrator role of the simulated engine (rules.py, role 2): tool calls, then an answer.

Pure functions of the request; rules.py documents the behaviour and dispatches here.
"""

from __future__ import annotations

import json
from typing import Any

from orchestra_ops.services.simllm.replies import (
    ORCHESTRATOR,
    Reply,
    _digest,
    answer_token,
    expert_text,
    orchestrator_rounds,
    question_of,
)

_ANSWER_PROPS = ("answer", "final_answer", "response", "content", "text")


def tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict):
            return str(function.get("name", ""))
    return ""


def schema_args(tool: Any, question: str, token: str, salt: int) -> dict[str, Any]:
    function = tool.get("function") if isinstance(tool, dict) else None
    params = function.get("parameters") if isinstance(function, dict) else None
    props = params.get("properties") if isinstance(params, dict) else None
    if not isinstance(props, dict):
        return {}
    required = params.get("required") if isinstance(params, dict) else None
    names = [n for n in required if n in props] if isinstance(required, list) and required else list(props)
    args: dict[str, Any] = {}
    for name in names:
        schema = props[name] if isinstance(props[name], dict) else {}
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            args[name] = schema["enum"][salt % len(schema["enum"])]
        elif kind == "integer":
            args[name] = 1
        elif kind == "number":
            args[name] = 1.0
        elif kind == "boolean":
            args[name] = True
        elif kind == "array":
            args[name] = []
        elif kind == "object":
            args[name] = {}
        elif name.lower() in _ANSWER_PROPS:
            args[name] = token
        else:
            args[name] = question[:200]
    return args


def call(tool: Any, question: str, token: str, salt: int) -> dict[str, str]:
    args = schema_args(tool, question, token, salt)
    return {"name": tool_name(tool), "arguments": json.dumps(args)}


def orchestrate(body: dict[str, Any], messages: list[Any]) -> Reply:
    tools = [t for t in body.get("tools") or [] if tool_name(t)]
    question = question_of(messages)
    token = answer_token(question)
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
               and m.get("tool_calls"))
    salt = int(_digest(question)[10:14], 16) + done
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        wanted = str((choice.get("function") or {}).get("name", ""))
        named = [t for t in tools if tool_name(t) == wanted]
        if named:
            return Reply(ORCHESTRATOR, None, [call(named[0], question, token, salt)])
    answer_tools = [t for t in tools if "answer" in tool_name(t).lower()]
    other_tools = [t for t in tools if t not in answer_tools]
    if other_tools and done < orchestrator_rounds(question):
        return Reply(ORCHESTRATOR, None, [call(other_tools[done % len(other_tools)], question, token, salt)])
    if answer_tools:
        return Reply(ORCHESTRATOR, None, [call(answer_tools[0], question, token, salt)])
    if choice == "required" and tools:
        return Reply(ORCHESTRATOR, None, [call(tools[done % len(tools)], question, token, salt)])
    return Reply(ORCHESTRATOR, expert_text(token))
