"""The README's commands and every example in `ops --help` (and `ops lora --help`, `ops posttrain --help`) run
as written, in order, as a newcomer runs them from a checkout: the real `ops` on PATH, the bundled
topologies/local.yaml (simulated engines and a CPU retrieval index, only its ports moved to free ones so
parallel test runs do not collide), a PEFT-shaped adapter in ./output. Blocks the README marks as not run
(they install packages, outlive the command or need a GPU cluster) are checked in tests/unit/test_readme.py.

Slow: the first `ops up` builds the retrieval index (the encoder on 2 busy cores), then each `ops up` loads it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters import make_adapter
from tests.helpers import REPO, free_port_block, kill_tree, still_ours
from tests.readme_blocks import blocks

pytestmark = [pytest.mark.retrieval, pytest.mark.timeout(3600)]
OPS_BIN = Path(sys.executable).parent / "ops"
PORTS = {18100: 2, 18110: 2, 18120: 1, 18765: 1}  # the bundled local.yaml's ports and how many each block needs


class Checkout:
    """A working dir laid out like the repository root for what the commands read (topologies/local.yaml, the
    bundled corpus under evals/), with ./output holding an adapter; OPS_HOME shared by every checkout."""

    def __init__(self, root: Path, home: Path, ports: dict[int, int]) -> None:
        self.root = root
        root.mkdir(parents=True)
        (root / "evals").symlink_to(REPO / "evals")
        topology = (REPO / "topologies" / "local.yaml").read_text()
        for old, new in ports.items():
            topology = topology.replace(f"port: {old}", f"port: {new}")
        (root / "topologies").mkdir()
        (root / "topologies" / "local.yaml").write_text(topology)
        make_adapter(root / "output")
        self.env = {**os.environ, "OPS_HOME": str(home), "COLUMNS": "100",
                    "PATH": f"{OPS_BIN.parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(self, command: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        """Run `command` as written; it exits `expect` (what the text around it says it exits)."""
        result = subprocess.run(["bash", "-c", command], cwd=self.root, env=self.env, capture_output=True, text=True,
                                timeout=900, check=False)
        assert result.returncode == expect, f"`{command}` exited {result.returncode}:\n{result.stdout[-3000:]}\n" \
                                            f"{result.stderr[-3000:]}"
        return result


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[int, int]]]:
    if not OPS_BIN.exists():
        pytest.skip(f"no `ops` console script beside {sys.executable}")
    root = tmp_path_factory.mktemp("newcomer")
    ports = {old: free_port_block(count) for old, count in PORTS.items()}
    yield root, ports
    state = root / "ops-home" / "local" / "state.json"
    if state.exists():  # a failed test left the fleet up: down, then by pid whatever is left
        subprocess.run([sys.executable, "-m", "orchestra_ops", "down", "local", "--timeout", "5"],
                       env={**os.environ, "OPS_HOME": str(root / "ops-home")}, capture_output=True, timeout=120,
                       check=False)
        for record in json.loads(state.read_text()).get("processes", []):
            if still_ours(record):
                kill_tree(record["pid"])


def test_the_readme_runs_as_written(home: tuple[Path, dict[int, int]]) -> None:
    root, ports = home
    checkout = Checkout(root / "readme", root / "ops-home", ports)
    runnable = [b for b in blocks() if b.language == "sh" and not b.not_run]
    commands = [c for b in runnable for c in b.commands() if not c.startswith(("make ", "pip ", "python3 -m venv"))]
    codes = {command: code for b in runnable for command, code in b.exit_codes().items()}
    assert commands[0] == "ops up topologies/local.yaml" and commands[-1] == "ops down"
    assert "ops eval chat --model answer --dataset questions.jsonl" in commands
    assert list(codes.values()) == [6]  # posttrain on the bundled sets: inconclusive, as the README says
    out = {command: checkout.run(command, codes.get(command, 0)) for command in commands}

    chat = out["ops eval chat --model answer --dataset questions.jsonl"].stdout.splitlines()
    assert chat[:3] == ["ops eval chat on local: 3 samples, 3 to run (new run)", "models called: answer [2 replicas]",
                        "run dir runs/chat-local (every line also in eval.log; -v shows the routing, aliases, "
                        "budgets and sandbox)"]
    assert chat[-1].startswith("chat: 3/3 answered, not graded · 3/3 ok · ") and chat[-1].endswith(" · runs/chat-local")
    gsm8k = out["ops eval gsm8k --limit 20"].stdout.splitlines()[-1]
    assert re.fullmatch(r"gsm8k: accuracy: candidate \d+\.\d% ± \d+\.\d \(n=20\) · 20/20 ok · .* · runs/gsm8k-local",
                        gsm8k), gsm8k
    assert "temperature: 0.0 → 0.7" in out["ops compare runs/gsm8k-local runs/gsm8k-t07"].stdout
    assert "answer − " not in gsm8k  # one model: no difference, never a pooled number
    paired = out["ops eval gsm8k --model answer --model ft --limit 20 --run-dir runs/gsm8k-ft"].stdout.splitlines()[-1]
    assert paired.startswith("gsm8k: accuracy: answer ") and "; ft − answer " in paired, paired
    posttrain = json.loads((root / "readme" / "runs" / "posttrain-ft-local" / "posttrain.json").read_text())
    assert posttrain["verdict"] == "inconclusive" and set(posttrain["datasets"]) == {"gsm8k", "mmlu"}
    [gate] = [command for command, code in codes.items() if code == 6]
    assert "paired samples would decide it" in out[gate].stderr
    assert json.loads((root / "ops-home" / "local" / "state.json").read_text())["status"] == "down"


def test_every_help_example_runs_as_written(home: tuple[Path, dict[int, int]]) -> None:
    root, ports = home
    checkout = Checkout(root / "help", root / "ops-home", ports)
    main = examples(checkout, [])
    assert main[-1] == "ops down"
    lora, posttrain = examples(checkout, ["lora"]), examples(checkout, ["posttrain"])
    assert lora[0] == "ops lora load ft ./output --model answer" and posttrain[0].startswith("ops posttrain ")
    said = " ".join(checkout.run("ops posttrain --help").stdout.split())
    assert "On the bundled sets (40 samples each) this exits 6 (inconclusive)" in said
    for command in [*main[:-1], *lora]:  # the fleet the first ones bring up
        checkout.run(command)
    for gate in posttrain:
        checkout.run(gate, 6)  # as its help says
    checkout.run(main[-1])  # down last
    assert json.loads((root / "ops-home" / "local" / "state.json").read_text())["status"] == "down"


def examples(checkout: Checkout, command: list[str]) -> list[str]:
    """The example lines of `ops [COMMAND] --help`: `ops …` up to two spaces before its description, a line ending
    in a backslash joined with the next."""
    text = checkout.run(" ".join(["ops", *command, "--help"])).stdout
    found: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if pending:
            line, pending = f"{pending} {line}", ""
        if not line.startswith("ops "):
            continue
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        found.append(re.split(r"\s{2,}", line)[0])
    assert found, text
    return found
