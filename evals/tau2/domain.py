"""A τ²-bench domain as data plus functions: its DB (plain JSON), agent tools, user tools, env functions.

A tool is a function `fn(db, **arguments)` registered with its kind (read, write, think, generic:
write tools mutate the DB, the others never do), its description and parameters (the OpenAI function
schema the agent is offered). A tool raises `ToolError` (or any ValueError/TypeError/KeyError) for a
call it refuses; it validates everything before it mutates, so a refused call changes nothing.

`Env` is one environment: the agent DB, the user DB (None for a domain without user tools) and the
domain. `call` runs a tool the way τ²-bench's environment does (reference §1.4): the requestor picks
the toolkit, an exception becomes `"Error: <message>"` with error=True, any other result is
serialised as τ²-bench serialises it; `db_hash` is sha256 of the DB's JSON with sorted keys.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

READ, WRITE, THINK, GENERIC = "read", "write", "think", "generic"
KINDS = (READ, WRITE, THINK, GENERIC)


class ToolError(ValueError):
    """A tool refused a call (the caller sees `Error: <message>`)."""


@dataclass(frozen=True)
class Tool:
    name: str
    fn: Callable[..., Any]
    kind: str
    description: str
    parameters: Mapping[str, Mapping[str, Any]]  # name -> JSON schema (with "description")
    required: tuple[str, ...]

    @property
    def mutates(self) -> bool:
        return self.kind == WRITE

    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": {"type": "object", "properties": {k: dict(v) for k, v in self.parameters.items()},
                           "required": list(self.required)}}}


@dataclass
class Toolkit:
    """Tools (offered to a caller) and env functions (initialization actions, assertions: never offered)."""

    tools: dict[str, Tool] = field(default_factory=dict)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def tool(self, kind: str, doc: str, /, _required: tuple[str, ...] | None = None,
             **parameters: Mapping[str, Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a tool; its parameters are keyword arguments (JSON schemas); all are required
        unless `_required` names the required ones."""
        assert kind in KINDS, kind

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            required = tuple(parameters) if _required is None else _required
            self.tools[fn.__name__] = Tool(fn.__name__, fn, kind, doc, parameters, required)
            return fn

        return register

    def function(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        self.functions[fn.__name__] = fn
        return fn


def record(db: Mapping[str, Any], table: str, key: str, missing: str) -> dict[str, Any]:
    """`db[table][key]`, or a ToolError saying `missing` (each domain keeps τ²-bench's own wording)."""
    if key not in db[table]:
        raise ToolError(missing)
    found: dict[str, Any] = db[table][key]
    return found


_OPS: dict[type, Callable[..., float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.USub: operator.neg}


def arithmetic(node: ast.AST) -> float:
    """The value of a parsed expression of numbers, + - * / and parentheses (no eval: anything else refused)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](arithmetic(node.left), arithmetic(node.right)))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](arithmetic(node.operand)))
    raise ToolError("only numbers, + - * / and parentheses")


def calculate_checked(expression: str) -> str:
    """τ²-bench's `calculate` (airline, retail): characters checked first, the result rounded to 2 places."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ToolError("Invalid characters in expression")
    try:
        return str(round(arithmetic(ast.parse(expression, mode="eval").body), 2))
    except SyntaxError as exc:
        raise ToolError(f"invalid expression: {exc.msg}") from None


def param(kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


@dataclass(frozen=True)
class Domain:
    """A domain: its toolkits, how its DBs are normalised after loading, and its user-sim tools."""

    name: str
    agent: Toolkit
    user: Toolkit | None = None
    normalize_db: Callable[[dict[str, Any]], dict[str, Any]] = lambda db: db
    normalize_user_db: Callable[[dict[str, Any]], dict[str, Any]] = lambda db: db
    default_user_db: Mapping[str, Any] | None = None  # the user DB when the data dir has none
    sync: Callable[[Env], None] | None = None  # after every step (telecom's dual control)

    def agent_schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.agent.tools.values()]

    def user_schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.user.tools.values()] if self.user else []

    def tool_kind(self, name: str) -> str | None:
        for kit in (self.agent, self.user):
            if kit is not None and name in kit.tools:
                return kit.tools[name].kind
        return None


def db_hash(db: Any) -> str | None:
    if db is None:
        return None
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()


class Dumped(dict[str, Any]):
    """A pydantic model's dump that a tool returns: τ²-bench's environment writes a returned model's
    `model_dump()` as it is, so its numbers and booleans stay JSON numbers and booleans."""


def dumped(value: Any) -> Any:
    """What a tool returns where τ²-bench's returns pydantic models (one, or a list or tuples of them):
    each record becomes `Dumped`, so its numbers and booleans stay native in the tool message."""
    if isinstance(value, dict):
        return Dumped(value)
    if isinstance(value, (list, tuple)):
        return [dumped(item) for item in value]
    return value


def to_json_str(value: Any) -> str:
    """A tool's result as τ²-bench's environment writes it (numbers and booleans become strings,
    except inside a returned model: `Dumped`)."""

    def process(item: Any) -> Any:
        if isinstance(item, Dumped):
            return dict(item)
        if isinstance(item, str) or item is None:
            return item
        if isinstance(item, (bool, int, float)):
            return str(item)
        if isinstance(item, (list, tuple)):
            return [process(i) for i in item]
        if isinstance(item, dict):
            return {k: process(v) for k, v in item.items()}
        return str(item)

    return value if isinstance(value, str) else json.dumps(process(value), default=str)


def deep_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`initialization_data` merged into a DB: dicts merge key by key, anything else replaces."""
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


class Env:
    """One environment: the DBs a simulation (or a replay) mutates."""

    def __init__(self, domain: Domain, db: dict[str, Any], user_db: dict[str, Any] | None) -> None:
        self.domain = domain
        self.db = copy.deepcopy(db)
        self.user_db = copy.deepcopy(user_db) if domain.user is not None else None

    def _kit(self, requestor: str) -> tuple[Toolkit, dict[str, Any]]:
        if requestor == "user":
            if self.domain.user is None or self.user_db is None:
                raise ToolError("this domain has no user tools")
            return self.domain.user, self.user_db
        if requestor != "assistant":
            raise ToolError(f"invalid requestor: {requestor}")
        return self.domain.agent, self.db

    def invoke(self, name: str, arguments: Mapping[str, Any], requestor: str = "assistant") -> Any:
        """Run a tool; raises what the tool raises (ToolError for an unknown tool or bad arguments)."""
        kit, db = self._kit(requestor)
        tool = kit.tools.get(name)
        if tool is None:
            raise ToolError(f"Tool '{name}' not found.")
        missing = [p for p in tool.required if p not in arguments]
        unknown = [a for a in arguments if a not in tool.parameters]
        if missing or unknown:
            problem = f"missing argument(s) {', '.join(missing)}" if missing else \
                f"unexpected argument(s) {', '.join(unknown)}"
            raise ToolError(f"{name}: {problem}")
        return tool.fn(db, **arguments)

    def call(self, name: str, arguments: Mapping[str, Any], requestor: str = "assistant") -> tuple[str, bool]:
        """(content, error) of one tool call, as the environment answers it (§1.4), then the sync."""
        try:
            result = self.invoke(name, arguments, requestor)
            self.sync()
        except Exception as exc:  # τ²-bench turns every exception into an error message
            return to_json_str(f"Error: {exc}"), True
        return to_json_str(result), False

    def run_function(self, env_type: str, name: str, arguments: Mapping[str, Any]) -> Any:
        """An env function (initialization action or assertion) on the agent or user side."""
        kit, db = self._kit("user" if env_type == "user" else "assistant")
        fn = kit.functions.get(name) or (kit.tools[name].fn if name in kit.tools else None)
        if fn is None:
            raise ToolError(f"function '{name}' not found")
        return fn(db, **arguments)

    def sync(self) -> None:
        if self.domain.sync is not None:
            self.domain.sync(self)

    def hashes(self) -> tuple[str | None, str | None]:
        return db_hash(self.db), db_hash(self.user_db)
