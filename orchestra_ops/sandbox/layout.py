"""What of this machine's filesystem a sandboxed program sees: only what its interpreter needs, read-only.

    system_binds()          /usr, /bin, /sbin, /lib, /lib32, /lib64, /libx32 (bound read-only where they
                            are directories, recreated as the same symlinks where they are symlinks, left
                            out where absent) and a minimal /etc: the dynamic loader's files and localtime
    interpreter_roots(py)   the interpreter's own directories outside /usr: its virtual environment (the
                            directory holding pyvenv.cfg), the installation that environment was made from
                            (pyvenv.cfg's `home`) and the installation its executable resolves to

Nothing else: not `/`, not $HOME or /root (a pyenv interpreter under /root/.pyenv/versions/X binds
that prefix only; /root then shows nothing but the path to it), not the dataset, the run dir, `.ops/`
or the repository (a venv inside a clone binds the venv, not the clone). A root too broad to bind
(`/`, /root, /home, /tmp, the user's home) is refused: pick another `--exec-python`.
Both are worked out once per process (per interpreter) and cached: every program asks.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from orchestra_ops.errors import ConfigError

SYSTEM_DIRS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime")  # what the loader and time zones read


@functools.lru_cache(maxsize=1)
def system_binds() -> tuple[str, ...]:
    """bubblewrap arguments for the system directories and the minimal /etc."""
    args: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    args += ["--dir", "/etc"]
    for name in ETC_FILES:
        path = Path("/etc") / name
        if path.exists():
            args += ["--ro-bind", str(path), str(path)]
    return tuple(args)


def _too_broad() -> set[Path]:
    broad = {Path("/"), Path("/root"), Path("/home"), Path("/tmp"), Path("/etc"), Path("/proc"), Path("/dev")}
    for home in (os.environ.get("HOME"), os.path.expanduser("~")):
        if home:
            broad.add(Path(home))
            broad.add(Path(home).resolve())
    return broad


@functools.lru_cache(maxsize=16)
def interpreter_roots(python: str) -> tuple[str, ...]:
    """The directories of `python` to bind read-only (outermost only, none under /usr), in order.

    Raises ConfigError when one of them would expose too much (see the module docstring).
    """
    exe = Path(os.path.abspath(python))
    wanted = {exe.parent, exe.resolve().parent.parent}
    venv = exe.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        wanted.add(venv)
        home = _pyvenv_home(venv / "pyvenv.cfg")
        if home is not None:
            wanted.add(home.resolve().parent)
    usr = Path("/usr")
    roots = sorted(d for d in wanted if d != usr and not d.is_relative_to(usr))
    outermost = [d for d in roots if not any(d != other and d.is_relative_to(other) for other in roots)]
    broad = _too_broad()
    for directory in outermost:
        if directory in broad:
            raise ConfigError(f"the sandbox's interpreter {python} would need {directory} bound into the sandbox, "
                              "which exposes too much; use an interpreter in a virtual environment or its own "
                              "installation directory (--exec-python)")
    return tuple(str(d) for d in outermost)


def _pyvenv_home(cfg: Path) -> Path | None:
    """pyvenv.cfg's `home` (the directory of the base interpreter), or None."""
    for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return Path(value.strip())
    return None


def interpreter_binds(python: str) -> list[str]:
    """bubblewrap arguments binding `python`'s roots read-only."""
    return [arg for root in interpreter_roots(python) for arg in ("--ro-bind", root, root)]
