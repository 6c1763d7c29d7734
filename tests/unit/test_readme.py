"""The README and docs/ hold true without a fleet: every link resolves inside the repository, the annotated
topology loads, each suite's example line is one its loader reads, every extra and make target named exists,
the headings count true, and every exit code is in the table. (Its commands run as written in
tests/integration/test_first_hour_docs.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from orchestra_ops.evals.registry import SUITES, load_suite

from orchestra_ops.config.loader import load_topology
from tests.helpers import REPO
from tests.readme_blocks import README, anchor, blocks, headings, links, table_rows

DOCS = sorted((REPO / "docs").rglob("*.md"))
JSONL_SUITES = ("chat", "hle", "frames", "healthbench", "gsm8k", "humaneval")


@pytest.mark.parametrize("path", [README, *DOCS], ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_resolves_inside_the_repository(path: Path) -> None:
    found = links(path)
    assert found or path.parent.name == "protocols"
    for target in found:
        if target.startswith(("http://", "https://", "mailto:")):
            continue  # a source cited, not a file of ours
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        assert resolved.is_relative_to(REPO), f"{path.name}: {target} points outside the repository"
        assert resolved.exists(), f"{path.name}: {target} does not exist"
        if fragment and resolved.suffix == ".md":
            assert fragment in {anchor(h) for h in headings(resolved)}, f"{path.name}: no heading #{fragment}"
    text = path.read_text()
    assert "../shared" not in text and "/work/" not in text


def test_the_annotated_topology_loads(tmp_path: Path) -> None:
    [block] = [b for b in blocks() if b.language == "yaml" and b.heading == "Your fleet"]
    path = tmp_path / "lab.yaml"
    path.write_text(block.text)
    topology = load_topology(path)
    assert (topology.name, sorted(topology.nodes), sorted(topology.models)) == (
        "lab", ["big", "gpu1", "here"], ["answer", "orchestrator"])
    assert topology.roles["judge"] == "judge" and topology.providers["judge"].api_key_env == "OPENAI_API_KEY"


def test_every_suite_has_a_row_and_its_example_line_loads(tmp_path: Path) -> None:
    rows = {row[0].strip("`"): row for row in table_rows("Your data: what each suite reads")}
    assert set(rows) == set(SUITES)
    for name in JSONL_SUITES:
        example = re.fullmatch(r"`(.+)`", rows[name][3])
        assert example is not None, rows[name]
        line = example.group(1)
        json.loads(line)  # one JSON line, as written
        path = tmp_path / f"{name}.jsonl"
        path.write_text(line + "\n")
        samples = load_suite(name).load(path, dedupe=False)
        assert len(samples) == 1, name
    arc = tmp_path / "ARC-Challenge-Dev.jsonl"
    arc.write_text(rows["arc"][3].strip("`") + "\n")
    assert len(load_suite("arc").load(arc, dedupe=False)) == 1


def test_headings_that_count_count_true() -> None:
    counts = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
    counted = [h for h in headings() if h.split()[0].lower() in counts]
    assert counted == ["Two commands to start"]
    for heading in counted:
        block = next(b for b in blocks() if b.heading == heading)
        assert len(block.commands()) == counts[heading.split()[0].lower()], heading


def test_every_extra_and_make_target_named_exists() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = set(re.findall(r"^([a-z]+) = \[", section, re.MULTILINE))
    assert {"serve", "retrieval", "analysis", "vllm", "dev"} <= extras
    text = README.read_text()
    named = {e for group in re.findall(r"\.\[([a-z,]+)\]", text) for e in group.split(",")}
    named |= {e.strip("`") for e in re.findall(r"^\| `(\w+)` \|", text, re.MULTILINE)} & (extras | {"serve"})
    assert named and named <= extras, named - extras
    for target in sorted(set(re.findall(r"`?make ([a-z][a-z-]*)", text))):
        dry = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True, timeout=60,
                             check=False)
        assert dry.returncode == 0, (target, dry.stderr)


def test_every_exit_code_is_in_the_table() -> None:
    codes = [row[0] for row in table_rows("Exit codes")]
    assert codes == ["0", "1", "2", "3", "4", "5", "6", "124", "130"]


def test_what_is_not_run_says_why_and_every_ops_command_parses() -> None:
    found = blocks()
    skipped = [b for b in found if b.not_run]
    assert [b.heading for b in skipped] == ["Install", "Long runs that finish by themselves", "On a cluster"]
    for block in found:
        if block.language != "sh":
            continue
        for command in block.commands():
            if not command.startswith("ops "):
                continue
            words = command.split()
            path = [w for w in words[1:3] if not w.startswith("-")]
            result = subprocess.run([sys.executable, "-m", "orchestra_ops", *path[:1], "--help"], capture_output=True,
                                    text=True, timeout=120, check=False)
            assert result.returncode == 0, (command, result.stderr)
