"""Where the suites keep their bundled files: each suite's package has `templates/` and `data/` beside its code.

`packaged("agent/templates/x.txt")` is that file's path in the installed package (package-data globs in
pyproject.toml ship them). Suites resolve their own files here; the runner knows no suite's files.
"""

from __future__ import annotations

from pathlib import Path

EVALS_DIR = Path(__file__).resolve().parent


def packaged(relative: str) -> str:
    """A path under the installed evals package (`SUITE/templates/…`, `SUITE/data/…`)."""
    return str(EVALS_DIR / relative)
