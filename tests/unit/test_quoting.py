"""Every value that reaches a shell is quoted: the reproduce command runs exactly the planned argv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from orchestra_ops.config.loader import load_topology
from orchestra_ops.fleet.plan import plan

NASTY = [
    "x; touch {canary}",
    "a | touch {canary}",
    "$(touch {canary})",
    "`touch {canary}`",
    "it's",
    'say "hi"',
    "line1\nline2; touch {canary}",
    "back\\slash $HOME ${{PATH}} * ? ~ & && || > /dev/null #",
]


def _printer(bin_dir: Path, out: Path) -> None:
    """A fake `vllm` that records its argv and the env values we care about, then exits."""
    script = bin_dir / "vllm"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(out)!r}, 'w').write(json.dumps({{'argv': sys.argv[1:], "
        "'env': {k: v for k, v in os.environ.items() if k.startswith('NASTY_')}}))\n"
    )
    script.chmod(0o755)


def test_reproduce_runs_exactly_the_argv(tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    values = [v.format(canary=canary) for v in NASTY]
    topology = {
        "name": "quote",
        "nodes": {"n": {"host": "localhost", "gpus": 1}},
        "models": {"m": {
            "model": values[0],
            "node": "n",
            "port": 9000,
            "served_model_name": values[6],
            "engine_args": values,
            "env": {f"NASTY_{i}": v for i, v in enumerate(values)},
        }},
    }
    path = tmp_path / "quote.yaml"
    path.write_text(yaml.safe_dump(topology))
    spec = plan(load_topology(path), state_dir=tmp_path / "state").processes[0]

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "argv.json"
    _printer(bin_dir, out)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-c", spec.reproduce], env=env, check=True, timeout=30)

    seen = json.loads(out.read_text())
    assert seen["argv"] == list(spec.argv[1:])
    assert seen["argv"][1] == values[0]
    assert seen["argv"][-len(values):] == values
    assert seen["env"] == {f"NASTY_{i}": v for i, v in enumerate(values)}
    assert not canary.exists()


def test_reproduce_is_one_line_per_process() -> None:
    root = Path(__file__).resolve().parents[2] / "topologies"
    for spec in plan(load_topology(root / "hle_oss.yaml"), state_dir="/s").processes:
        assert "\n" not in spec.reproduce
        assert spec.reproduce.startswith("env CUDA_VISIBLE_DEVICES=")
