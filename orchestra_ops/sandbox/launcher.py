"""What runs first inside the sandbox, as `python -I -c SOURCE LIMITS FILTER` (never imported by ops).

It lowers its own rlimits, installs the no-fork seccomp filter (sandbox/seccomp.py) and then runs
`main.py` of its working directory as `__main__`. If the filter cannot be installed it exits 126
without running the program: a program never runs with less isolation than was reported.
"""

LAUNCHER = r'''
import ctypes, json, os, resource, runpy, sys
limits = json.loads(sys.argv[1])
for name, value in limits.items():
    which = getattr(resource, name)
    resource.setrlimit(which, (value[0], value[1]))
program = bytes.fromhex(sys.argv[2])
if program:
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    fprog = Fprog(len(program) // 8, program)
    pointer = ctypes.cast(ctypes.pointer(fprog), ctypes.c_void_p)
    # PR_SET_NO_NEW_PRIVS = 38, then PR_SET_SECCOMP = 22 with SECCOMP_MODE_FILTER = 2
    if libc.prctl(38, 1, None, 0, 0) != 0 or libc.prctl(22, 2, pointer, 0, 0) != 0:
        sys.stderr.write("sandbox: cannot install the seccomp filter (errno %d); not running the program\n"
                         % ctypes.get_errno())
        sys.exit(126)
del ctypes, json, limits, program
sys.argv = ["main.py"]
sys.path.insert(0, os.getcwd())
runpy.run_path("main.py", run_name="__main__")
'''
