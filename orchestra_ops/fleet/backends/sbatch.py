"""The sbatch script of one slurm node: a pure function of the node's settings and its processes.

The job asks for one node (`--gres=gpu:N` and the rest from `slurm:`), appends its own output to the
job log (`--open-mode=append`), raises `ulimit -n` (capped at the node's hard limit, with a line in
the job log), then starts every replica in the background: each with its environment, its
`CUDA_VISIBLE_DEVICES` taken from the devices slurm gave the job (the plan's index i is the i-th
of them), its output appended line-buffered to its own log. Each replica's exit is written to the
job log as `ops-job: exited NAME status=N`, which is how `ops` learns, without ssh, that a replica
died. Before any replica starts, the node's own vLLM parses the command of each vLLM model
(fleet/argv_check.py; `ops-job: vllm-check NAME {…}` in the job log): a refusal ends the job with vLLM's
message and nothing started. The job ends when every replica has exited; at scancel it waits until they have (so a job
that is gone left no process behind, even where slurm tracks processes by parentage only).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestra_ops.config.nodes import SlurmSettings
from orchestra_ops.fleet.argv_check_source import CHECK_SOURCE, LOCATE
from orchestra_ops.fleet.ray_gate import JOB_HEAD

EXIT_PREFIX = "ops-job: exited "
NOT_FOUND_STATUS = 127

PRELUDE = r"""
ops_job_gpus=()
IFS=, read -r -a ops_job_gpus <<< "${CUDA_VISIBLE_DEVICES:-}"
echo "ops-job: job ${SLURM_JOB_ID:-?} on $(hostname) with CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"
ops_nofile=@NOFILE@
ops_hard=$(ulimit -Hn)
if [ "$ops_hard" != unlimited ] && [ "$ops_hard" -lt "$ops_nofile" ]; then
  echo "ops-job: ulimit_nofile $ops_nofile is above the hard limit $ops_hard on $(hostname); using $ops_hard"
  ops_nofile=$ops_hard
fi
ulimit -Sn "$ops_nofile"
ops_stdbuf=""
if command -v stdbuf >/dev/null 2>&1; then ops_stdbuf="stdbuf -oL -eL"; fi

ops_devices() {  # the plan's GPU indices -> the devices slurm gave this job
  local out="" i
  for i in "$@"; do out="${out:+$out,}${ops_job_gpus[$i]:-$i}"; done
  echo "$out"
}

ops_start() {  # NAME LOG "GPU INDICES" VAR=VALUE ... -- ARGV ...
  local name=$1 log=$2 gpus=$3
  shift 3
  (
    while [ "$1" != "--" ]; do export "$1"; shift; done
    shift
    export CUDA_VISIBLE_DEVICES="$(ops_devices $gpus)"
    if ! command -v "$1" >/dev/null 2>&1; then
      echo "ops-job: $name: command not found: $1" | tee -a "$log"
      echo "ops-job: exited $name status=127"
      exit 127
    fi
    echo "ops-job: started $name with CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"
    $ops_stdbuf "$@" >> "$log" 2>&1 &
    pid=$!
    trap ':' TERM  # scancel signals every process of the job: outlive it until the server has exited
    while :; do
      wait $pid
      status=$?
      kill -0 $pid 2>/dev/null || break
    done
    echo "ops-job: exited $name status=$status"
    exit $status
  ) &
}
""".strip("\n")


# A job of several nodes (a model's pipeline stages across them, through Ray): the job's hosts, in slurm's order,
# are written to the job log (how `ops` learns where each process runs); the first is the head of what spans
# them; a process on another node starts there through `srun --overlap -w HOST` (its shell stays here).
MULTI_NODE = r"""
ops_hosts=($(scontrol show hostnames "${SLURM_JOB_NODELIST:-$(hostname)}"))
ops_head=${ops_hosts[0]}
echo "ops-job: hosts ${ops_hosts[*]}"

