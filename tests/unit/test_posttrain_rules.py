"""The gate's rule and its input parsing, at their edges."""

from __future__ import annotations

from pathlib import Path

import pytest
from orchestra_ops.evals.opencompass.multi import parse_dataset_dirs, parse_datasets, read_summary_rows

from orchestra_ops.errors import ConfigError
from orchestra_ops.posttrain.decision import samples_to_decide, verdict
from orchestra_ops.posttrain.options import parse_adapter


@pytest.mark.parametrize(("ci95", "max_drop", "expected"), [
    ([-9.0, -1.5], 1.0, "block"),         # the whole interval below -1
    ([-9.0, -1.0], 1.0, "inconclusive"),  # touching -max_drop is not beyond it
    ([-9.0, 0.5], 1.0, "inconclusive"),   # could be no drop at all, or a large one: more samples decide
    ([-0.5, 4.0], 1.0, "pass"),           # the whole interval above -1
    ([-1.0, 4.0], 1.0, "inconclusive"),
    ([-9.0, -1.5], 10.0, "pass"),         # a looser gate
    ([1.0, 5.0], 0.0, "pass"),
    ([-0.9, -0.1], 0.0, "block"),         # max_drop 0: any certain drop blocks
    ([0.0, 0.0], 0.0, "inconclusive"),    # no difference at all is not above -0
    (None, 1.0, "inconclusive"),          # no interval (n < 2): nothing is decided
])
def test_verdict(ci95: list[float] | None, max_drop: float, expected: str) -> None:
    assert verdict(ci95, max_drop) == expected


def test_samples_to_decide_scales_the_facing_side_of_the_interval() -> None:
    # d = -12.5 over 8 pairs, interval [-37.5, 0]: leaning towards block; its upper side (12.5 wide) must
    # clear -1, 11.5 points away: 8 * (12.5 / 11.5)^2 = 9.45 -> 10 pairs
    estimate = samples_to_decide(-12.5, [-37.5, 0.0], 8, 1.0)
    assert estimate["samples"] == 10 and "1/sqrt(n)" in estimate["how"]
    # d = +2 over 40 pairs, interval [-10, 14] with max_drop 1: leaning towards pass; its lower side (12 wide)
    # must clear -1, 3 points away: 40 * (12 / 3)^2 = 640 -> 641
    assert samples_to_decide(2.0, [-10.0, 14.0], 40, 1.0)["samples"] == 641
    on_the_line = samples_to_decide(-1.0, [-5.0, 3.0], 40, 1.0)
    assert on_the_line["samples"] is None and "on -max_drop itself" in on_the_line["how"]
    one = samples_to_decide(-100.0, None, 1, 1.0)
    assert one["samples"] is None and one["how"].startswith("1 paired sample(s): no interval under 2")


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
