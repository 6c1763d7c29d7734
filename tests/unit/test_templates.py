"""Prompt templates as data: exact bytes hashed, placeholders checked, one-pass rendering, overrides."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.templates import load_templates, parse_overrides, read_template


def test_sha256_is_of_the_exact_bytes(tmp_path: Path) -> None:
    data = b"Question: {question}\r\nAnswer in one word.\n"
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    template = read_template("q", path, ["question"])
    assert template.sha256 == hashlib.sha256(data).hexdigest()
    assert template.text == data.decode()
    assert template.to_json() == {"source": str(path), "sha256": hashlib.sha256(data).hexdigest()}


def test_render_replaces_given_placeholders_once_and_leaves_other_braces(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text('Q: {question}\nR: <<response>>\nkeep {other} and {"json": 1}\n')
    template = read_template("t", path)
    out = template.render(question="what is {response}?", response="<<question>> {question}")
    assert out == 'Q: what is {response}?\nR: <<question>> {question}\nkeep {other} and {"json": 1}\n'
    assert template.render() == template.text


def test_missing_placeholder_names_template_file_and_placeholder(tmp_path: Path) -> None:
    path = tmp_path / "grader.txt"
    path.write_text("no placeholders here\n")
    with pytest.raises(ConfigError) as err:
        read_template("grader", path, ["conversation", "rubric_item"])
    assert str(err.value) == (f"template 'grader': {path}: has no placeholder {{conversation}}, {{rubric_item}} "
                              "(write it as {name} or <<name>>)")


def test_missing_and_binary_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"template 'x': .*nope.txt: no such file"):
        read_template("x", tmp_path / "nope.txt")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\xff\xfe text")
    with pytest.raises(ConfigError, match=r"bad.txt: not UTF-8 text \(invalid start byte at byte 0\)"):
        read_template("x", bad)


def test_overrides_replace_only_the_named_template(tmp_path: Path) -> None:
    default_a, default_b, mine = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "mine.txt"
    default_a.write_text("A {x}")
    default_b.write_text("B")
    mine.write_text("mine {x}")
    loaded = load_templates({"a": str(default_a), "b": str(default_b)}, {"a": str(mine)}, {"a": ["x"]})
    assert loaded["a"].text == "mine {x}" and loaded["a"].source == str(mine)
    assert loaded["b"].text == "B"
    with pytest.raises(ConfigError, match=r"--template c: no such template; this suite's templates: a, b"):
        load_templates({"a": str(default_a), "b": str(default_b)}, {"c": str(mine)})


@pytest.mark.parametrize(("items", "message"), [
    (["grader"], "--template 'grader': expected NAME=PATH (e.g. grader=./my_grader.txt)"),
    (["=x.txt"], "--template '=x.txt': expected NAME=PATH (e.g. grader=./my_grader.txt)"),
    (["a=x", "a=y"], "--template a is given twice"),
])
def test_override_syntax_errors(items: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_overrides(items)
    assert str(err.value) == message


def test_override_parsing_keeps_paths_with_equals() -> None:
    assert parse_overrides(["grader=./x=y.txt", "judge = j.txt"]) == {"grader": "./x=y.txt", "judge": "j.txt"}
