"""The new commands keep `ops` light: their --help imports no matplotlib or numpy (the analysis extra)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import REPO


def test_analysis_commands_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "import orchestra_ops.cli as c\n"
        "for args in (['analyze', '--help'], ['compare', '--help'], ['eval', 'chat', '--help'],\n"
        "             ['health', '--help']):\n"
        "    r = CliRunner().invoke(c.main, args)\n"
        "    assert r.exit_code == 0, (args, r.output)\n"
        "heavy = [m for m in ('matplotlib', 'numpy', 'torch', 'faiss', 'fastapi') if m in sys.modules]\n"
        "print(','.join(heavy) or 'light')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "light"


def test_help_lists_the_new_commands() -> None:
    from click.testing import CliRunner

    import orchestra_ops.cli as cli

    text = CliRunner().invoke(cli.main, ["--help"]).output
    assert "analyze" in text and "compare" in text
    compare = CliRunner().invoke(cli.main, ["compare", "--help"]).output
    assert "--require-equivalent" in compare
