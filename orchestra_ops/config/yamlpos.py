"""YAML loading that remembers where every key and item was, so errors can name the line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestra_ops.errors import TopologyError

PathKey = tuple[Any, ...]


@dataclass
class PositionedYaml:
    """Plain data from a YAML file plus the 1-based line of every mapping key and list item."""

    source: str
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line_of(self, path: Sequence[Any]) -> int:
        """The line of `path`, or of its nearest ancestor that is in the file."""
        key = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return 1

    def where(self, path: Sequence[Any], message: str) -> str:
        """`FILE:LINE: dotted.path: message`."""
        dotted = ".".join(str(part) for part in path)
        prefix = f"{self.source}:{self.line_of(path)}: "
        return f"{prefix}{dotted}: {message}" if dotted else f"{prefix}{message}"


def load_positioned(path: Path) -> PositionedYaml:
    """Parse `path`; a missing file, bad YAML or a duplicated key is a TopologyError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TopologyError([f"{path}: no such file"]) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise TopologyError([f"{path}: cannot read: {exc}"]) from None
    return parse_positioned(text, str(path))


def parse_positioned(text: str, source: str) -> PositionedYaml:
    """Parse YAML text (named `source` in errors) keeping positions."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        doc = PositionedYaml(source=source, data=None)
        problems: list[str] = []
        doc.data = _build(loader, root, (), doc, problems) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise TopologyError([f"{source}:{line}: invalid YAML: {exc.problem or exc}"]) from None
    except yaml.YAMLError as exc:
        raise TopologyError([f"{source}:1: invalid YAML: {exc}"]) from None
    finally:
        loader.dispose()
    if problems:
        raise TopologyError(problems)
    return doc


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: PathKey, doc: PositionedYaml,
           problems: list[str]) -> Any:
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolve `<<:` merge keys
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                problems.append(f"{doc.source}:{key_node.start_mark.line + 1}: a key must be a plain value")
                continue
            child = (*path, key)
            line = key_node.start_mark.line + 1
            if key in result:
                dotted = ".".join(str(p) for p in child)
                problems.append(f"{doc.source}:{line}: {dotted}: duplicate key '{key}' "
                                f"(first at line {doc.lines[child]})")
                continue
            doc.lines[child] = line
            result[key] = _build(loader, value_node, child, doc, problems)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            doc.lines[(*path, index)] = item_node.start_mark.line + 1
            items.append(_build(loader, item_node, (*path, index), doc, problems))
        return items
    return loader.construct_object(node, deep=True)
