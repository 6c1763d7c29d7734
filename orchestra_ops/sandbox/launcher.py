"""What runs first inside the sandbox, as `python -I -c SOURCE LIMITS FILTER SOURCE_FROM` (never imported).

With SOURCE_FROM `stdin` it first reads the program from stdin into `main.py` (then stdin is
/dev/null). It lowers its own rlimits (`LIMITS` is `NAME=SOFT:HARD,…`), installs the no-fork seccomp filter
when it is given (hex; under bubblewrap the filter is installed by bubblewrap itself and this is
empty) and runs `main.py` of its working directory as `__main__`. If the filter cannot be installed
it exits 126 without running the program: a program never runs with less isolation than reported.
It imports as little as it can: every program pays for its imports.
"""

LAUNCHER = r'''
import os, resource, sys
if sys.argv[3] == "stdin":
    with open("main.py", "wb") as target:
        target.write(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
for item in sys.argv[1].split(","):
    name, _, values = item.partition("=")
    soft, _, hard = values.partition(":")
    resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
if sys.argv[2]:
    import ctypes
    program = bytes.fromhex(sys.argv[2])
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
    del ctypes, program, Fprog, libc, fprog, pointer
sys.argv = ["main.py"]
sys.path.insert(0, os.getcwd())
with open("main.py", "rb") as source:
    code = compile(source.read(), "main.py", "exec")
del item, name, values, soft, hard, source
exec(code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
'''
