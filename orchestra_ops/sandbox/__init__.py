"""The sandbox: model-written code runs here and nowhere else (never in our process, never with our env).

    Sandbox(policy).run(code) -> ExecResult   one program in its own empty temp dir, a bounded number at once
    SandboxPolicy                             the limits (wall time, CPU, memory, file size, output, processes)
                                              and `unsafe` (run without bubblewrap where it cannot isolate)
    detect_isolation()                        what this machine offers (probed once): bubblewrap's whole
                                              isolation (policy.py) or nothing beyond the limits
    require_isolation(policy)                 SandboxUnavailable (exit 2) when it is nothing and not `unsafe`

Under bubblewrap, as root too, a program runs in its own user namespace as uid/gid 65534 with no
capability (no mount, umount, setns, or new user namespace where bubblewrap can forbid it), in
its own PID namespace with its own /proc (the parent's processes and their environ are not there),
its own network namespace (only its own loopback), IPC, UTS and cgroup namespaces, in a new session,
and sees only /usr, /lib*, /bin, /sbin, the loader's files of /etc and its interpreter's own
directories, all read-only (sandbox/layout.py), plus its private size-bounded tmpfs /tmp.

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
