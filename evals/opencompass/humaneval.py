"""The humaneval suite: OpenCompass's humaneval_gen over the fleet, every completion run in our sandbox.

Read from OpenCompass a5acc4bb: opencompass/configs/datasets/humaneval/humaneval_gen.py imports
humaneval_openai_sample_evals_gen_dcae0e.py: one HUMAN turn (an instruction to implement the function,
then the problem's `prompt`), zero-shot, GenInferencer with the model's max_out_len, output column
`task_id`, pred_postprocessor humaneval_postprocess_v2 (postprocess.py: the first fenced block, left-
stripped), HumanEvalEvaluator with k [1, 10, 100], abbr `openai_humaneval`. opencompass/datasets/humaneval.py
(HumanevalDataset: a JSONL file of {"task_id", "prompt", "entry_point", "test", …}, OpenCompass's local
data/humaneval/human-eval-v2-20210705.jsonl; HumanEvalEvaluator hands the completions to human-eval's
evaluate_functional_correctness with timeout 3.0 and reports `humaneval_pass@k` x 100 for each k that
every problem has k samples of: with one completion per problem only `humaneval_pass@1`, the fraction
passed). From open-compass/human-eval 8d2b96ae, human_eval/execution.py: the program is
`prompt + completion + "\\n" + test + "\\n" + "check(<entry_point>)"`, exec'd after `reliability_guard()`
(exit, quit, os.kill, os.system, os.remove, … , subprocess.Popen set to None) with its output swallowed
and a 3 s SIGALRM limit; its result is `passed`, `timed out` or `failed: <exception>` (any BaseException,
SystemExit included), and only `passed` counts.

Here the same program runs in our sandbox (orchestra_ops/sandbox, through the run's context), inside a
harness (HARNESS below, our own code) that applies the same guard, swallows the output the same way, sets
the same alarm and prints its verdict after a per-run random marker; the sandbox adds isolation
(bubblewrap), rlimits, an output cap and a wall-time kill, so a program that hangs, floods its output or
tries to reach the machine fails that sample only. Without bubblewrap nothing runs unless `--exec-unsafe`
is given (the run stops at start, exit 2). `--exec-timeout` is the alarm (OpenCompass's 3.0 s).

Each record keeps `result` (OpenCompass's string) and `exec` (how the sandboxed process ended). Sample ids
are `openai_humaneval/<row>`.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestra_ops.evals.bundled import packaged
from orchestra_ops.evals.opencompass.postprocess import humaneval_v2
from orchestra_ops.evals.opencompass.suite import SingleDatasetSuite, common_options

from orchestra_ops.client.routing import Routing
from orchestra_ops.errors import ConfigError
from orchestra_ops.runner.dataset import Sample, read_jsonl, text_fields_problem
from orchestra_ops.runner.suite import Alert, SuiteOption, TaskContext
from orchestra_ops.runner.toolbox import Toolbox
from orchestra_ops.sandbox import ExecResult, SandboxPolicy, require_isolation

DATASET = "openai_humaneval"
FILE = "human-eval-v2-20210705.jsonl"
STARTUP_S = 10.0  # the sandbox's wall time beyond the alarm: interpreter start under load

HARNESS = r'''
import contextlib, io, os, signal
_MARK = %(mark)r
_PROGRAM = %(program)r
_TIMEOUT = %(timeout)r

class TimeoutException(Exception):
    pass

class WriteOnlyStringIO(io.StringIO):
    def read(self, *args, **kwargs):
        raise IOError
    def readline(self, *args, **kwargs):
        raise IOError
    def readlines(self, *args, **kwargs):
        raise IOError
    def readable(self, *args, **kwargs):
        return False

class _RedirectStdin(contextlib._RedirectStream):
    _stream = "stdin"

def _alarm(signum, frame):
    raise TimeoutException("Timed out!")

def _guard():
    import builtins, faulthandler, shutil, subprocess, sys
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                 "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown",
                 "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None

_out = os.dup(1)
_write, _exit = os.write, os._exit
try:
    _guard()
    _stream = WriteOnlyStringIO()
    with contextlib.redirect_stdout(_stream), contextlib.redirect_stderr(_stream), _RedirectStdin(_stream):
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, _TIMEOUT)
        try:
            exec(_PROGRAM, {})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    _result = "passed"
except TimeoutException:
    _result = "timed out"
except BaseException as e:
    _result = "failed: %%s" %% (e,)
_write(_out, ("\n" + _MARK + _result.replace("\n", " ") + "\n").encode("utf-8", "replace"))
_exit(0)
'''


def check_program(unit: Mapping[str, Any], completion: str) -> str:
    """human-eval's check program for one completion."""
    return f"{unit['prompt']}{completion}\n{unit['test']}\ncheck({unit['entry_point']})"


