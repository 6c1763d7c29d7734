"""Have each node's own vLLM parse the exact argv `ops up` will run, before anything starts.

Our topology checks know the flags we set; they cannot know every flag and value of every vLLM
version (`--dtype float13`, `--reasoning-parser qwen4` in engine_args, a parser name that version
lacks). So before launching, `ops up` (and `ops plan --check`) runs, on the node and with the node's
vLLM, a short program (CHECK_SOURCE) that builds vLLM's own CLI parser exactly as `vllm` does, parses
the replica's argv, runs vLLM's own pre-launch validation (serve's `validate`, the engine args, the API
server's tool/reasoning parser check) and stops before anything is loaded. It answers one line
`OPS_VLLM_CHECK {"ok": …, "version": …, "error": …}`; the error is vLLM's own message.

The interpreter is found from the vLLM command: `python -m vllm…` runs directly; a `vllm` console
script is located on the node's PATH and its shebang names the venv's python. One check per model
(its replicas differ only in port and env), all in parallel: on this machine, or over the ssh agent. A
slurm node has no host until its job runs, so its sbatch script runs the same check first and ends the
job with vLLM's message (backends/sbatch.py); `ops up` then fails with the job log's lines.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import PositionedYaml
from orchestra_ops.fleet import argv_check_cache
from orchestra_ops.fleet.process_spec import ProcessSpec

log = logging.getLogger(__name__)

MARKER = "OPS_VLLM_CHECK "
CHECK_TIMEOUT_S = 300.0  # importing vLLM takes 10-20 s on a loaded 2-core machine

# Runs under the node's vLLM interpreter with argv `serve MODEL FLAGS…`; never imported by ops.
CHECK_SOURCE = r'''
import contextlib, io, json, sys
def report(ok, version, error):
    sys.stdout.write("OPS_VLLM_CHECK " + json.dumps({"ok": ok, "version": version, "error": error}) + "\n")
    sys.stdout.flush()
try:
    import importlib.metadata as metadata
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = None
    import vllm.entrypoints.cli.main as cli_main
    import vllm.entrypoints.cli.serve as serve_cli
except Exception as exc:
    report(False, None, "cannot import vllm: %s: %s" % (type(exc).__name__, exc))
    sys.exit(3)
reached = []
def parsed(args):
    from vllm.engine.arg_utils import AsyncEngineArgs
    engine_args = AsyncEngineArgs.from_cli_args(args)
    merge = getattr(engine_args, "create_structured_outputs_config", None)
    if merge is not None:
        args.structured_outputs_config = merge()
    try:
        from vllm.entrypoints.launchers.launcher import validate_api_server_args
    except ImportError:
        from vllm.entrypoints.openai.api_server import validate_api_server_args
    validate_api_server_args(args)
    reached.append(True)
serve_cli.ServeSubcommand.cmd = staticmethod(parsed)
sys.argv = ["vllm", *sys.argv[1:]]
errors = io.StringIO()
try:
    with contextlib.redirect_stderr(errors):
        cli_main.main()
except SystemExit as exc:
    lines = [line for line in errors.getvalue().splitlines() if line.strip()]
    report(False, version, lines[-1] if lines else "exit %s" % exc.code)
    sys.exit(2)
except BaseException as exc:
    report(False, version, "%s: %s" % (type(exc).__name__, exc))
    sys.exit(2)
report(bool(reached), version, None if reached else "vllm did not reach `serve`")
'''

# `sh -c LOCATE SOURCE COMMAND ARGS…`: find COMMAND on PATH, read the python from its shebang (or, for a
# console script with a long path, from pip's `'''exec' PYTHON "$0"` trampoline) and run SOURCE there.
LOCATE = r"""exe=$(command -v "$1") || { echo "command not found: $1" >&2; exit 127; }
shift
py=$(sed -n '1s/^#![[:space:]]*//p' "$exe")
case "$py" in
  */sh|*/bash|"") py=$(sed -n "2s/^'''exec' \(.*\) \"\$0\".*/\1/p" "$exe") ;;
esac
[ -n "$py" ] || { echo "$exe is not a python console script" >&2; exit 126; }
exec $py -c "$0" "$@"
"""


@dataclass(frozen=True)
class VllmCheck:
    """What a node's vLLM said of one model's argv."""

    process: str  # the replica checked (`answer/0`)
    group: str  # its model's key in the topology
    node: str
    ok: bool
    version: str | None
    error: str | None  # vLLM's own message
    skipped: str | None = None  # why it was not checked


@dataclass(frozen=True)
class CheckRun:
    """One check to run on a node: argv, the replica's environment, and where."""

    spec: ProcessSpec
    argv: list[str]


Runner = Callable[[CheckRun], "tuple[int, str, str]"]  # -> (exit status, stdout, stderr)


def check_argv(argv: Sequence[str]) -> list[str] | None:
    """The command that checks a vLLM replica's argv, or None when the command's form is not one we know."""
    if "serve" not in argv:
        return None
    at = list(argv).index("serve")
    command, args = list(argv[:at]), list(argv[at:])
    if len(command) >= 3 and command[-2] == "-m" and command[-1].startswith("vllm"):
        return [*command[:-2], "-c", CHECK_SOURCE, *args]
    if len(command) == 1:
        return ["sh", "-c", LOCATE, CHECK_SOURCE, command[0], *args]
    return None


