"""`ops eval SUITE`: a resumable async eval over the fleet, logged to the run dir.

One subcommand per registered suite, built on demand: the options every suite shares, plus the
suite's own (`Suite.options`, declared as data in evals/), so `ops eval hle --help` shows exactly
what hle takes and `ops --help` imports no suite.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestra_ops.cli.suite_help import SuiteCommand, everyday_options
from orchestra_ops.errors import ConfigError
from orchestra_ops.supervise.supervisor import SUPERVISED_ENV

if TYPE_CHECKING:
    from orchestra_ops.runner.options import EvalOptions
    from orchestra_ops.runner.progress import Progress
    from orchestra_ops.runner.suite import Suite
    from orchestra_ops.runner.tee import TeeLog

COMMON_OPTIONS: list[click.Option] = [
    click.Option(["--dataset"], type=click.Path(),
                 help="Dataset file or directory (remembered by the run dir; default: the suite's bundled one)."),
    click.Option(["--run-dir"], type=click.Path(file_okay=False), help="Default: runs/<suite>-<topology>/."),
    click.Option(["--resume"], is_flag=True, help="Run only the units that have no result yet."),
    click.Option(["--retry-failed"], is_flag=True, help="Rerun the units whose last result is an error."),
    click.Option(["--dedupe"], is_flag=True, help="Keep the first sample of each duplicate id (else: an error)."),
    click.Option(["--concurrency"], type=click.IntRange(min=1), default=32, show_default=True,
                 help="Units of work in flight."),
    click.Option(["--limit"], type=click.IntRange(min=0), help="Only the first N samples of the dataset."),
    click.Option(["--timeout", "timeout"], type=click.FloatRange(min=0, min_open=True),
                 help="Per-request timeout in seconds for every model (default: each model's request_timeout_s, "
                      "else the topology's defaults.request_timeout_s, else 600)."),
    click.Option(["--task-timeout"], type=click.FloatRange(min=0, min_open=True),
                 help="Deadline of one unit in seconds (default: enough for every attempt of every call)."),
    click.Option(["--max-retries", "attempts"], type=click.IntRange(min=1), default=3, show_default=True,
                 help="Attempts per model call, the first included (1: never retry)."),
    click.Option(["--model", "models"], multiple=True,
                 help="The role or model the suite evaluates (repeat it where the suite compares models)."),
    click.Option(["--template", "templates"], multiple=True, metavar="NAME=PATH",
                 help="Replace one of the suite's prompt templates with this file (its sha256 is recorded)."),
    click.Option(["--topology"], help="A topology file, or the name of a topology that is up (default: the latest)."),
    click.Option(["--model-config"], type=click.Path(dir_okay=False),
                 help="An endpoints file (model_config JSON); its keys are the roles."),
    click.Option(["--affinity"], type=click.Choice(["session", "none"]),
                 help="How calls are spread over a model's replicas: `session` keeps each unit of work (an "
                      "agent task, a tau2 side, a HealthBench example) on one replica, where vLLM's prefix "
                      "cache holds its history, under a load bound; `none` sends every call to the least "
                      "loaded. Default: each model's routing.affinity in the topology (session)."),
    click.Option(["--no-analyze"], is_flag=True,
                 help="Skip `ops analyze` at the end (stats, histograms, report.html in RUN_DIR/analysis)."),
    click.Option(["-v", "--verbose"], is_flag=True,
                 help="Also show the routing table, tool aliases, budgets, sandbox and per-suite score tables "
                      "(always in RUN_DIR/eval.log)."),
    click.Option(["--progress-every"], type=click.FloatRange(min=0.1), default=5.0, show_default=True,
                 help="Seconds between progress lines."),
    click.Option(["--exec-workers"], type=click.IntRange(min=1),
                 help="Programs the sandbox runs at once for suites that execute model-written code "
                      "(default: the number of cores)."),
    click.Option(["--cache"], is_flag=True,
                 help="Keep every answered request in a SQLite response cache and answer a repeated one from it "
                      "(no model call); default file $OPS_HOME/cache/responses.sqlite."),
    click.Option(["--cache-file"], type=click.Path(dir_okay=False),
                 help="The response cache's SQLite file (implies --cache)."),
    click.Option(["--cache-sampled"], is_flag=True,
                 help="With --cache, also cache requests with temperature > 0 (a replay is one draw, not a new one)."),
    click.Option(["--exec-unsafe"], is_flag=True,
                 help="Where bubblewrap cannot isolate model-written code here (no user namespaces, not "
                      "installed), run it anyway with the limits alone: as you, seeing your files and the "
                      "network. Without this flag such a run stops at start with exit 2."),
    click.Option(["--detach"], type=click.Choice(["tmux", "slurm"]), is_flag=False, flag_value="tmux",
                 help="Run under a supervisor, away from this terminal: in a tmux server of the run's own "
                      "(--detach, --detach tmux) or as an sbatch job (--detach slurm: the topology's eval.slurm "
                      "settings). A crash is resumed, a slurm time limit requeued; follow it with "
                      "`ops attach RUN`, `ops runs`; `ops stop RUN` stops it."),
    click.Option(["--max-restarts"], type=click.IntRange(min=0), default=5, show_default=True,
                 help="With --detach: how many times a crashed eval is rerun with --resume."),
    click.Option(["--walltime"], help="With --detach slurm: the job's time limit (default: the topology's "
                                      "eval.slurm.time, else 1:00:00); SIGTERM comes 300 s before it."),
    click.Option(["--restart-backoff"], type=click.FloatRange(min=0), default=5.0, hidden=True,
                 help="Seconds before the first restart (doubling, at most 300)."),
    click.Option(["--stall-after"], type=click.FloatRange(min=0, min_open=True),
                 help="Report a stall when no task has finished for this many seconds (default: the larger "
                      "of 600 and 5x the p99 task time so far): each task in flight, the call it waits on, "
                      "the replica and for how long, to eval.log and `ops runs`."),
    click.Option(["--notify"], metavar="CMD",
                 help="Run CMD (sh -c) with one JSON event on stdin for each replica ejected, stall, fleet "
                      "vanished, restart and the end of the run; a failing CMD is logged, never fatal; one still "
                      "running after 10 s (5 s at the end) is killed with its process group."),
    click.Option(["--fleet-wait", "fleet_wait"], type=click.FloatRange(min=0, min_open=True), default=60.0,
                 show_default=True,
                 help="Seconds a call waits when every replica of its model is down; then the run stops (exit 3; "
                      "a detached run waits for the fleet) instead of failing task after task."),
    click.Option(["--max-cost", "max_cost"], type=click.FloatRange(min=0), metavar="USD",
                 help="Stop taking tasks once the run dir's spend (every call of every attempt, priced from the "
                      "topology's `pricing:`) passes USD: exit 5. Remembered by the run dir; a resume with a "
                      "higher limit goes on."),
]
DETACH_ONLY = frozenset({"detach", "max_restarts", "walltime", "restart_backoff"})
COMMON_NAMES = frozenset(option.name for option in COMMON_OPTIONS if option.name)


class EvalGroup(click.Group):
    """`ops eval SUITE …`: the suites of evals/registry.py, each a command built when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from orchestra_ops.evals.registry import SUITES

        return sorted(SUITES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from orchestra_ops.evals.registry import SUITES, load_suite

        if cmd_name not in SUITES:
            raise click.UsageError(f"unknown suite '{cmd_name}'; suites: {', '.join(sorted(SUITES))}", ctx)
        return suite_command(cmd_name, load_suite(cmd_name))


@click.group("eval", cls=EvalGroup)
def eval_() -> None:
    """Run an eval suite over the fleet; every finished unit lands in the run dir's results.jsonl.

    Ctrl-C stops starting units and lets those in flight finish (a second Ctrl-C aborts them);
    `--resume` then continues where the run stopped. `ops eval SUITE --help` lists a suite's options.
    """


def suite_command(name: str, suite: Any) -> click.Command:
    """The `ops eval NAME` command: the common options plus the suite's own."""
    own = [_click_option(option) for option in suite.options]
    clash = [o.name for o in own if o.name in COMMON_NAMES]
    if clash:
        raise RuntimeError(f"suite {name!r} declares option {clash[0]!r}, which every suite already has")
    doc = (suite.__doc__ or f"The {name} suite.").strip().split("\n\n")[0]
    templates = ", ".join(sorted(suite.template_files))
    if templates:
        doc += f"\n\nTemplates (--template NAME=PATH): {templates}."
    return SuiteCommand(name, params=[*COMMON_OPTIONS, *own], callback=_runner(name, suite), help=doc,
                        everyday=everyday_options(suite))


def _click_option(option: Any) -> click.Option:
    types: dict[str, Any] = {"int": click.IntRange(min=option.minimum) if option.minimum is not None else int,
                             "float": click.FloatRange(min=option.minimum) if option.minimum is not None else float,
                             "str": str, "path": click.Path(), "choice": click.Choice(option.choices)}
    if option.kind == "flag":
        return click.Option([option.flag, option.name], is_flag=True, default=bool(option.default), help=option.help)
    return click.Option([option.flag, option.name], type=types[option.kind], default=option.default,
                        multiple=option.multiple, show_default=option.default not in (None, (), []),
                        help=option.help)


def _runner(name: str, suite: Any) -> Callable[..., None]:
    own = [option.name for option in suite.options]

    def run(**values: Any) -> None:
        ctx = click.get_current_context()
        given = {key: values[key] for key in own
                 if ctx.get_parameter_source(key) is not click.core.ParameterSource.DEFAULT}
        options = eval_options(values, given)
        if values["detach"]:
            _detach(name, suite, options, values, ctx)
            return
        verbose = bool(values["verbose"] or ctx.find_root().params.get("verbose"))
        _run(name, suite, options, analyze=not values["no_analyze"], verbose=verbose)

    return run


def eval_options(values: dict[str, Any], suite_options: dict[str, Any]) -> EvalOptions:
    """The EvalOptions of `ops eval SUITE …` (the command line's values): built here only, for a run here,
    a `--detach`'s checks and its supervised child alike."""
    from orchestra_ops.runner.options import EvalOptions  # keeps `ops --help` light
    from orchestra_ops.runner.templates import parse_overrides

    models = tuple(values["models"])
    return EvalOptions(dataset=values["dataset"], run_dir=values["run_dir"], resume=values["resume"],
                       retry_failed=values["retry_failed"], dedupe=values["dedupe"],
                       concurrency=values["concurrency"], limit=values["limit"],
                       request_timeout_s=values["timeout"], task_timeout_s=values["task_timeout"],
                       attempts=values["attempts"], model=models[0] if models else None, models=models,
                       suite_options=suite_options, templates=parse_overrides(values["templates"]),
                       topology=values["topology"], model_config=values["model_config"],
                       progress_interval_s=values["progress_every"], exec_workers=values["exec_workers"],
                       exec_unsafe=values["exec_unsafe"],
                       cache=cache_path(values["cache"], values["cache_file"], values["cache_sampled"]),
                       cache_sampled=values["cache_sampled"], stall_after_s=values["stall_after"],
                       notify=values["notify"], supervised=os.environ.get(SUPERVISED_ENV) == "1",
                       unavailable_wait_s=values["fleet_wait"], max_cost=values["max_cost"],
                       affinity=values["affinity"])


def _run(name: str, suite: Suite, options: EvalOptions, *, analyze: bool, verbose: bool) -> None:
    """The eval session (orchestra_ops/api/session.py) with this terminal as its console."""
    from orchestra_ops.api import evaluate
    from orchestra_ops.cli.live_progress import live_progress

    def display(tee: TeeLog, progress: Progress, run_dir: Path) -> AbstractContextManager[None]:
        return live_progress(tee, progress, f"ops eval {name} · {run_dir}")

    evaluate(options, suite, console=click.echo, alert_console=lambda text: click.secho(text, fg="red", bold=True),
             display=display, analyze=analyze, verbose=verbose)


def cache_path(cache: bool, cache_file: str | None, cache_sampled: bool) -> str | None:
    """--cache / --cache-file -> the cache file (None: no cache); --cache-sampled alone is bad input."""
    from orchestra_ops.client.cache import default_cache_path

    if cache_file:
        return cache_file
    if cache:
        return str(default_cache_path())
    if cache_sampled:
        raise ConfigError("--cache-sampled needs --cache (or --cache-file PATH)")
    return None


def _detach(name: str, suite: Suite, options: EvalOptions, values: dict[str, Any], ctx: click.Context) -> None:
    """Check everything `ops eval` would (exit 2 here, not in the background), then start the supervisor."""
    from orchestra_ops.api.session import check_eval
    from orchestra_ops.supervise.detach import DetachRequest, detach, eval_slurm_settings

    run = check_eval(options, suite)  # a run dir in use by another eval is refused here, naming its holder
    run_dir = run.run_dir.resolve()
    args = ["eval", name, *_given_args(ctx, skip=DETACH_ONLY | {"run_dir"}), "--run-dir", str(run_dir)]
    topology_file = None if values["model_config"] else run.routing.source  # an endpoints file has no eval:
    slurm = eval_slurm_settings(topology_file, values["walltime"]) if values["detach"] == "slurm" else None
    request = DetachRequest(run_dir=run_dir, eval_args=args, mode=values["detach"],
                            max_restarts=values["max_restarts"], backoff_s=values["restart_backoff"],
                            notify=values["notify"], slurm=slurm, cwd=Path.cwd(), suite=name,
                            topology=run.routing.name)
    entry = detach(request)
    where = (f"slurm job {entry['job_id']}" if "job_id" in entry
             else f"tmux -L {entry['tmux']['socket']} (pid {entry['pid']})")
    click.echo(f"detached: {run_dir} runs under a supervisor in {where}")
    click.echo(f"  follow it:  ops attach {run_dir}")
    click.echo(f"  all runs:   ops runs --root {run_dir.parent}")
    click.echo(f"  stop it:    ops stop {run_dir}")
    click.echo(f"  its log:    {run_dir / 'eval.log'}")


def _given_args(ctx: click.Context, skip: frozenset[str]) -> list[str]:
    """The options given on the command line (not defaults), as arguments for the supervised `ops eval`."""
    args: list[str] = []
    assert ctx.command is not None
    for param in ctx.command.params:
        name = param.name
        if not isinstance(param, click.Option) or name is None or name in skip:
            continue
        if ctx.get_parameter_source(name) in (None, click.core.ParameterSource.DEFAULT):
            continue
        value = ctx.params[name]
        flag = param.opts[0]
        if param.is_flag:
            if value:
                args.append(flag)
            continue
        for item in value if param.multiple else [value]:
            args += [flag, str(item)]
    return args
