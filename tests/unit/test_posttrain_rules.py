"""The gate's rule and its input parsing, at their edges."""

from __future__ import annotations

from pathlib import Path

import pytest
from orchestra_ops.evals.opencompass.multi import parse_dataset_dirs, parse_datasets, read_summary_rows

from orchestra_ops.errors import ConfigError
from orchestra_ops.posttrain import parse_adapter, verdict


@pytest.mark.parametrize(("difference", "ci95", "max_drop", "expected"), [
    (-5.0, [-9.0, -1.5], 1.0, "block"),   # the whole interval below -1
    (-5.0, [-9.0, -1.0], 1.0, "pass"),    # touching -max_drop is not beyond it
    (-5.0, [-9.0, 0.5], 1.0, "pass"),     # could be no drop at all
    (-5.0, [-9.0, -1.5], 2.0, "pass"),    # a looser gate
    (3.0, [1.0, 5.0], 0.0, "pass"),
    (-0.5, [-0.9, -0.1], 0.0, "block"),   # max_drop 0: any certain drop blocks
    (-2.0, None, 1.0, "block"),           # no interval (n < 2): the point difference decides
    (-1.0, None, 1.0, "pass"),
])
def test_verdict(difference: float, ci95: list[float] | None, max_drop: float, expected: str) -> None:
    assert verdict(difference, ci95, max_drop) == expected


def test_datasets_and_dirs_parse_or_name_the_problem() -> None:
    assert parse_datasets(" gsm8k , mmlu ") == ["gsm8k", "mmlu"]
    assert parse_datasets(["mmlu"]) == ["mmlu"]
    with pytest.raises(ConfigError, match="'gsm8k' is given twice"):
        parse_datasets("gsm8k,gsm8k")
    with pytest.raises(ConfigError, match="--datasets is empty"):
        parse_datasets(" , ")
    with pytest.raises(ConfigError, match="unknown dataset 'chat'"):
        parse_datasets("chat")  # registered, but not OpenCompass-scored
    assert parse_dataset_dirs(["mmlu=/data/mmlu", "gsm8k = d/g"]) == {"mmlu": "/data/mmlu", "gsm8k": "d/g"}
    with pytest.raises(ConfigError, match="expected NAME=PATH"):
        parse_dataset_dirs(["mmlu"])


def test_adapter_spec(tmp_path: Path) -> None:
    (tmp_path / "ft").mkdir()
    assert parse_adapter(f"ft={tmp_path / 'ft'}") == ("ft", tmp_path / "ft")
    with pytest.raises(ConfigError, match="expected NAME=DIR"):
        parse_adapter("=x")
    with pytest.raises(ConfigError, match="no such directory"):
        parse_adapter(f"ft={tmp_path / 'absent'}")


def test_summary_rows_read_back(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    path.write_text("dataset,version,metric,mode,base,ft\ngsm8k,1d7fe4,accuracy,gen,62.50,-\n")
    [row] = read_summary_rows(path)
    assert (row.dataset, row.version, row.metric, row.mode, dict(row.scores)) == \
        ("gsm8k", "1d7fe4", "accuracy", "gen", {"base": 62.5, "ft": None})
