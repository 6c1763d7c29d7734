"""The batch protocol of the vLLM argv check (argv_check.py, argv_check_source.py): every model of one runner
and interpreter in one process. The check program is the real one; the `vllm` it imports is a small stand-in
package (an argparse `serve` with vLLM's module layout) under a `python` that a console script's shebang names,
so what is under test is the protocol (one process, per-item env and answers, a crash mid-batch, the cache),
not vLLM's own rules (tests/unit/test_parallel_topology.py's golden test runs real vLLM through it)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from orchestra_ops.fleet import argv_check
from orchestra_ops.fleet.argv_check import VllmCheck, parse_batch
from orchestra_ops.fleet.argv_check_nodes import run_here
from orchestra_ops.fleet.process_spec import ProcessSpec

FAKE_MODULES = {
    "vllm/__init__.py": "",
    "vllm/engine/__init__.py": "",
    "vllm/entrypoints/__init__.py": "",
    "vllm/entrypoints/cli/__init__.py": "",
    "vllm/entrypoints/openai/__init__.py": "",
    "vllm/entrypoints/cli/serve.py": """\
        class ServeSubcommand:
            @staticmethod
            def cmd(args):
                raise SystemExit("the real serve would start a server")
        """,
    # vLLM's parser: an argparse error is printed to stderr and exits 2, as argparse does
    "vllm/entrypoints/cli/main.py": """\
        import argparse, json, os, sys
        from vllm.entrypoints.cli import serve

        def main():
            parser = argparse.ArgumentParser(prog="vllm")
            sub = parser.add_subparsers()
            s = sub.add_parser("serve")
            s.add_argument("model")
            s.add_argument("--port", type=int)
            s.add_argument("--dtype", choices=["auto", "float32"], default="auto")
            args = parser.parse_args(sys.argv[1:])
            with open(os.environ["FAKE_VLLM_LOG"], "a") as log:
                log.write(json.dumps({"pid": os.getpid(), "model": args.model,
                                      "VLLM_X": os.environ.get("VLLM_X"), "SHARED": os.environ.get("SHARED"),
                                      "cmdline": open("/proc/self/cmdline").read()}) + "\\n")
            if args.model == "hang":
                import time
                time.sleep(600)
            if args.model == "crash":  # what a segfault leaves: a line on fd 2 and no answer
                os.write(2, b"Fatal Python error: Segmentation fault\\n  File vllm/_C.py, line 1\\n")
                os._exit(139)
            serve.ServeSubcommand.cmd(args)
        """,
    # the engine's own validation: a value argparse lets through, refused by the engine args (env-dependent)
    "vllm/engine/arg_utils.py": """\
        import os

        class AsyncEngineArgs:
            @classmethod
            def from_cli_args(cls, args):
                if os.environ.get("VLLM_X") == "refuse":
                    raise ValueError("VLLM_X=refuse is not a valid setting")
                return cls()
        """,
    "vllm/entrypoints/openai/api_server.py": """\
        def validate_api_server_args(args):
            pass
        """,
    "vllm-9.9.dist-info/METADATA": "Metadata-Version: 2.1\nName: vllm\nVersion: 9.9\n",
}


@pytest.fixture()
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `vllm` console script whose python imports the stand-in package; each start appends to `starts`."""
    site = tmp_path / "site"
    for name, text in FAKE_MODULES.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(textwrap.dedent(text))
    python = tmp_path / "py"
    python.write_text(f"#!/bin/sh\necho start >> {tmp_path / 'starts'}\n"
                      f"PYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    python.chmod(0o755)
    vllm = tmp_path / "bin" / "vllm"
    vllm.parent.mkdir()
    vllm.write_text(f"#!{python}\n")
    vllm.chmod(0o755)
    monkeypatch.setenv("FAKE_VLLM_LOG", str(tmp_path / "parsed.jsonl"))
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("VLLM_X", raising=False)
    return vllm


def _spec(vllm: Path, name: str, model: str, port: int, *flags: str, node: str = "cpu", **env: str) -> ProcessSpec:
    return ProcessSpec(name=f"{name}/0", group=name, kind="vllm", node=node, host="127.0.0.1",
                       bind_host="127.0.0.1", port=port, gpus=(), argv=(str(vllm), "serve", model, "--port",
                                                                          str(port), *flags),
                       env=env, log="x.log", served_model_name=name, ulimit_nofile=1024, endpoint_key=name)


def _parsed(tmp_path: Path) -> list[dict[str, object]]:
    log = tmp_path / "parsed.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _starts(tmp_path: Path) -> int:
    starts = tmp_path / "starts"
    return starts.read_text().count("start") if starts.exists() else 0


def test_every_model_of_a_node_is_checked_by_one_process_with_its_own_env(fake_vllm: Path, tmp_path: Path) -> None:
    specs = [_spec(fake_vllm, "a", "/m/a", 9000, VLLM_X="1", SHARED="s"),
             _spec(fake_vllm, "b", "/m/b", 9001, "--dtype", "float13", SHARED="s"),  # argparse refuses it
             _spec(fake_vllm, "c", "/m/c", 9002, VLLM_X="refuse", SHARED="s"),  # the engine args refuse it
             _spec(fake_vllm, "d", "/m/d", 9003, SHARED="s")]
    checks = argv_check.check_specs(specs, {"cpu": run_here(tmp_path)})
    assert checks == [
        VllmCheck("a/0", "a", "cpu", True, "9.9", None),
        VllmCheck("b/0", "b", "cpu", False, "9.9",
                  "vllm serve: error: argument --dtype: invalid choice: 'float13' (choose from 'auto', 'float32')"),
        VllmCheck("c/0", "c", "cpu", False, "9.9", "ValueError: VLLM_X=refuse is not a valid setting"),
        VllmCheck("d/0", "d", "cpu", True, "9.9", None)]
    assert _starts(tmp_path) == 1  # one interpreter for the four
    parsed = _parsed(tmp_path)
    assert len({entry["pid"] for entry in parsed}) == 1
    # each item saw its own VLLM_X, and no item the one before it set (restored); b's parse stopped before the log
    assert [(entry["model"], entry["VLLM_X"], entry["SHARED"]) for entry in parsed] == [
        ("/m/a", "1", "s"), ("/m/c", "refuse", "s"), ("/m/d", None, "s")]


def test_an_items_env_never_reaches_the_check_processs_argv(fake_vllm: Path, tmp_path: Path) -> None:
    """argv is world-readable (ps, /proc/PID/cmdline) and a replica's env may hold a token: the batch travels in
    the process's environment instead."""
    specs = [_spec(fake_vllm, "a", "/m/a", 9000, HF_TOKEN="hf_secret_a"), _spec(fake_vllm, "b", "/m/b", 9001,
                                                                               VLLM_X="1", HF_TOKEN="hf_secret_b")]
    checks = argv_check.check_specs(specs, {"cpu": run_here(tmp_path)})
    assert [(c.process, c.ok) for c in checks] == [("a/0", True), ("b/0", True)]
    cmdlines = {entry["cmdline"] for entry in _parsed(tmp_path)}
    assert len(cmdlines) == 1
    cmdline = cmdlines.pop()
    assert isinstance(cmdline, str) and cmdline.endswith("\0--ops-batch\0")
    assert "hf_secret" not in cmdline and "/m/a" not in cmdline


def test_a_crash_mid_batch_fails_the_rest_with_the_crashs_last_lines(fake_vllm: Path, tmp_path: Path) -> None:
    specs = [_spec(fake_vllm, "a", "/m/a", 9000), _spec(fake_vllm, "b", "crash", 9001),
             _spec(fake_vllm, "c", "/m/c", 9002)]
    checks = argv_check.check_specs(specs, {"cpu": run_here(tmp_path)})
    crash = "Fatal Python error: Segmentation fault /   File vllm/_C.py, line 1"
    assert [(c.process, c.ok, c.version, c.error) for c in checks] == [
        ("a/0", True, "9.9", None),
        ("b/0", False, None, crash),
        ("c/0", False, None, f"not checked: the check ended at an earlier command: {crash}")]
    assert [entry["model"] for entry in _parsed(tmp_path)] == ["/m/a", "crash"]  # c was never parsed


def test_past_the_timeout_what_was_answered_stays(fake_vllm: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(argv_check, "CHECK_TIMEOUT_S", 20.0)  # a base that a fake's start fits in, even loaded
    monkeypatch.setattr(argv_check, "CHECK_ITEM_TIMEOUT_S", 0.0)
    specs = [_spec(fake_vllm, "a", "/m/a", 9000), _spec(fake_vllm, "b", "hang", 9001),
             _spec(fake_vllm, "c", "/m/c", 9002)]
    checks = argv_check.check_specs(specs, {"cpu": run_here(tmp_path)})
    assert [(c.process, c.ok, c.version, c.error) for c in checks] == [
        ("a/0", True, "9.9", None),
        ("b/0", False, None, "vLLM did not answer the check within 20 s"),
        ("c/0", False, None, "not checked: the check ended at an earlier command: vLLM did not answer the check "
                             "within 20 s")]
    pid = _parsed(tmp_path)[-1]["pid"]
    assert isinstance(pid, int) and not Path(f"/proc/{pid}").exists()  # the hung check was killed


def test_only_what_the_cache_lacks_is_sent_and_all_cached_starts_no_process(fake_vllm: Path, tmp_path: Path) -> None:
    runners = {"cpu": run_here(tmp_path)}
    first = argv_check.check_specs([_spec(fake_vllm, "a", "/m/a", 9000)], runners)
    assert [(c.ok, c.version) for c in first] == [(True, "9.9")]
    both = [_spec(fake_vllm, "a", "/m/a", 9100), _spec(fake_vllm, "b", "/m/b", 9101)]  # a again on another port
    assert [(c.process, c.ok, c.version) for c in argv_check.check_specs(both, runners)] == [
        ("a/0", True, "9.9"), ("b/0", True, "9.9")]
    assert _starts(tmp_path) == 2
    assert [entry["model"] for entry in _parsed(tmp_path)] == ["/m/a", "/m/b"]  # the second process parsed only b
    again = argv_check.check_specs(both, runners)
    assert [(c.process, c.ok, c.version) for c in again] == [("a/0", True, "9.9"), ("b/0", True, "9.9")]
    assert _starts(tmp_path) == 2  # all cached: no process


def test_nodes_with_their_own_runner_get_a_process_each(fake_vllm: Path, tmp_path: Path) -> None:
    """Another runner (an ssh node's) is another process; a node without a runner (slurm) is skipped."""
    specs = [_spec(fake_vllm, "a", "/m/a", 9000, node="n1"), _spec(fake_vllm, "b", "/m/b", 9001, node="n2"),
             _spec(fake_vllm, "c", "/m/c", 9002, node="n1"), _spec(fake_vllm, "d", "/m/d", 9003, node="gpu")]
    checks = argv_check.check_specs(specs, {"n1": run_here(tmp_path), "n2": run_here(tmp_path), "gpu": None})
    assert [(c.process, c.node, c.ok, c.version, c.skipped) for c in checks] == [
        ("a/0", "n1", True, "9.9", None), ("b/0", "n2", True, "9.9", None), ("c/0", "n1", True, "9.9", None),
        ("d/0", "gpu", True, None, "its node is allocated later: the slurm job checks it before any replica starts")]
    parsed = _parsed(tmp_path)
    pids = {entry["model"]: entry["pid"] for entry in parsed}
    assert pids["/m/a"] == pids["/m/c"] != pids["/m/b"]
    assert _starts(tmp_path) == 2


def test_a_vllm_that_cannot_be_imported_fails_every_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPS_HOME", str(tmp_path / "home"))
    vllm = tmp_path / "vllm"
    vllm.write_text(f"#!{sys.executable}\n")  # a python without vLLM
    vllm.chmod(0o755)
    checks = argv_check.check_specs([_spec(vllm, "a", "/m/a", 9000), _spec(vllm, "b", "/m/b", 9001)],
                                    {"cpu": run_here(tmp_path)})
    assert [(c.ok, c.version, c.error) for c in checks] == [
        (False, None, "cannot import vllm: ModuleNotFoundError: No module named 'vllm'")] * 2


def test_answers_of_a_batch() -> None:
    out = ('noise\nOPS_VLLM_CHECK {"ok": true, "version": "1", "error": null, "index": 1}\n'
           'OPS_VLLM_CHECK {"ok": false, "version": "1", "error": "bad", "index": 0}\n'
           'OPS_VLLM_CHECK {"ok": true, "version": "1", "error": null, "index": 7}\n')  # not an item: ignored
    assert parse_batch(2, out, "", 3) == [
        (False, "1", "bad"), (True, "1", None),
        (False, None, "noise")]  # a stdout-only crash: its last lines, without the answers
    assert parse_batch(124, "", "vLLM did not answer the check within 330 s", 2) == [
        (False, None, "vLLM did not answer the check within 330 s"),
        (False, None, "not checked: the check ended at an earlier command: vLLM did not answer the check within 330 s")]
    assert parse_batch(139, "", "", 1) == [(False, None, "the check exited with status 139 and said nothing")]
