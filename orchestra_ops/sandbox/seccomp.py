"""A seccomp filter that lets a program run but not create processes (threads are fine).

Hand-assembled classic BPF (no libseccomp needed), for x86_64 and aarch64:

    arch other than ours         -> EPERM for everything (no syscall through a foreign ABI)
    x32 syscalls (nr >= 2**30)   -> EPERM
    fork, vfork                  -> EAGAIN
    clone3                       -> ENOSYS (glibc then falls back to clone, which is checked)
    clone without CLONE_THREAD   -> EAGAIN (a process); with CLONE_THREAD it is a thread: allowed
    anything else                -> allowed

EAGAIN is what a fork past RLIMIT_NPROC gets, so programs see the familiar "Resource temporarily
unavailable". The launcher installs it with prctl(PR_SET_SECCOMP) after PR_SET_NO_NEW_PRIVS.
"""

from __future__ import annotations

import platform
import struct

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_JSET_K = 0x45
BPF_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
EPERM, EAGAIN, ENOSYS = 1, 11, 38
CLONE_THREAD = 0x00010000
X32_BIT = 0x40000000

# machine -> (AUDIT_ARCH_*, fork, vfork, clone, clone3); -1: no such syscall on that architecture
ARCHES: dict[str, tuple[int, int, int, int, int]] = {
    "x86_64": (0xC000003E, 57, 58, 56, 435),
    "aarch64": (0xC00000B7, -1, -1, 220, 435),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def no_fork_filter(machine: str | None = None) -> bytes | None:
    """The filter program (struct sock_filter[]) for `machine` (default: this one), or None."""
    spec = ARCHES.get(machine or platform.machine())
    if spec is None:
        return None
    audit_arch, fork, vfork, clone, clone3 = spec
    denied = [n for n in (fork, vfork) if n >= 0]
    head = [
        _insn(BPF_LD_W_ABS, 0, 0, 4),  # A = arch
        _insn(BPF_JEQ_K, 1, 0, audit_arch),  # ours: skip the next
        _insn(BPF_RET_K, 0, 0, RET_ERRNO | EPERM),
        _insn(BPF_LD_W_ABS, 0, 0, 0),  # A = syscall number
    ]
    checks = 1 + len(denied) + 2  # x32, each denied number, clone3, clone
    allow = len(head) + checks  # the tail starts here: allow, eagain, enosys, clone flags check
    eagain, enosys, flags = allow + 1, allow + 2, allow + 3
    prog = list(head)

    def branch(true_target: int, false_target: int | None = None) -> tuple[int, int]:
        here = len(prog)
        return true_target - here - 1, 0 if false_target is None else false_target - here - 1

    prog.append(_insn(BPF_JGE_K, *branch(eagain), X32_BIT))
    for number in denied:
        prog.append(_insn(BPF_JEQ_K, *branch(eagain), number))
    prog.append(_insn(BPF_JEQ_K, *branch(enosys), clone3))
    prog.append(_insn(BPF_JEQ_K, *branch(flags, allow), clone))
    prog += [
        _insn(BPF_RET_K, 0, 0, RET_ALLOW),
        _insn(BPF_RET_K, 0, 0, RET_ERRNO | EAGAIN),
        _insn(BPF_RET_K, 0, 0, RET_ERRNO | ENOSYS),
        _insn(BPF_LD_W_ABS, 0, 0, 16),  # A = low word of args[0] (the clone flags)
        _insn(BPF_JSET_K, 0, 1, CLONE_THREAD),  # a thread: allow; a process: EAGAIN
        _insn(BPF_RET_K, 0, 0, RET_ALLOW),
        _insn(BPF_RET_K, 0, 0, RET_ERRNO | EAGAIN),
    ]
    return b"".join(prog)
