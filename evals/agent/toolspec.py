"""The three tools (a data file, `--template tools=PATH`) and the validation of the calls a round made.

The file is a JSON list of OpenAI function tools named `search`, `enhance_reasoning` and
`answer`, each with one required string parameter `model` (an expert alias). A tool's allowed
aliases are its `model` parameter's `enum`; a file without an enum (the original tools.json lists
the aliases in prose) is validated against the original's table (protocol.DEFAULT_ALIASES).

A round's calls are checked in order as the original does (§2.3 step 5-6): no call at all is 342;
an unknown tool 350; arguments that are not a JSON object 351; a missing or unknown `model` 360;
the first valid call is the one executed; the calls after it are not looked at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from orchestra_ops.evals.agent.protocol import (
    BAD_ARGUMENTS,
    BAD_MODEL,
    DEFAULT_ALIASES,
    NO_CALL,
    TOOL_ROLES,
    UNKNOWN_TOOL,
)

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.templates import Template


@dataclass(frozen=True)
class ToolSpec:
    tools: list[dict[str, Any]]  # as sent to the orchestrator
    allowed: dict[str, tuple[str, ...]]  # tool name -> its aliases

    def offered(self, exclude: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
        return [t for t in self.tools if t["function"]["name"] not in exclude]


def load_tools(template: Template) -> ToolSpec:
    """Parse and check the tools file; every problem is a ConfigError naming the file."""
    where = f"template 'tools' ({template.source})"
    try:
        tools = json.loads(template.text)
    except ValueError as exc:
        raise ConfigError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(tools, list) or not tools:
        raise ConfigError(f"{where}: expected a JSON list of function tools")
    allowed: dict[str, tuple[str, ...]] = {}
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or name not in TOOL_ROLES:
            raise ConfigError(f"{where}: tool {index}: name must be one of {', '.join(TOOL_ROLES)} (got {name!r})")
        if name in allowed:
            raise ConfigError(f"{where}: tool '{name}' is defined twice")
        assert isinstance(function, dict)
        params = function.get("parameters")
        model = params.get("properties", {}).get("model") if isinstance(params, dict) else None
        if not isinstance(model, dict):
            raise ConfigError(f"{where}: tool '{name}' has no 'model' parameter (the expert alias)")
        enum = model.get("enum")
        if enum is not None and (not isinstance(enum, list) or not enum or not all(isinstance(a, str) for a in enum)):
            raise ConfigError(f"{where}: tool '{name}': parameters.properties.model.enum must be a list of aliases")
        allowed[name] = tuple(enum) if enum else DEFAULT_ALIASES[name]
    missing = [name for name in TOOL_ROLES if name not in allowed]
    if missing:
        raise ConfigError(f"{where}: no tool '{missing[0]}' (the loop needs search, enhance_reasoning and answer)")
    return ToolSpec(tools=tools, allowed=allowed)


@dataclass
class RoundCalls:
    """The tool calls of one orchestrator reply, checked."""

    raw: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}] as the model sent them
    codes: list[int | None] = field(default_factory=list)  # per call checked: its invalid code, None: the chosen
    chosen: int | None = None  # index into raw of the call that runs
    arguments: dict[str, Any] = field(default_factory=dict)  # the chosen call's parsed arguments

    @property
    def invalid(self) -> list[int]:
        if not self.raw:
            return [NO_CALL]
        return [code for code in self.codes if code is not None]

    @property
    def tool(self) -> str | None:
        return None if self.chosen is None else str(self.raw[self.chosen]["name"])

    @property
    def alias(self) -> str | None:
        return None if self.chosen is None else str(self.arguments["model"])


def check_calls(message: dict[str, Any], spec: ToolSpec) -> RoundCalls:
    """Check one orchestrator message's `tool_calls` in order up to the first valid one (§2.3)."""
    result = RoundCalls()
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        name = str(function.get("name", "")) if isinstance(function, dict) else ""
        sent = function.get("arguments") if isinstance(function, dict) else None
        result.raw.append({"name": name, "arguments": sent})
    for index, call in enumerate(result.raw):
        arguments: Any = call["arguments"]
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = None
        if call["name"] not in TOOL_ROLES:
            result.codes.append(UNKNOWN_TOOL)
        elif not isinstance(arguments, dict):
            result.codes.append(BAD_ARGUMENTS)
        elif arguments.get("model") not in spec.allowed[call["name"]]:
            result.codes.append(BAD_MODEL)
        else:
            result.codes.append(None)
            result.chosen = index
            result.arguments = arguments
            break  # the first valid call runs; later calls are not looked at
    return result
