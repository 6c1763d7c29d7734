"""The stand-in `vllm` of the Ray tests: real Ray beside it, vLLM's own parser on its argv, the sim serving.

The CPU build of vLLM cannot run the Ray executor (vllm/v1/executor/ray_utils.py: "current platform cpu does
not support ray."), so `vllm serve … --distributed-executor-backend ray` is this script: its shebang is the
engine's Python (`.venv-ray`: ray 2.60 over .venv-vllm's packages, `make setup-ray`), so the argv check `ops
up` runs before launching parses its argv with real vLLM; run, it starts the sim on the same host and port.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import REPO

RAY_VENV = REPO / ".venv-ray"
VLLM_VENV = REPO / ".venv-vllm"

STANDIN = """#!{python}
# `vllm` for this test: vLLM's own parser checks its argv (the check runs under this shebang's Python);
# serving is the sim's (the CPU build of vLLM cannot run the Ray executor).
import os, sys
args = sys.argv[1:]
def value(flag):
    return args[args.index(flag) + 1]
assert args[0] == "serve", args
name = value("--served-model-name") if "--served-model-name" in args else args[1]
print("vllm stand-in:", " ".join(args), flush=True)
os.execv({ops!r}, [{ops!r}, "-m", "orchestra_ops", "serve", "sim", "--host", value("--host"),
                   "--port", value("--port"), "--model", name, "--latency-ms", "1"])
"""


def standin(tmp: Path, *, ray: bool = True) -> Path:
    """tmp/bin/vllm (the stand-in) and tmp/bin/ray (the real one): ops finds `ray` beside `vllm`. Without
    `ray`, the stand-in's Python is .venv-vllm's (vLLM's parser, no Ray needed)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    python = RAY_VENV / "bin" / "python" if ray else VLLM_VENV / "bin" / "python"
    vllm.write_text(STANDIN.format(python=python, ops=sys.executable))
    vllm.chmod(0o755)
    if ray:
        (bin_dir / "ray").symlink_to(RAY_VENV / "bin" / "ray")
    return vllm
