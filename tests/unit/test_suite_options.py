"""A suite's own flags: declared as data, built into `ops eval SUITE`, remembered by the run dir."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click
import pytest
from click.testing import CliRunner

from orchestra_ops.cli import eval_cmd
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.evalloop import completion_line
from orchestra_ops.runner.prepare import suite_option_values
from orchestra_ops.runner.suite import BaseSuite, SuiteOption, unit_counts


class RoundsSuite(BaseSuite):
    """A suite with options of every kind.

    Second paragraph, not shown in the summary.
    """

    name = "rounds"
    options = (
        SuiteOption("max_rounds", "--max-rounds", "int", "Rounds per task.", default=50, minimum=1),
        SuiteOption("protocol", "--judge-protocol", "choice", "Which judge.", default="toolorchestra",
                    choices=("toolorchestra", "cais")),
        SuiteOption("keep_images", "--keep-images", "flag", "Keep image questions.", default=False),
        SuiteOption("ratio", "--ratio", "float", "A ratio.", default=None),
    )
    template_files: Mapping[str, str] = {"judge": "/x/judge.txt", "answer": "/x/answer.txt"}


def _invoke(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[click.testing.Result, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def fake_run(name: str, suite: Any, options: Any, *, analyze: bool, verbose: bool) -> None:  # not run here
        seen.update(suite=name, values={"models": options.models}, given=options.suite_options)

    monkeypatch.setattr(eval_cmd, "_run", fake_run)
    command = eval_cmd.suite_command("rounds", RoundsSuite())
    return CliRunner().invoke(command, args), seen


def test_only_explicitly_given_suite_options_are_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    result, seen = _invoke(["--max-rounds", "7", "--keep-images", "--model", "a", "--model", "b"], monkeypatch)
    assert result.exit_code == 0, result.output
    assert seen["given"] == {"max_rounds": 7, "keep_images": True}
    assert seen["values"]["models"] == ("a", "b")
    result, seen = _invoke([], monkeypatch)
    assert seen["given"] == {}


def test_bad_values_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = _invoke(["--max-rounds", "0"], monkeypatch)
    assert result.exit_code == 2 and "0 is not in the range x>=1" in result.output
    result, _ = _invoke(["--judge-protocol", "other"], monkeypatch)
    assert result.exit_code == 2 and "'other' is not one of 'toolorchestra', 'cais'" in result.output


def test_help_shows_suite_options_summary_and_templates(monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = _invoke(["--help"], monkeypatch)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "A suite with options of every kind." in text and "Second paragraph" not in text
    assert "Templates (--template NAME=PATH): answer, judge." in text
    for flag in ("--max-rounds", "--judge-protocol", "--keep-images", "--ratio", "--dataset", "--resume"):
        assert flag in text


def test_a_suite_option_may_not_shadow_a_common_one() -> None:
    class Clash(BaseSuite):
        options = (SuiteOption("concurrency", "--judge-concurrency", "int", "x"),)

    with pytest.raises(RuntimeError, match="declares option 'concurrency'"):
        eval_cmd.suite_command("clash", Clash())


def test_option_values_given_then_recorded_then_default() -> None:
    suite = RoundsSuite()
    assert suite_option_values(suite, {}) == {"max_rounds": 50, "protocol": "toolorchestra",
                                              "keep_images": False, "ratio": None}
    recorded = {"max_rounds": 10, "protocol": "cais", "gone": 1}
    assert suite_option_values(suite, {"keep_images": True}, recorded) == {
        "max_rounds": 10, "protocol": "cais", "keep_images": True, "ratio": None}
    assert suite_option_values(suite, {"max_rounds": 10}, recorded)["max_rounds"] == 10
    with pytest.raises(ConfigError) as err:
        suite_option_values(suite, {"protocol": "toolorchestra"}, recorded)
    assert str(err.value) == ("this run dir was run with --judge-protocol cais, not toolorchestra; use another "
                              "--run-dir for another setting")
    with pytest.raises(ConfigError, match="the rounds suite has no option 'nope'"):
        suite_option_values(suite, {"nope": 1})


def test_completion_line_shows_summary_fields_that_are_present() -> None:
    ok = {"id": "q1", "status": "ok", "correct": True}
    assert completion_line(ok, 1.234, ("correct", "rounds")) == (
        "[TASK_COMPLETE] id=q1 status=ok elapsed=1.23s correct=True")
    error = {"id": 7, "status": "error", "error_type": "task_timeout"}
    assert completion_line(error, 0.5) == "[TASK_COMPLETE] id=7 status=error elapsed=0.50s error=task_timeout"


def test_unit_counts() -> None:
    records = {"a": {"status": "ok"}, "b": {"status": "error", "error_type": "http_500"},
               "c": {"status": "error", "error_type": "http_500"}}
    units = [{"id": i} for i in ("a", "b", "c", "d")]
    assert unit_counts(records, units) == {"units": 4, "ok": 1, "failed": 2, "failed_by_type": {"http_500": 2},
                                           "missing": 1}
