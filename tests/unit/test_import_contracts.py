"""The house's import contracts (pyproject.toml, checked by scripts/lint-imports.sh on the installed layout): they
hold on the tree, and they see evals/ and services/ (installed under orchestra_ops. by package-dir), so a cycle or
a layer break planted in a suite or a service fails them, naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO


def _copy(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for folder in ("orchestra_ops", "evals", "services", "scripts"):
        shutil.copytree(REPO / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", repo / "pyproject.toml")
    return repo


def _lint(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(repo / "scripts" / "lint-imports.sh"), str(repo)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHON": sys.executable})


def _plant(path: Path, line: str) -> None:
    text = path.read_text()
    head, sep, rest = text.partition("from __future__ import annotations\n")
    path.write_text(head + sep + line + "\n" + rest)


def test_the_contracts_hold_on_the_tree(tmp_path: Path) -> None:
    result = _lint(_copy(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 5 kept, 0 broken." in result.stdout


def test_a_cycle_planted_in_a_suite_breaks_them(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    _plant(repo / "evals" / "agent" / "suite.py", "import orchestra_ops.evals.agent.hle  # planted: hle imports suite")
    result = _lint(repo)
    assert result.returncode == 1
    assert "No cycles are allowed in orchestra_ops.evals.agent." in result.stdout
    assert ".suite -> .hle" in result.stdout or ".hle -> .suite" in result.stdout


def test_a_runner_reaching_into_a_suite_and_a_service_into_the_runner_break_them(tmp_path: Path) -> None:
    repo = _copy(tmp_path)
    _plant(repo / "orchestra_ops" / "runner" / "engine.py", "import orchestra_ops.evals.chat.suite  # planted")
    _plant(repo / "services" / "simllm" / "faults.py", "import orchestra_ops.runner.dataset  # planted")
    result = _lint(repo)
    assert result.returncode == 1
    assert "orchestra_ops.runner.engine -> orchestra_ops.evals.chat.suite" in result.stdout
    assert "orchestra_ops.services.simllm.faults -> orchestra_ops.runner.dataset" in result.stdout
    assert "Contracts: 1 kept, 4 broken." in result.stdout
