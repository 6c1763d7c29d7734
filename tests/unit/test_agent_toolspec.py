"""The tools file and the validation of one round's calls (codes 342, 350, 351, 360; first valid runs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from orchestra_ops.evals.agent.protocol import DEFAULT_ALIASES
from orchestra_ops.evals.agent.toolspec import check_calls, load_tools
from orchestra_ops.evals.bundled import packaged

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.templates import read_template


def spec():  # type: ignore[no-untyped-def]
    return load_tools(read_template("tools", packaged("agent/templates/agent_tools.json")))


def call(name: str, arguments: object) -> dict[str, object]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": text}}


def test_the_bundled_tools_offer_the_original_aliases() -> None:
    tools = spec()
    assert {k: set(v) for k, v in tools.allowed.items()} == {k: set(v) for k, v in DEFAULT_ALIASES.items()}
    assert [t["function"]["name"] for t in tools.offered(frozenset({"search"}))] == ["enhance_reasoning", "answer"]


def test_codes_and_the_first_valid_call() -> None:
    tools = spec()
    assert check_calls({"tool_calls": []}, tools).invalid == [342]
    checked = check_calls({"tool_calls": [call("browse", {"model": "x"}), call("search", "{oops"),
                                          call("search", {}), call("answer", {"model": "answer-9"}),
                                          call("answer", {"model": "answer-2"}), call("browse", {})]}, tools)
    assert checked.invalid == [350, 351, 360, 360]
    assert (checked.tool, checked.alias, checked.chosen, len(checked.codes)) == ("answer", "answer-2", 4, 5)
    assert len(checked.raw) == 6  # kept for the record, the last one never looked at


def test_a_tools_file_without_enum_uses_the_original_table_and_bad_files_are_named(tmp_path: Path) -> None:
    tools = json.loads(Path(packaged("agent/templates/agent_tools.json")).read_text())
    for tool in tools:
        del tool["function"]["parameters"]["properties"]["model"]["enum"]
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(tools))
    assert load_tools(read_template("tools", path)).allowed["search"] == DEFAULT_ALIASES["search"]
    path.write_text(json.dumps(tools[:2]))
    with pytest.raises(ConfigError, match="no tool 'search'"):
        load_tools(read_template("tools", path))
    path.write_text("[{")
    with pytest.raises(ConfigError, match=r"template 'tools' \(.*tools.json\): not valid JSON"):
        load_tools(read_template("tools", path))
