"""Bad input: an empty dataset (or --limit 0) is exit 2 with a clear message for every suite, before
the run dir exists; a dataset that is not UTF-8 names its file and line."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import run_ops
from tests.integration.agent_fixtures import write_fleet
from tests.integration.eval_fixtures import dataset


def _routing(tmp_path: Path, suite: str) -> tuple[list[str], dict[str, str]]:
    """Flags and environment that route `suite` to servers nobody calls (bad input fails first)."""
    if suite in ("hle", "frames"):
        home = tmp_path / "ops"
        fakes = [SimpleNamespace(model=f"sim/{n}", port=port) for n, port in (("o", 9), ("e", 10), ("j", 11))]
        topology = write_fleet(home, {key: (fake, {}) for key, fake in zip(("orchestrator", "experts", "judge"),
                                                                           fakes, strict=True)},
                               {"orchestrator": "orchestrator", "search": "experts", "reasoner": "experts",
                                "answer": "experts", "judge": "judge"},
                               services={"retrieval": "127.0.0.1:12", "wiki_retrieval": "127.0.0.1:13"})  # type: ignore[dict-item]
        return ["--topology", str(topology)], {"OPS_HOME": str(home)}
    keys = ["candidate", "judge"] if suite == "healthbench" else ["m"]
    config = tmp_path / "mc.json"
    config.write_text(json.dumps({k: [{"ip_addr": "127.0.0.1", "port": 9}] for k in keys}))
    return ["--model-config", str(config), *(["--model", "m"] if suite in ("gsm8k", "mmlu", "chat") else [])], {}


def _empty_dataset(tmp_path: Path, suite: str) -> Path:
    if suite == "mmlu":
        (tmp_path / "mmlu" / "test").mkdir(parents=True)
        (tmp_path / "mmlu" / "test" / "anatomy_test.csv").write_text("")
        return tmp_path / "mmlu"
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    return path


@pytest.mark.parametrize("suite", ["chat", "hle", "frames", "healthbench", "gsm8k", "mmlu"])
def test_an_empty_dataset_and_limit_0_exit_2(tmp_path: Path, suite: str) -> None:
    flags, env = _routing(tmp_path, suite)
    data = _empty_dataset(tmp_path, suite)
    run_dir = tmp_path / "run"
    empty = run_ops(["eval", suite, "--no-analyze", *flags, "--dataset", str(data), "--run-dir", str(run_dir)], env=env)
    assert empty.returncode == 2, empty.stderr
    assert "Traceback" not in empty.stderr
    said = "no samples" if suite == "gsm8k" else ("nothing to evaluate: it has no samples; an empty run would write "
                                                  "a score of nothing")  # gsm8k's loader says it first
    assert empty.stderr == f"error: {data}: {said}\n"
    assert not run_dir.exists() and not (tmp_path / "runs").exists()
    # chat has no bundled dataset; the others limit their own
    bundled = ["--dataset", str(dataset(tmp_path / "d.jsonl", ["a", "b"]))] if suite == "chat" else []
    limited = run_ops(["eval", suite, "--no-analyze", *flags, *bundled, "--limit", "0", "--run-dir", str(run_dir)],
                      env=env)
    assert limited.returncode == 2, limited.stderr
    assert limited.stderr.endswith(": nothing to evaluate: --limit 0 selects none of them; an empty run would "
                                   "write a score of nothing\n"), limited.stderr
    assert not run_dir.exists()


def test_a_dataset_that_is_not_utf8_names_the_line(tmp_path: Path) -> None:
    flags, _ = _routing(tmp_path, "chat")
    data = dataset(tmp_path / "d.jsonl", ["a", "b", "c"])
    lines = data.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b"capital", b"capit\xe4l")  # latin-1, not UTF-8
    data.write_bytes(b"".join(lines))
    proc = run_ops(["eval", "chat", "--no-analyze", *flags, "--dataset", str(data), "--run-dir", str(tmp_path / "r")])
    assert proc.returncode == 2
    column = lines[1].index(b"\xe4") + 1
    assert proc.stderr == f"error: {data}:2: not UTF-8 (byte 0xe4 at column {column}); save the file as UTF-8\n"

    mmlu = tmp_path / "mm" / "test"
    mmlu.mkdir(parents=True)
    (mmlu / "anatomy_test.csv").write_bytes(b"q1,a,b,c,d,A\nq\xff2,a,b,c,d,B\n")
    proc = run_ops(["eval", "mmlu", "--no-analyze", *flags, "--dataset", str(tmp_path / "mm"),
                    "--run-dir", str(tmp_path / "r2")])
    assert proc.returncode == 2
    assert proc.stderr == (f"error: {mmlu / 'anatomy_test.csv'}:2: not UTF-8 (byte 0xff at column 2); "
                           "save the file as UTF-8\n")
