"""The Ray gate: `vllm serve --distributed-executor-backend ray` starts only once every Ray node has joined.

vLLM asks Ray for a placement group of TP × PP bundles; started before the workers have joined, it waits
for resources that are on their way, or fails. So the server's command is

    sh -c GATE ops-ray-gate RAY NODES ADDRESS TIMEOUT -- vllm serve MODEL …

GATE finds the Python of the `ray` command (its shebang, as the vLLM argv check finds vLLM's), runs COUNT
there, which connects to the cluster at ADDRESS and counts the nodes that are alive until there are NODES
of them (each count it sees is one line in the server's log: `ops-ray-gate: 1 of 2 Ray nodes joined`), and
then `exec`s the server: the process ops started becomes `vllm serve`, same pid. Past TIMEOUT it exits 3
with the count it saw, so readiness fails with that line instead of waiting forever.
"""

from __future__ import annotations

GATE_NAME = "ops-ray-gate"
JOB_HEAD = "@OPS_JOB_HEAD@"  # in an argv word: the first node of the slurm job it runs in (backends/sbatch.py)

COUNT = r'''
import sys, time
address, want, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
import ray
deadline = time.monotonic() + timeout
seen = -1
while True:
    try:
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
        alive = sum(1 for node in ray.nodes() if node.get("Alive"))
    except Exception as exc:
        alive = 0
        if seen != 0:
            print("ops-ray-gate: the Ray head at %s does not answer yet (%s)" % (address, type(exc).__name__),
                  flush=True)
        try:
            ray.shutdown()
        except Exception:
            pass
    if alive != seen:
        print("ops-ray-gate: %d of %d Ray nodes joined" % (alive, want), flush=True)
        seen = alive
    if alive >= want:
        break
    if time.monotonic() > deadline:
        print("ops-ray-gate: only %d of %d Ray nodes joined within %.0f s" % (alive, want, timeout), flush=True)
        sys.exit(3)
    time.sleep(0.5)
ray.shutdown()
'''

# sh -c GATE ops-ray-gate RAY NODES ADDRESS TIMEOUT -- ARGV…  (@COUNT@ is replaced by COUNT)
GATE = r"""ray_cmd=$1; nodes=$2; address=$3; timeout=$4
shift 4; [ "$1" = "--" ] && shift
exe=$(command -v "$ray_cmd") || { echo "ops-ray-gate: command not found: $ray_cmd" >&2; exit 127; }
py=$(sed -n '1s/^#![[:space:]]*//p' "$exe")
case "$py" in
  */sh|*/bash|"") py=$(sed -n "2s/^'''exec' \(.*\) \"\$0\".*/\1/p" "$exe") ;;
esac
[ -n "$py" ] || { echo "ops-ray-gate: $exe is not a python console script" >&2; exit 126; }
$py -c '@COUNT@' "$address" "$nodes" "$timeout" || exit $?
echo "ops-ray-gate: starting $1"
exec "$@"
"""


def gate_argv(ray: str, nodes: int, address: str, timeout_s: float) -> list[str]:
    """The words in front of the server's command (ProcessSpec.gate counts them)."""
    script = GATE.replace("@COUNT@", COUNT.strip("\n").replace("'", "'\\''"))
    return ["sh", "-c", script, GATE_NAME, ray, str(nodes), address, f"{timeout_s:g}", "--"]