ops_start_on() {  # HOST_INDEX NAME LOG "GPU INDICES" VAR=VALUE ... -- ARGV ...
  local host=${ops_hosts[$1]} args=()
  shift
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  ops_start "${args[@]}" -- srun --nodes=1 --ntasks=1 --overlap -w "$host" "$@"
}
""".strip("\n")
HOSTS_PREFIX = "ops-job: hosts "

# The node's own vLLM parses each vLLM model's command before anything starts (fleet/argv_check.py; the
# program's one-command form, fleet/argv_check_source.py): the check's shell and Python sources are set once
# (@LOCATE@, @SOURCE@), each check names its replica.
CHECKS = r"""
ops_locate=$(cat <<'OPS_LOCATE_EOF'
@LOCATE@
OPS_LOCATE_EOF
)
ops_check_source=$(cat <<'OPS_SOURCE_EOF'
@SOURCE@
OPS_SOURCE_EOF
)
ops_refused=""
ops_check() {  # NAME VAR=VALUE ... -- CHECK ARGV ...
  local name=$1 out answer
  shift
  out=$(
    while [ "$1" != "--" ]; do export "$1"; shift; done
    shift
    "$@" 2>&1
  )
  answer=$(printf '%s\n' "$out" | grep '^OPS_VLLM_CHECK ' | tail -n 1)
  if [ -z "$answer" ]; then
    answer="OPS_VLLM_CHECK {\"ok\": false, \"error\": \"$(printf '%s' "$out" | tail -n 1 | tr -d '\\"')\"}"
  fi
  echo "ops-job: vllm-check $name ${answer#OPS_VLLM_CHECK }"
  case "$answer" in
    *'"ok": true'*) ;;
    *) echo "ops-job: $name: vLLM on $(hostname) refuses its command: ${answer#OPS_VLLM_CHECK }"; ops_refused=1 ;;
  esac
}
""".strip("\n")

# The job ends when every process has: at scancel slurm sends SIGTERM to every process of the job
# (once: passing it on as well would signal each server twice), the shells stay until the servers
# have exited, so a job that is gone left nothing behind (slurm sends SIGKILL after its KillWait).
EPILOGUE = r"""
trap ':' TERM
while [ -n "$(jobs -pr)" ]; do wait; done
echo "ops-job: every process exited"
""".strip("\n")


@dataclass(frozen=True)
class Replica:
    """One process of the job: its name, log, GPU indices (0-based within the node) and command."""

    name: str
    log: str
    gpus: tuple[int, ...]
    env: Mapping[str, str]
    argv: Sequence[str]
    check: Sequence[str] | None = None  # the vLLM check of its command (argv_check.check_argv), run first
    host_index: int = 0  # which node of the job (0: the batch host; others through srun)


@dataclass(frozen=True)
class SbatchJob:
    topology: str
    node: str
    settings: SlurmSettings
    nofile: int
    job_log: str
    workdir: str
    replicas: tuple[Replica, ...]

    @property
    def job_name(self) -> str:
        return f"ops-{self.topology}-{self.node}"


def sbatch_lines(job: SbatchJob) -> list[str]:
    """The `#SBATCH` options, in a fixed order."""
    s = job.settings
    options = [f"--job-name={job.job_name}", f"--output={job.job_log}", "--open-mode=append",
               f"--chdir={job.workdir}", f"--nodes={s.nodes}", f"--ntasks={s.nodes}"]
    if s.partition:
        options.append(f"--partition={s.partition}")
    if s.gpus:
        options.append(f"--gres=gpu:{s.gpus}")
    options.append(f"--time={s.time}")
    if s.account:
        options.append(f"--account={s.account}")
    if s.qos:
        options.append(f"--qos={s.qos}")
    if s.exclusive:
        options.append("--exclusive")
    if s.cpus_per_task is not None:
        options.append(f"--cpus-per-task={s.cpus_per_task}")
    if s.mem:
        options.append(f"--mem={s.mem}")
    options += s.extra_args
    return [f"#SBATCH {option}" for option in options]


def render_sbatch(job: SbatchJob) -> str:
    """The whole script, every value from the topology shell-quoted."""
    lines = ["#!/bin/bash", *sbatch_lines(job),
             f"# Written by `ops up` for node {job.node} of topology {job.topology}: "
             f"{len(job.replicas)} processes.", PRELUDE.replace("@NOFILE@", str(int(job.nofile))), ""]
    if job.settings.nodes > 1:
        lines += [MULTI_NODE, ""]
    checked = [replica for replica in job.replicas if replica.check]
    if checked:
        lines += [CHECKS.replace("@LOCATE@", LOCATE.rstrip("\n")).replace("@SOURCE@", CHECK_SOURCE.strip("\n")), ""]
        for replica in checked:
            words = ['"$ops_locate"' if word == LOCATE else '"$ops_check_source"' if word == CHECK_SOURCE
                     else shlex.quote(word) for word in replica.check or ()]
            lines.append(" ".join(["ops_check", shlex.quote(replica.name), *_assignments(replica), "--", *words]))
        lines += ['if [ -n "$ops_refused" ]; then', '  echo "ops-job: every process exited"', "  exit 2", "fi", ""]
    for replica in job.replicas:
        gpus = " ".join(str(gpu) for gpu in replica.gpus)
        start = ["ops_start_on", str(replica.host_index)] if replica.host_index else ["ops_start"]
        argv = " ".join(_job_word(word) for word in replica.argv)
        lines.append(" ".join([*start, shlex.quote(replica.name), shlex.quote(replica.log), shlex.quote(gpus),
                               *_assignments(replica), "--", argv]))
    lines += ["", *EPILOGUE.splitlines(), ""]
    return "\n".join(lines)


def _job_word(word: str) -> str:
    """One argv word, quoted; the job's head (ray_gate.JOB_HEAD) becomes the job's first node."""
    quoted = shlex.quote(word)
    if JOB_HEAD not in word:
        return quoted
    if quoted == word:  # plain characters: expand in place
        return word.replace(JOB_HEAD, "${ops_head}")
    return "'" + quoted[1:-1].replace(JOB_HEAD, "'\"${ops_head}\"'") + "'"


def parse_hosts(line: str) -> list[str] | None:
    """`ops-job: hosts n1 n2` -> ["n1", "n2"] (the nodes of a job of several, in slurm's order)."""
    return line[len(HOSTS_PREFIX):].split() if line.startswith(HOSTS_PREFIX) else None


def _assignments(replica: Replica) -> list[str]:
    """Its environment as quoted VAR=VALUE words; CUDA_VISIBLE_DEVICES comes from the job's devices."""
    return [shlex.quote(f"{key}={value}") for key, value in replica.env.items() if key != "CUDA_VISIBLE_DEVICES"]


def parse_exit(line: str) -> tuple[str, int] | None:
    """`ops-job: exited answer/2 status=1` -> ("answer/2", 1)."""
    if not line.startswith(EXIT_PREFIX):
        return None
    name, _, status = line[len(EXIT_PREFIX):].rpartition(" status=")
    try:
        return name, int(status)
    except ValueError:
        return None
