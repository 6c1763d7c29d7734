#!/usr/bin/env bash
# import-linter on the layout that gets installed: evals/ and services/ are folders at the top of the repository
# but install as orchestra_ops.evals and orchestra_ops.services (pyproject.toml's package-dir), and an editable
# install hides them from the import graph. So the package is staged as installed (a copy, in a temp dir) and
# lint-imports reads that copy with the contracts of pyproject.toml.
#   scripts/lint-imports.sh [REPO]   (default: this repository)
set -euo pipefail
repo=$(cd "${1:-$(dirname "$0")/..}" && pwd)
python=${PYTHON:-$repo/.venv/bin/python}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -r "$repo/orchestra_ops" "$stage/orchestra_ops"
cp -r "$repo/evals" "$stage/orchestra_ops/evals"
cp -r "$repo/services" "$stage/orchestra_ops/services"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
cd "$stage"
PYTHONPATH="$stage" "$python" -c "import orchestra_ops.evals, sys; sys.exit(0 if orchestra_ops.evals.__file__.startswith('$stage') else 'the staged copy is not the one imported')"
PYTHONPATH="$stage" "$python" -c "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())" "$repo/pyproject.toml" --no-cache
