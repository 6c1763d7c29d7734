"""Reading a topology file: `load_topology(path)` parses the YAML keeping each node's line, validates it
with the schema (config/topology.py) and then runs the cross-field checks (config/checks.py). Every
problem becomes one line `FILE:LINE: dotted.path: message`, and all of them are raised together as a
TopologyError.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestra_ops.config.checks import check_topology
from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import PositionedYaml, load_positioned
from orchestra_ops.core.suggest import closest
from orchestra_ops.errors import TopologyError


def load_topology(path: str | Path) -> Topology:
    """Read, validate and check a topology file; raise TopologyError listing every problem."""
    source = Path(path)
    doc = load_positioned(source)
    return validate_topology(doc)


def validate_topology(doc: PositionedYaml) -> Topology:
    """Validate an already parsed document (used by tests that mutate topologies in memory)."""
    problems: list[str] = []
    if not isinstance(doc.data, dict):
        raise TopologyError([f"{doc.source}:1: the top level must be a mapping (name:, nodes:, models: …)"])
    problems.extend(_secret_key_problems(doc))
    try:
        topology = Topology.model_validate(doc.data)
    except ValidationError as exc:
        errors = [err for err in exc.errors() if not _is_secret_key_error(err)]
        problems.extend(_describe(doc, err) for err in errors)
        raise TopologyError(sorted(set(problems), key=_line_order)) from None
    problems.extend(doc.where(path, message) for path, message in check_topology(topology))
    if problems:
        raise TopologyError(sorted(set(problems), key=_line_order))
    return topology


def _line_order(problem: str) -> tuple[int, str]:
    match = re.match(r"^.*?:(\d+): ", problem)
    return (int(match.group(1)) if match else 0, problem)


def _secret_key_problems(doc: PositionedYaml) -> list[str]:
    """A key written into the topology is refused outright, before anything else is said."""
    providers = doc.data.get("providers") if isinstance(doc.data, dict) else None
    problems = []
    if isinstance(providers, dict):
        for name, body in providers.items():
            if isinstance(body, dict) and "api_key" in body:
                problems.append(
                    doc.where(
                        ("providers", name, "api_key"),
                        "never put a key in the topology; name its environment variable with api_key_env",
                    )
                )
    return problems


def _is_secret_key_error(err: Any) -> bool:
    loc = tuple(err["loc"])
    return err["type"] == "extra_forbidden" and len(loc) == 3 and loc[0] == "providers" and loc[2] == "api_key"


def _describe(doc: PositionedYaml, err: Any) -> str:
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        fields = _fields_at(loc[:-1])
        match = closest(str(loc[-1]), fields)
        if match is not None:
            return doc.where(loc, f"unknown key '{loc[-1]}'; did you mean `{match}`?")
        return doc.where(loc, f"unknown key '{loc[-1]}'; valid keys: {', '.join(fields) or 'none'}")
    if kind == "missing":
        return doc.where(loc, "required")
    if kind == "literal_error":
        return doc.where(loc, f"{_input(err)} is not one of {err['ctx']['expected']}")
    if loc and loc[-1] == "port" and kind in {"less_than_equal", "greater_than_equal"}:
        return doc.where(loc, f"port {_input(err)} is outside 1-65535")
    message = str(err["msg"])
    message = message.removeprefix("Value error, ")
    if kind in {"int_parsing", "float_parsing", "bool_parsing", "string_type", "int_type", "dict_type",
                "list_type", "model_type", "greater_than_equal", "less_than_equal", "greater_than",
                "less_than", "too_short", "int_from_float"}:
        message = f"{message} (got {_input(err)})"
    return doc.where(loc, message)


def _input(err: Any) -> str:
    value = err.get("input")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The valid keys of the model found at `loc` in the schema (for 'unknown key' errors)."""
    model: Any = Topology
    for part in loc:
        if isinstance(model, type) and issubclass(model, BaseModel):
            field = model.model_fields.get(str(part))
            if field is None:
                return []
            model = _unwrap(field.annotation)
        elif getattr(model, "__origin__", None) is dict:
            model = _unwrap(model.__args__[1])
        elif getattr(model, "__origin__", None) is list:
            model = _unwrap(model.__args__[0])
        else:
            return []
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """Strip Optional/Annotated so `_fields_at` can keep walking."""
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) not in (dict, list):
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            return models[0]
    return annotation
