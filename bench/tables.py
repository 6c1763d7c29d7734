"""The one table printer of the benchmarks: a title, then left-aligned columns as wide as their widest cell."""

from __future__ import annotations

from collections.abc import Sequence


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
    print(f"\n{title}")
    print("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
