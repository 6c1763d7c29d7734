"""`python -m bench [NAME …]`: run every bench/bench_*.py (or the named ones) and print their tables."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in argv] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; have: {', '.join(names)}", file=sys.stderr)
        return 2
    failed = 0
    for name in wanted:
        print(f"\n=== {name} ===", flush=True)
        start = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        code = module.main()
        print(f"({name}: {time.perf_counter() - start:.1f} s)", flush=True)
        failed += 1 if code else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
