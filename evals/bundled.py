"""Where the suites keep their bundled files: `templates/` and `data/` beside the suites' code.

`packaged("templates/x.txt")` is that file's path in the installed package (package-data globs in
pyproject.toml ship them). Suites resolve their own files here; the runner knows no suite's files.
"""

from __future__ import annotations

from pathlib import Path

EVALS_DIR = Path(__file__).resolve().parent


def packaged(relative: str) -> str:
    """A path under the installed evals package (where suites keep templates/ and bundled data/)."""
    return str(EVALS_DIR / relative)
