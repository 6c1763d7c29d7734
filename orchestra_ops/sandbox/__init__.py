"""The sandbox: model-written code runs here and nowhere else (never in our process, never with our env).

    Sandbox(policy).run(code) -> ExecResult   one program in its own empty temp dir, a bounded number at once
    SandboxPolicy                             the limits (wall time, CPU, memory, file size, output, processes)
    detect_isolation()                        what this machine offers: bubblewrap (no network, own PID
                                              namespace, read-only root) or the limits alone

See sandbox/run.py for the order of work and sandbox/launcher.py for what runs inside.
"""

from orchestra_ops.sandbox.policy import (
    Isolation,
    SandboxPolicy,
    SandboxUnavailable,
    detect_isolation,
    require_isolation,
)
from orchestra_ops.sandbox.run import ExecResult, Sandbox

__all__ = ["ExecResult", "Isolation", "Sandbox", "SandboxPolicy", "SandboxUnavailable", "detect_isolation",
           "require_isolation"]
