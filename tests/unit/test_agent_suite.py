"""The agent suites' start-up checks: alias routing, options, datasets (no request is sent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from orchestra_ops.evals.agent.frames import FramesSuite
from orchestra_ops.evals.agent.hle import HleSuite

from orchestra_ops.client.routing import Routing, Target
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.templates import load_templates


def routing(names: list[str], aliases: dict[str, str] | None = None, services: tuple[str, ...] = ("retrieval",)
            ) -> Routing:
    targets = {n: Target(name=n, kind="model", served_name=f"served/{n}", addresses=(("h", 1),)) for n in names}
    targets.update({s: Target(name=s, kind="service", served_name=s, addresses=(("h", 2),)) for s in services})
    return Routing(source="t.yaml", name="t", endpoints_file="e.json", roles={n: n for n in names}, targets=targets,
                   aliases=aliases or {})


def options(suite: Any, tmp_path: Path, **given: Any) -> dict[str, Any]:
    values = {o.name: o.default for o in suite.options}
    values.update(templates=load_templates(suite.template_files, {}, suite.template_fields), run_dir=str(tmp_path),
                  model=None, models=[])
    values.update(given)
    return values


ROLES = ["orchestrator", "search", "reasoner", "answer", "judge", "math"]


def test_aliases_default_to_the_tool_role_then_topology_then_patterns(tmp_path: Path) -> None:
    suite = HleSuite()
    names = suite.prepare(routing(ROLES, {"answer-math-1": "math"}), options(suite, tmp_path))
    assert names == ["orchestrator", "judge", "answer", "math", "reasoner", "search"]
    assert suite.config is not None
    assert (suite.config.aliases["search-2"], suite.config.aliases["reasoner-3"], suite.config.aliases["answer-1"],
            suite.config.aliases["answer-math-1"]) == ("search", "reasoner", "answer", "math")
    suite.prepare(routing(ROLES), options(suite, tmp_path, aliases=("answer-*=math", "answer-1=answer")))
    assert suite.config.aliases["answer-3"] == "math" and suite.config.aliases["answer-1"] == "answer"
    assert suite.config.served["math"] == "served/math"


def test_an_endpoints_file_without_the_tool_roles_is_refused_naming_the_aliases(tmp_path: Path) -> None:
    suite = HleSuite()
    with pytest.raises(ConfigError, match=r"'search' is neither a role .*tool aliases search-1, search-2, search-3 go "
                                          r"there; map them with aliases: in the topology or --alias ALIAS=NAME"):
        suite.prepare(routing(["orchestrator", "reasoner", "answer", "judge"]), options(suite, tmp_path))
    with pytest.raises(ConfigError, match=r"retrieval service 'retrieval', which t\.yaml does not declare"):
        suite.prepare(routing(ROLES, services=()), options(suite, tmp_path))
    frames = FramesSuite()
    frames.prepare(routing(ROLES, services=("wiki_retrieval",)), options(frames, tmp_path))


def test_cais_sampling_budgets_and_option_errors(tmp_path: Path) -> None:
    suite = HleSuite()
    suite.prepare(routing(ROLES), options(suite, tmp_path, judge_protocol="cais", sampling=("answer.max_tokens=99",),
                                          budgets=("expert_context=100",)))
    assert suite.config is not None
    assert suite.config.sampling["judge"] == {"max_completion_tokens": 4096}
    assert suite.config.sampling["answer"]["max_tokens"] == 99
    assert suite.config.protocol.budgets.expert_context == 100
    with pytest.raises(ConfigError, match=r"--budget 'context=5': expected NAME=TOKENS"):
        suite.prepare(routing(ROLES), options(suite, tmp_path, budgets=("context=5",)))
    with pytest.raises(ConfigError, match=r"--sampling 'temperature=1': expected CALL\.KEY=VALUE"):
        suite.prepare(routing(ROLES), options(suite, tmp_path, sampling=("temperature=1",)))
    with pytest.raises(ConfigError, match="evaluates one orchestrator"):
        suite.prepare(routing(ROLES), options(suite, tmp_path, models=["a", "b"]))


def test_datasets_leave_out_images_and_name_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [{"id": "a", "question": "q1", "answer": "x"}, {"id": "b", "question": "q2", "answer": "y", "image": "i"},
            {"id": "c", "question": "q3", "answer": 7}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    suite = HleSuite()
    loaded = suite.load(path, dedupe=False)
    assert [(s["id"], s["_eid"]) for s in loaded] == [("a", 0), ("c", 2)] and suite.images_excluded == 1
    suite.include_images = True
    assert len(suite.load(path, dedupe=False)) == 3
    path.write_text(json.dumps({"id": "z", "question": "", "answer": "x"}) + "\n")
    with pytest.raises(ConfigError, match=r"d.jsonl: id 'z': \"question\" must be a non-empty string"):
        suite.load(path, dedupe=False)
