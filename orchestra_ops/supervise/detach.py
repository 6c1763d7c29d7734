"""`ops eval --detach`: start the supervisor (supervisor.py) away from the terminal.

- `tmux` (the default): a tmux server of the run's own (`tmux -L ops-run-<name>-<hash>`, session
  `run`), started by this command, so the supervisor has this shell's environment (provider keys
  included, never written anywhere) and outlives the terminal, and `ops down` of the fleet does not
  take the run along. `tmux -L SOCKET attach -t run` shows the supervisor's own lines.
- `slurm`: an sbatch job of its own (CPU only) with the topology's `eval.slurm` settings, `--requeue`
  (slurm's own requeue after a node failure) and `--signal=B:TERM@LEAD` (LEAD: 300 s, or half the time
  limit when that is under 10 minutes), its output appended to `RUN/slurm-<job>.out`; the batch shell
  `exec`s the supervisor, which gets the signal and hands the run to a successor job (supervisor.py).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from orchestra_ops.config.nodes import SlurmSettings
from orchestra_ops.errors import ConfigError
from orchestra_ops.fleet.backends.slurmctl import SlurmCli
from orchestra_ops.runner.rundir import write_run_info
from orchestra_ops.supervise.supervisor import SBATCH_FILE, STOP_FILE

TMUX_SESSION = "run"
SIGNAL_LEAD_S = 300


@dataclass
class DetachRequest:
    run_dir: Path  # absolute
    eval_args: list[str]  # `eval SUITE …` for the child
    mode: str = "tmux"
    max_restarts: int = 5
    backoff_s: float = 5.0
    notify: str | None = None
    slurm: SlurmSettings | None = None  # mode slurm: the job's settings
    cwd: Path = Path(".")
    suite: str = ""
    topology: str = ""


def supervisor_argv(request: DetachRequest) -> list[str]:
    argv = [sys.executable, "-m", "orchestra_ops", "_supervise", "--run-dir", str(request.run_dir),
            "--mode", request.mode, "--max-restarts", str(request.max_restarts), "--backoff", f"{request.backoff_s:g}"]
    if request.notify:
        argv += ["--notify", request.notify]
    return [*argv, "--", *request.eval_args]


def tmux_socket(run_dir: Path) -> str:
    """A socket name of the run's own: readable, and unique per run dir."""
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9_-]", "_", run_dir.name)[:40]
    return f"ops-run-{name}-{digest}"


def detach(request: DetachRequest) -> dict[str, Any]:
    """Start the supervisor; the `supervisor` entry written to run.json (where it runs)."""
    from orchestra_ops.supervise.runs import ACTIVE, run_row

    request.run_dir.mkdir(parents=True, exist_ok=True)
    current = run_row(request.run_dir)
    if current.state in ACTIVE:
        raise ConfigError(f"{request.run_dir} is {current.state} already ({current.where}); `ops stop "
                          f"{request.run_dir}` first, or `ops attach {request.run_dir}` to follow it")
    (request.run_dir / STOP_FILE).unlink(missing_ok=True)
    base: dict[str, Any] = {"mode": request.mode, "state": "starting", "restarts": 0,
                            "max_restarts": request.max_restarts, "host": socket.gethostname()}
    if request.mode == "slurm":
        entry = {**base, **_submit(request)}
    elif request.mode == "tmux":
        entry = {**base, **_start_tmux(request)}
    else:
        raise ConfigError(f"--detach {request.mode}: choose tmux or slurm")
    write_run_info(request.run_dir, {"suite": request.suite, "topology": request.topology, "supervisor": entry})
    return entry


def _start_tmux(request: DetachRequest) -> dict[str, Any]:
    from orchestra_ops.fleet.backends.tmux import TmuxBackend  # libtmux only when detaching to tmux

    tmux = TmuxBackend()
    sock = tmux_socket(request.run_dir)
    if tmux.has_session(sock, TMUX_SESSION):
        raise ConfigError(f"{request.run_dir} is already supervised (tmux -L {sock} session '{TMUX_SESSION}'); "
                          f"`ops stop {request.run_dir}` first")
    out = tmux.tmux(sock, "new-session", "-d", "-P", "-F", "#{pane_pid}", "-s", TMUX_SESSION, "-x", "200", "-y", "50",
                    "-c", str(request.cwd), "--", *supervisor_argv(request))
    return {"pid": int(out[0].strip()), "tmux": {"socket": sock, "session": TMUX_SESSION}}


def slurm_minutes(limit: str) -> float | None:
    """A slurm time limit (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in minutes; None for 'infinite'/unknown."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", limit.strip())
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is not None:  # D-H[:M[:S]]
        return int(days) * 1440 + int(first) * 60 + int(second or 0) + int(third or 0) / 60
    if third is not None:  # H:M:S
        return int(first) * 60 + int(second) + int(third) / 60
    return int(first) + int(second or 0) / 60  # M or M:S


def signal_lead_s(limit: str) -> int:
    """300 s before the limit, or halfway through a limit under 10 minutes (so an attempt gets work done)."""
    minutes = slurm_minutes(limit)
    if minutes is None:
        return SIGNAL_LEAD_S
    return max(10, min(SIGNAL_LEAD_S, int(minutes * 60 / 2)))


def sbatch_script(request: DetachRequest) -> str:
    settings = request.slurm or SlurmSettings()
    if settings.gpus:
        raise ConfigError(f"eval.slurm.gpus: {settings.gpus}: the eval job is CPU only (the fleet has the GPUs)")
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.run_dir.name)
    lines = ["#!/bin/bash", f"#SBATCH --job-name=ops-eval-{name}",
             f"#SBATCH --output={request.run_dir}/slurm-%j.out", "#SBATCH --open-mode=append", "#SBATCH --requeue",
             f"#SBATCH --signal=B:TERM@{signal_lead_s(settings.time)}", f"#SBATCH --time={settings.time}",
             "#SBATCH --nodes=1", "#SBATCH --ntasks=1", f"#SBATCH --chdir={request.cwd}"]
    for flag, value in (("partition", settings.partition), ("account", settings.account), ("qos", settings.qos),
                        ("cpus-per-task", settings.cpus_per_task), ("mem", settings.mem)):
        if value is not None:
            lines.append(f"#SBATCH --{flag}={value}")
    if settings.exclusive:
        lines.append("#SBATCH --exclusive")
    lines += [f"#SBATCH {arg}" for arg in settings.extra_args]
    lines.append('echo "ops-eval: job ${SLURM_JOB_ID:-?} start ${SLURM_RESTART_COUNT:-0} on $(hostname)"')
    lines.append(f"exec {shlex.join(supervisor_argv(request))}")
    return "\n".join(lines) + "\n"


def _submit(request: DetachRequest) -> dict[str, Any]:
    script = request.run_dir / SBATCH_FILE
    script.write_text(sbatch_script(request), encoding="utf-8")
    job_id = SlurmCli().submit(str(script))
    return {"job_id": job_id, "sbatch": str(script)}


def eval_slurm_settings(topology_file: str | None, walltime: str | None) -> SlurmSettings:
    """The topology's `eval.slurm` (or the defaults), with `--walltime` over its time."""
    settings = SlurmSettings()
    if topology_file and Path(topology_file).is_file():
        from orchestra_ops.config.loader import load_topology

        declared = load_topology(topology_file).eval
        if declared is not None:
            settings = declared.slurm
    if walltime:
        try:
            settings = SlurmSettings.model_validate({**settings.model_dump(), "time": walltime})
        except ValidationError as exc:
            raise ConfigError(f"--walltime {walltime}: {exc.errors()[0]['msg']}") from None
    return settings
