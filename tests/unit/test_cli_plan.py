"""`ops plan` as a user runs it: a real subprocess, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO, run_ops

HLE = str(REPO / "topologies" / "hle_oss.yaml")


def test_plan_json_shape() -> None:
    result = run_ops(["plan", HLE, "--json"])
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["name"] == "hle-oss"
    assert len(data["processes"]) == 26
    first = data["processes"][0]
    assert {"name", "node", "host", "port", "gpus", "argv", "env", "log", "health_url"} <= set(first)
    assert (first["name"], first["port"], first["gpus"]) == ("orchestrator/0", 1800, [0])


def test_plan_table_lists_every_process() -> None:
    result = run_ops(["plan", HLE])
    assert result.returncode == 0, result.stderr
    assert "hle-oss: 26 processes" in result.stdout
    for name in ("orchestrator/3", "coder/7", "answer/7", "search/3", "wiki_retrieval"):
        assert name in result.stdout


def test_plan_endpoints_prints_the_file() -> None:
    result = run_ops(["plan", HLE, "--endpoints"])
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["openai/gpt-oss-20b"] == [{"ip_addr": "172.27.31.10", "port": 1840 + i} for i in range(4)]
    assert data["wiki_retrieval"] == [{"ip_addr": "research-secure-13", "port": 8766}]


def test_plan_reproduce_lines() -> None:
    result = run_ops(["plan", HLE, "--reproduce"])
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 26
    assert "--tool-call-parser openai" in lines[-3]


def test_bad_topology_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nnodes:\n  n: {host: localhost, gpus: 1}\nmodels:\n"
                   "  s: {model: openai/gpt-oss-20b, node: n, port: 1840, tool_parser: hermes}\n")
    result = run_ops(["plan", str(bad)])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"{bad}:5: models.s.tool_parser: 'hermes' cannot parse gpt-oss tool calls; use 'openai'")


def test_missing_topology_exits_2(tmp_path: Path) -> None:
    result = run_ops(["plan", str(tmp_path / "none.yaml")])
    assert result.returncode == 2
    assert "no such file" in result.stderr and "Traceback" not in result.stderr


def test_cli_import_is_light() -> None:
    """`import orchestra_ops.cli` (and `ops --help`) loads no torch, faiss, fastapi, uvicorn or matplotlib."""
    heavy = ["torch", "faiss", "fastapi", "uvicorn", "matplotlib", "sentence_transformers", "numpy"]
    code = (
        "import sys, orchestra_ops.cli as c\n"
        "from click.testing import CliRunner\n"
        "r = CliRunner().invoke(c.main, ['--help'])\n"
        "assert r.exit_code == 0, r.output\n"
        "for name in ['plan', 'serve']: CliRunner().invoke(c.main, [name, '--help'])\n"
        f"print([m for m in {heavy!r} if m in sys.modules])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
