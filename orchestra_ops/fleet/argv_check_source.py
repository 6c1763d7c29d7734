"""The program the vLLM argv check (argv_check.py) runs under a node's vLLM interpreter; never imported there.

CHECK_SOURCE imports vLLM once (the 10-15 CPU-seconds of a check), replaces `vllm serve`'s action with vLLM's
own pre-launch validation (the engine args, the API server's tool/reasoning parser check), then, for each
command it is given, builds vLLM's CLI parser exactly as `vllm` does and parses it; nothing is loaded.
Its argv is one of:

    serve MODEL FLAGS…            one command (what a slurm job's check runs, backends/sbatch.py); answers
                                  `OPS_VLLM_CHECK {"ok": …, "version": …, "error": …}`
    --ops-batch                   the commands are in $OPS_VLLM_CHECK_BATCH, a JSON list of {"args": ["serve",
                                  MODEL, FLAGS…], "env": {VAR: VALUE}} (in the environment, not in argv: an
                                  env value may be a token, and argv is world-readable in ps); each command is
                                  parsed with its env set in os.environ (restored afterwards) and answered by
                                  one line as above with its "index" in the list, in order

The error is vLLM's own message (argparse's last line, or the exception). A crash (a signal, os._exit) ends
the process: the commands not yet answered are the caller's to report (argv_check.parse_batch).

LOCATE is the shell line that finds a `vllm` console script on PATH and runs CHECK_SOURCE under the python
its shebang names.
"""

from __future__ import annotations

MARKER = "OPS_VLLM_CHECK "
BATCH_FLAG = "--ops-batch"
BATCH_ENV = "OPS_VLLM_CHECK_BATCH"

CHECK_SOURCE = r'''
import contextlib, io, json, os, sys
def report(ok, version, error, index):
    answer = {"ok": ok, "version": version, "error": error}
    if index is not None:
        answer["index"] = index
    sys.stdout.write("OPS_VLLM_CHECK " + json.dumps(answer) + "\n")
    sys.stdout.flush()
if sys.argv[1:2] == ["--ops-batch"]:
    batch = json.loads(os.environ.pop("OPS_VLLM_CHECK_BATCH"))
    items = [(index, item["args"], item.get("env") or {}) for index, item in enumerate(batch)]
else:
    items = [(None, sys.argv[1:], {})]
try:
    import importlib.metadata as metadata
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = None
    import vllm.entrypoints.cli.main as cli_main
    import vllm.entrypoints.cli.serve as serve_cli
except Exception as exc:
    for index, _, _ in items:
        report(False, None, "cannot import vllm: %s: %s" % (type(exc).__name__, exc), index)
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
def check(args, env):
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    del reached[:]
    sys.argv = ["vllm", *args]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            cli_main.main()
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        return False, lines[-1] if lines else "exit %s" % exc.code
    except BaseException as exc:
        return False, "%s: %s" % (type(exc).__name__, exc)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return bool(reached), None if reached else "vllm did not reach `serve`"
status = 0
for index, args, env in items:
    ok, error = check(args, env)
    report(ok, version, error, index)
    status = status if ok else 2
sys.exit(status)
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
