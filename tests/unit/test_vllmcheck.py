"""The vLLM argv check (fleet/argv_check.py) without vLLM: the check command for each form of vllm_command,
reading answers, locating refusals."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from orchestra_ops.config.loader import load_topology
from orchestra_ops.config.yamlpos import load_positioned
from orchestra_ops.fleet import argv_check
from orchestra_ops.fleet.argv_check import CHECK_SOURCE, LOCATE, VllmCheck, check_argv, parse_answer
from orchestra_ops.fleet.argv_check_nodes import run_here


def test_check_command_per_form() -> None:
    assert check_argv(["vllm", "serve", "m", "--port", "1"]) == ["sh", "-c", LOCATE, CHECK_SOURCE, "vllm",
                                                                 "serve", "m", "--port", "1"]
    assert check_argv(["/v/bin/python", "-m", "vllm.entrypoints.cli.main", "serve", "m"]) == \
        ["/v/bin/python", "-c", CHECK_SOURCE, "serve", "m"]
    assert check_argv(["srun", "vllm", "serve", "m"]) is None  # an unknown wrapper: not guessed


def test_the_interpreter_is_read_from_the_console_scripts_shebang(tmp_path: Path) -> None:
    """A fake `vllm` console script whose shebang names a python that prints its argv: LOCATE runs it."""
    fake_python = tmp_path / "py"
    fake_python.write_text("#!/bin/sh\necho \"OPS_VLLM_CHECK {\\\"ok\\\": true, \\\"version\\\": \\\"$4\\\", "
                           "\\\"error\\\": null}\"\n")
    fake_python.chmod(0o755)
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir()
    script.write_text(f"#!{fake_python}\nimport sys\n")
    script.chmod(0o755)
    argv = check_argv([str(script), "serve", "model-x"])
    assert argv is not None
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert parse_answer(done.returncode, done.stdout, done.stderr) == (True, "model-x", None)
    missing = subprocess.run(check_argv([str(tmp_path / "nope"), "serve", "m"]) or [], capture_output=True,
                             text=True, check=False)
    assert missing.returncode == 127
    assert parse_answer(missing.returncode, missing.stdout, missing.stderr) == \
        (False, None, f"command not found: {tmp_path / 'nope'}")


def test_answers() -> None:
    line = 'OPS_VLLM_CHECK {"ok": false, "version": "0.32.0", "error": "vllm serve: error: bad"}'
    assert parse_answer(2, f"noise\n{line}\n", "") == (False, "0.32.0", "vllm serve: error: bad")
    assert parse_answer(1, "", "a\nb\n\nc\nd\n") == (False, None, "b / c / d")
    assert parse_answer(139, "", "") == (False, None, "the check exited with status 139 and said nothing")


def test_a_refusal_points_at_the_engine_arg_vllm_names(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent("""\
        name: t
        nodes:
          cpu: {host: localhost, gpus: 0}
        models:
          m:
            model: /m
            node: cpu
            gpus_per_replica: 0
            port: 9000
            engine_args: [--enforce-eager, --dtype, float13]
          n: {model: /n, node: cpu, gpus_per_replica: 0, port: 9001}
        """))
    topology = load_topology(path)
    checks = [VllmCheck("m/0", "m", "cpu", False, "0.32.0", "vllm serve: error: argument --dtype: invalid choice"),
              VllmCheck("n/0", "n", "cpu", False, None, "cannot import vllm: ImportError: x"),
              VllmCheck("m/1", "m", "cpu", True, "0.32.0", None)]
    assert argv_check.problems(checks, load_positioned(path), topology) == [
        f"{path}:10: models.m.engine_args.1: vLLM 0.32.0 on node cpu refuses the command of m/0: "
        "vllm serve: error: argument --dtype: invalid choice",
        f"{path}:11: models.n: vLLM (version unknown) on node cpu refuses the command of n/0: "
        "cannot import vllm: ImportError: x"]
    assert argv_check.versions(checks) == {"cpu": "0.32.0"}


def test_a_repeated_flag_points_at_the_occurrence_whose_value_vllm_refuses(tmp_path: Path) -> None:
    """What real vLLM 0.32 answers for `--dtype float32 … --dtype float13` (argparse checks every occurrence)."""
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent("""\
        name: t
        nodes:
          cpu: {host: localhost, gpus: 0}
        models:
          m:
            model: /m
            node: cpu
            gpus_per_replica: 0
            port: 9000
            engine_args:
              - --dtype
              - float32
              - --enforce-eager
              - --dtype=float13
        """))
    error = ("vllm serve: error: argument --dtype: invalid choice: 'float13' (choose from 'auto', 'bfloat16', "
             "'float', 'float16', 'float32', 'half')")
    checks = [VllmCheck("m/0", "m", "cpu", False, "0.32.0+cpu", error)]
    assert argv_check.problems(checks, load_positioned(path), load_topology(path)) == [
        f"{path}:14: models.m.engine_args.3: vLLM 0.32.0+cpu on node cpu refuses the command of m/0: {error}"]


def _counting_vllm(tmp_path: Path, ok: bool) -> Path:
    """A `vllm` whose 'python' appends a line to `calls` each time it is asked, then answers."""
    python = tmp_path / "py"
    answer = ('{"ok": true, "version": "9.9", "error": null, "index": 0}' if ok
              else '{"ok": false, "version": "9.9", "error": "no", "index": 0}')
    python.write_text(f"#!/bin/sh\necho x >> {tmp_path / 'calls'}\necho 'OPS_VLLM_CHECK {answer}'\n")
    python.chmod(0o755)
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{python}\n")
    vllm.chmod(0o755)
    return vllm


def _check(vllm: Path, port: int, cwd: Path, **env: str) -> VllmCheck:
    from orchestra_ops.fleet.process_spec import ProcessSpec

    spec = ProcessSpec(name="m/0", group="m", kind="vllm", node="cpu", host="127.0.0.1", bind_host="127.0.0.1",
                       port=port, gpus=(), argv=(str(vllm), "serve", "/m", "--port", str(port)), env=env,
                       log="x.log", served_model_name="m", ulimit_nofile=1024, endpoint_key="m")
    return argv_check.check_specs([spec], {"cpu": run_here(cwd)})[0]


def test_an_accepted_command_is_not_asked_again_until_vllm_or_the_command_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    vllm = _counting_vllm(tmp_path, ok=True)
    calls = tmp_path / "calls"
    first = _check(vllm, 9000, tmp_path, VLLM_CPU_OMP_THREADS_BIND="0")
    again = _check(vllm, 9100, tmp_path, VLLM_CPU_OMP_THREADS_BIND="1")  # other port and core: the same command
    assert (first.ok, first.version, again.ok, again.version) == (True, "9.9", True, "9.9")
    assert calls.read_text().count("x") == 1
    _check(vllm, 9000, tmp_path, VLLM_USE_V2="1")  # another environment: asked
    assert calls.read_text().count("x") == 2
    os.utime(vllm, ns=(1, 1))  # vLLM reinstalled (pip rewrites the console script): asked again
    _check(vllm, 9000, tmp_path, VLLM_CPU_OMP_THREADS_BIND="0")
    assert calls.read_text().count("x") == 3


def test_a_refusal_is_asked_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    vllm = _counting_vllm(tmp_path, ok=False)
    results = [_check(vllm, 9000, tmp_path) for _ in range(2)]
    assert [(r.ok, r.error) for r in results] == [(False, "no"), (False, "no")]
    assert (tmp_path / "calls").read_text().count("x") == 2