def parse_answer(code: int, stdout: str, stderr: str) -> tuple[bool, str | None, str | None]:
    """(ok, version, error) from what the check printed; a crash before the answer keeps its last lines."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                answer = json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                break
            return bool(answer.get("ok")), answer.get("version"), answer.get("error")
    tail = [line for line in (stderr or stdout).splitlines() if line.strip()][-3:]
    return False, None, " / ".join(tail) or f"the check exited with status {code} and said nothing"


def run_here(cwd: Path) -> Runner:
    """Run checks on this machine, in `cwd`, with the replica's environment over ours; a command this
    vLLM accepted before is not asked again (argv_check_cache.py)."""

    def run(item: CheckRun) -> tuple[int, str, str]:
        key = argv_check_cache.cache_key(item.spec.engine_argv, item.spec.env, cwd)  # what vLLM checks
        version = argv_check_cache.accepted(key) if key else None
        if version is not None:
            return 0, MARKER + json.dumps({"ok": True, "version": version, "error": None, "cached": True}), ""
        env = {**os.environ, **item.spec.env}
        try:
            done = subprocess.run(item.argv, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=CHECK_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return 124, "", f"vLLM did not answer the check within {CHECK_TIMEOUT_S:.0f} s"
        except OSError as exc:
            return 127, "", str(exc)
        ok, version, _ = parse_answer(done.returncode, done.stdout, done.stderr)
        if ok and version and key:
            argv_check_cache.remember(key, version)
        return done.returncode, done.stdout, done.stderr

    return run


def check_specs(specs: Sequence[ProcessSpec], runners: dict[str, Runner | None]) -> list[VllmCheck]:
    """Check the first replica of every vLLM model in `specs` (runner per node; None: cannot check there)."""
    firsts: dict[str, ProcessSpec] = {}
    for spec in specs:
        if spec.kind == "vllm":  # one per model: its servers differ in port, ranks and env
            firsts.setdefault(spec.group, spec)
    if not firsts:
        return []

    def one(spec: ProcessSpec) -> VllmCheck:
        runner = runners.get(spec.node)
        argv = check_argv(spec.engine_argv)  # a Ray model's gate in front is not vLLM's to parse
        if runner is None:
            return VllmCheck(spec.name, spec.group, spec.node, True, None, None,
                             skipped="its node is allocated later: the slurm job checks it before any replica starts")
        if argv is None:
            return VllmCheck(spec.name, spec.group, spec.node, True, None, None,
                             skipped=f"cannot tell the interpreter of {spec.argv[0]!r}")
        code, out, err = runner(CheckRun(spec, argv))
        ok, version, error = parse_answer(code, out, err)
        log.debug("vLLM check of %s on %s: ok=%s version=%s", spec.name, spec.node, ok, version)
        return VllmCheck(spec.name, spec.group, spec.node, ok, version, error)

    with ThreadPoolExecutor(max_workers=len(firsts)) as pool:
        return list(pool.map(one, firsts.values()))


def problems(checks: Sequence[VllmCheck], doc: PositionedYaml, topology: Topology) -> list[str]:
    """One located line per model vLLM refused: at the engine_args entry vLLM names, else at the model."""
    lines = []
    for check in checks:
        if check.ok:
            continue
        path: tuple[str | int, ...] = ("models", check.group)
        args = topology.models[check.group].engine_args if check.group in topology.models else []
        index = _named_arg(args, check.error or "")
        if index is not None:
            path = ("models", check.group, "engine_args", index)
        lines.append(doc.where(path, f"vLLM {check.version or '(version unknown)'} on node {check.node} refuses "
                                     f"the command of {check.process}: {check.error}"))
    return lines


def _named_arg(args: Sequence[str], error: str) -> int | None:
    """The engine_args entry vLLM's message names: of the flags it names, the one whose value it quotes first
    (a refused value comes before the valid choices argparse lists), else the first flag it names.
    A flag may repeat (a topology's `--dtype float32`, then an override `--dtype float13`): the line to fix is
    the refused one, not the first `--dtype`."""
    named: list[int] = []
    quoted: list[tuple[int, int]] = []  # (where the message quotes the value, index)
    for index, arg in enumerate(args):
        flag, sep, value = arg.partition("=")
        if not flag.startswith("-") or not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", error):
            continue
        named.append(index)
        if not sep and index + 1 < len(args) and not args[index + 1].startswith("-"):
            value = args[index + 1]
        found = [at for at in (error.find(f"'{value}'"), error.find(f'"{value}"')) if at >= 0] if value else []
        if found:
            quoted.append((min(found), index))
    if quoted:
        return min(quoted)[1]
    return named[0] if named else None


def versions(checks: Sequence[VllmCheck]) -> dict[str, str]:
    """node -> the vLLM version that answered there."""
    return {check.node: check.version for check in checks if check.version}
