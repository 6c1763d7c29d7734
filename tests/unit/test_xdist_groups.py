"""tests/xdist_groups.py on a real `pytest -n 2 --dist loadgroup`: each group runs whole on one worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

from tests.helpers import REPO

FILES = {
    "pytest.ini": """
        [pytest]
        markers =
            vllm: a real vLLM
            destructive: changes the machine
    """,
    "conftest.py": """
        import pytest
        from tests.xdist_groups import pytest_collection_modifyitems  # noqa: F401

        @pytest.fixture
        def real_vllm():
            return "replica"
    """,
    "test_fleet.py": """
        import pytest

        @pytest.fixture(scope="module")
        def fleet():
            return "sims"

        @pytest.mark.parametrize("n", range(4))
        def test_shares_the_fleet(fleet, n):
            pass

        def test_alone(tmp_path):
            pass
    """,
    "test_engine_a.py": """
        import pytest

        @pytest.mark.parametrize("n", range(3))
        def test_asks_for_the_replica(real_vllm, n):
            pass
    """,
    "test_engine_b.py": """
        import pytest

        @pytest.mark.vllm
        @pytest.mark.parametrize("n", range(3))
        def test_marked(n):
            pass
    """,
    "test_machine.py": """
        import pytest

        pytestmark = pytest.mark.destructive

        @pytest.mark.parametrize("n", range(2))
        def test_mounts(n):
            pass
    """,
    "test_free.py": """
        import pytest

        @pytest.mark.parametrize("n", range(6))
        def test_anywhere(n):
            pass
    """,
}
LINE = re.compile(r"^\[(gw\d+)\] \[ *\d+%\] PASSED (\S+?)(?:@(\S+))?\s*$")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    for name, body in FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(body).lstrip())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_each_group_runs_whole_on_one_worker(tmp_path: Path) -> None:
    done = _run(tmp_path, "-n", "2", "--dist", "loadgroup", "-v")
    assert done.returncode == 0, done.stdout + done.stderr
    workers: dict[str | None, set[str]] = defaultdict(set)
    groups: dict[str, str | None] = {}
    for line in done.stdout.splitlines():
        found = LINE.match(line)
        if found:
            worker, test, group = found.groups()
            workers[group].add(worker)
            groups[test] = group
    assert len(groups) == 19, done.stdout
    assert {test: group for test, group in groups.items() if group} == {
        **{f"test_fleet.py::test_shares_the_fleet[{n}]": "test_fleet.py" for n in range(4)},
        **{f"test_engine_a.py::test_asks_for_the_replica[{n}]": "vllm" for n in range(3)},
        **{f"test_engine_b.py::test_marked[{n}]": "vllm" for n in range(3)},
        **{f"test_machine.py::test_mounts[{n}]": "destructive" for n in range(2)},
    }
    assert all(len(workers[group]) == 1 for group in ("test_fleet.py", "vllm", "destructive")), workers


def test_a_test_that_asks_for_the_replica_is_marked_vllm(tmp_path: Path) -> None:
    done = _run(tmp_path, "-m", "not vllm", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "13 passed, 6 deselected" in done.stdout