def verdict(ran: ExecResult, mark: str) -> str:
    """OpenCompass's result string for one sandboxed run of HARNESS."""
    if ran.timed_out:
        return "timed out"
    if ran.truncated:
        return "failed: output limit"
    lines = ran.stdout.rstrip("\n").split("\n")
    if ran.returncode == 0 and lines and lines[-1].startswith(mark):
        return lines[-1][len(mark):]
    return f"failed: exit {ran.returncode}"


class HumanEvalSuite(SingleDatasetSuite):
    """humaneval as OpenCompass's humaneval_gen scores it: pass@1 of each completion, run in the sandbox."""

    dataset_name = DATASET

    name = "humaneval"
    default_dataset = packaged("opencompass/data/humaneval")
    template_files: Mapping[str, str] = {"question": packaged("opencompass/templates/humaneval_question.txt")}
    metric = "humaneval_pass@1"
    template_fields: Mapping[str, tuple[str, ...]] = {"question": ("prompt",)}
    options = (
        SuiteOption("exec_timeout", "--exec-timeout", "float", "Seconds a completion's tests may run "
                    "(OpenCompass's human-eval timeout).", default=3.0, minimum=0.1),
        *common_options(4096),
    )

    def __init__(self) -> None:
        super().__init__()
        self.policy = SandboxPolicy()
        self.mark = ""

    def prepare(self, routing: Routing, options: Mapping[str, Any]) -> list[str]:
        names = super().prepare(routing, options)
        timeout = float(options.get("exec_timeout") or 3.0)
        self.policy = SandboxPolicy(wall_time_s=timeout + STARTUP_S, cpu_s=math.ceil(timeout) + 5,
                                    unsafe=bool(options.get("exec_unsafe")))
        require_isolation(self.policy)  # no isolation and no --exec-unsafe: stop now (exit 2)
        self.mark = f"humaneval-verdict-{secrets.token_hex(16)}:"
        return names

    def routing_notes(self, toolbox: Toolbox) -> list[str]:
        line = f"humaneval completions run in the sandbox: {toolbox.sandbox.describe(self.policy)}"
        return [line if toolbox.sandbox.isolation.full else Alert(line)]

    def load(self, path: Path, *, dedupe: bool) -> list[Sample]:
        source = path / FILE if path.is_dir() else path
        if path.is_dir() and not source.exists():
            raise ConfigError(f"{source}: no such file (a humaneval directory holds {FILE})")
        samples: list[Sample] = []
        for number, row in read_jsonl(source, "humaneval"):
            problem = text_fields_problem(row, ("task_id", "prompt", "entry_point", "test"))
            if problem:
                raise ConfigError(f"{source}:{number}: {problem}; a humaneval line is {{\"task_id\", \"prompt\", "
                                  "\"entry_point\", \"test\"} (strings)")
            index = len(samples)
            samples.append({"id": f"{DATASET}/{index}", "index": index, "task_id": row["task_id"],
                            "prompt": row["prompt"], "entry_point": row["entry_point"], "test": row["test"]})
        if not samples:
            raise ConfigError(f"{source}: no samples")
        return samples

    def messages(self, unit: Sample) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.templates["question"].render(prompt=str(unit["prompt"]))}]

    def extract(self, unit: Sample, prediction: str) -> str:
        return humaneval_v2(prediction)

    def gold(self, unit: Sample) -> str:
        return str(unit["task_id"])

    async def evaluate(self, unit: Sample, extracted: str, gold: str, ctx: TaskContext) -> dict[str, Any]:
        program = check_program(unit, extracted)
        harness = HARNESS % {"mark": self.mark, "program": program,
                             "timeout": float(self.settings.get("exec_timeout") or 3.0)}
        ran = await ctx.execute(harness, self.policy)
        result = verdict(ran, self.mark)
        return {"correct": result == "passed", "result": result, "exec": ran.to_json()}

    def detail_fields(self, record: Mapping[str, Any]) -> dict[str, Any]:
        return {"result": record.get("result", "")}
