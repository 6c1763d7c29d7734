"""Have each node's own vLLM parse the exact argv `ops up` will run, before anything starts.

Our topology checks know the flags we set; they cannot know every flag and value of every vLLM
version (`--dtype float13`, `--reasoning-parser qwen4` in engine_args, a parser name that version
lacks). So before launching, `ops up` (and `ops plan --check`) runs, on the node and with the node's
vLLM, a short program (argv_check_source.py) that imports vLLM once, then for each command builds vLLM's
own CLI parser exactly as `vllm` does, parses it, runs vLLM's own pre-launch validation (serve's
`validate`, the engine args, the API server's tool/reasoning parser check) and stops before anything is
loaded. It answers one line `OPS_VLLM_CHECK {"ok": …, "version": …, "error": …, "index": …}` per
command; the error is vLLM's own message.

The interpreter is found from the vLLM command: `python -m vllm…` runs directly; a `vllm` console
script is located on the node's PATH and its shebang names the venv's python. The first replica of
each model is checked (its replicas differ only in port and env); importing vLLM is most of a check's
cost, so every model checked by one runner (this machine: every local node; over the ssh agent: one
node) with one interpreter is checked by ONE process, each with its replica's env; the runners run in
parallel. A slurm node has no host until its job runs, so its sbatch script runs the same program
first, one command at a time, and ends the job with vLLM's message (backends/sbatch.py); `ops up` then
fails with the job log's lines.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import PositionedYaml
from orchestra_ops.fleet.argv_check_source import BATCH_ENV, BATCH_FLAG, CHECK_SOURCE, LOCATE, MARKER
from orchestra_ops.fleet.process_spec import ProcessSpec

log = logging.getLogger(__name__)

__all__ = ["CHECK_SOURCE", "CHECK_TIMEOUT_S", "LOCATE", "MARKER", "Answer", "CheckItem", "Runner", "VllmCheck",
           "batch_argv", "batch_env", "batch_timeout", "check_argv", "check_specs", "parse_answer", "parse_batch",
           "problems", "versions"]

CHECK_TIMEOUT_S = 300.0  # importing vLLM takes 10-20 s on a loaded 2-core machine
CHECK_ITEM_TIMEOUT_S = 30.0  # and each further command of a batch a little (its parse, a lazy import)


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
class CheckItem:
    """One command to check: the replica, its interpreter's command (`check_argv` without the args) and
    the words vLLM parses (`serve MODEL FLAGS…`)."""

    spec: ProcessSpec
    interpreter: tuple[str, ...]
    args: tuple[str, ...]


Answer = tuple[bool, str | None, str | None]  # (ok, version, error)
# Checks items of one interpreter in one process; an answer per item, in their order.
Runner = Callable[[Sequence[CheckItem]], list[Answer]]


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """(the check's interpreter command, the words after it) of a vLLM command, or None when its form is
    not one we know."""
    if "serve" not in argv:
        return None
    at = list(argv).index("serve")
    command, args = list(argv[:at]), list(argv[at:])
    if len(command) >= 3 and command[-2] == "-m" and command[-1].startswith("vllm"):
        return [*command[:-2], "-c", CHECK_SOURCE], args
    if len(command) == 1:
        return ["sh", "-c", LOCATE, CHECK_SOURCE, command[0]], args
    return None


def check_argv(argv: Sequence[str]) -> list[str] | None:
    """The command that checks one vLLM replica's argv, or None when the command's form is not one we know."""
    split = _split(argv)
    return None if split is None else [*split[0], *split[1]]


def batch_argv(items: Sequence[CheckItem]) -> list[str]:
    """The one command that checks every item (they share an interpreter); the items are in batch_env."""
    return [*items[0].interpreter, BATCH_FLAG]


def batch_env(items: Sequence[CheckItem]) -> dict[str, str]:
    """The environment the batch's process starts with: what every item sets alike (PATH, to find `vllm`), and
    the items themselves in BATCH_ENV (their args, and their own env, set around each parse)."""
    common = dict(items[0].spec.env)
    for item in items[1:]:
        common = {key: value for key, value in common.items() if item.spec.env.get(key) == value}
    payload = [{"args": list(item.args), "env": dict(item.spec.env)} for item in items]
    return {**common, BATCH_ENV: json.dumps(payload)}  # never in argv: an env value may be a secret


def batch_timeout(count: int) -> float:
    return CHECK_TIMEOUT_S + CHECK_ITEM_TIMEOUT_S * max(count - 1, 0)


def parse_answer(code: int, stdout: str, stderr: str) -> Answer:
    """(ok, version, error) from what a one-command check printed; a crash before the answer keeps its last lines."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                answer = json.loads(line[len(MARKER):])
            except json.JSONDecodeError:
                break
            return bool(answer.get("ok")), answer.get("version"), answer.get("error")
    return False, None, _last_lines(code, stdout, stderr)


def parse_batch(code: int, stdout: str, stderr: str, count: int) -> list[Answer]:
    """An answer per item of a batch of `count`; an item the process never answered (it crashed, or timed out,
    on the first of them) fails with the process's last lines."""
    answers: dict[int, Answer] = {}
    for line in stdout.splitlines():
        if not line.startswith(MARKER):
            continue
        try:
            answer = json.loads(line[len(MARKER):])
        except json.JSONDecodeError:
            continue
        index = answer.get("index") if isinstance(answer, dict) else None
        if isinstance(index, int) and 0 <= index < count:
            answers[index] = (bool(answer.get("ok")), answer.get("version"), answer.get("error"))
    missing = [index for index in range(count) if index not in answers]
    if missing:
        tail = _last_lines(code, stdout, stderr)
        answers[missing[0]] = (False, None, tail)
        for index in missing[1:]:
            answers[index] = (False, None, f"not checked: the check ended at an earlier command: {tail}")
    return [answers[index] for index in range(count)]


def _last_lines(code: int, stdout: str, stderr: str) -> str:
    lines = [line for line in (stderr or stdout).splitlines() if line.strip() and not line.startswith(MARKER)]
    return " / ".join(lines[-3:]) or f"the check exited with status {code} and said nothing"


def check_specs(specs: Sequence[ProcessSpec], runners: dict[str, Runner | None], *,
                first_per_model: bool = True) -> list[VllmCheck]:
    """Check the first replica of every vLLM model in `specs` (every vLLM server with first_per_model=False),
    in their order. `runners`: node -> its runner (None: cannot check there); the items of one runner object
    and one interpreter go to one process, the processes run in parallel."""
    checked: dict[str, ProcessSpec] = {}
    for spec in specs:
        if spec.kind == "vllm":  # one per model: its servers differ in port, ranks and env
            checked.setdefault(spec.group if first_per_model else spec.name, spec)
    results: list[VllmCheck | None] = []
    batches: dict[tuple[int, tuple[str, ...], str | None], list[tuple[int, CheckItem]]] = {}
    for position, spec in enumerate(checked.values()):
        runner = runners.get(spec.node)
        split = _split(spec.engine_argv)  # a Ray model's gate in front is not vLLM's to parse
        if runner is None:
            results.append(VllmCheck(spec.name, spec.group, spec.node, True, None, None,
                                     skipped="its node is allocated later: the slurm job checks it before any "
                                             "replica starts"))
        elif split is None:
            results.append(VllmCheck(spec.name, spec.group, spec.node, True, None, None,
                                     skipped=f"cannot tell the interpreter of {spec.argv[0]!r}"))
        else:
            results.append(None)
            key = (id(runner), tuple(split[0]), spec.env.get("PATH"))  # PATH: where `vllm` is found
            batches.setdefault(key, []).append((position, CheckItem(spec, tuple(split[0]), tuple(split[1]))))

    def run(batch: list[tuple[int, CheckItem]]) -> None:
        items = [item for _, item in batch]
        runner = runners[items[0].spec.node]
        assert runner is not None
        answers = runner(items)
        for (position, item), (ok, version, error) in zip(batch, answers, strict=True):
            log.debug("vLLM check of %s on %s: ok=%s version=%s", item.spec.name, item.spec.node, ok, version)
            results[position] = VllmCheck(item.spec.name, item.spec.group, item.spec.node, ok, version, error)

    if batches:
        with ThreadPoolExecutor(max_workers=len(batches)) as pool:
            list(pool.map(run, batches.values()))  # a runner's exception is raised here
    done = [result for result in results if result is not None]
    assert len(done) == len(results)
    return done


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
