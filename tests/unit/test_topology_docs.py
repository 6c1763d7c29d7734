"""docs/topology.md is generated from the schema and cannot drift: the file is what the script writes now,
every key of every part of the file has its meaning (a docstring in the schema), and --check fails on a stale
file."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_topology_docs", REPO / "scripts" / "gen_topology_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_what_the_schema_generates() -> None:
    gen = generator()
    assert (REPO / "docs" / "topology.md").read_text() == gen.render(), \
        "docs/topology.md is out of date: run .venv/bin/python scripts/gen_topology_docs.py"


def test_every_key_has_its_meaning_and_an_example() -> None:
    gen = generator()
    text = gen.render()
    for _, model, path in gen.SECTIONS:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring in the schema"
            row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |")
                       and " ".join(field.description.split()) in line)
            assert not row.rstrip().endswith("|  |"), f"{path}.{name} has no example"


def test_check_fails_on_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    stale = tmp_path / "topology.md"
    stale.write_text(gen.render().replace("Data-parallel replicas", "Replicas"))
    monkeypatch.setattr(gen, "OUT", stale)
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    assert stale.read_text() == gen.render()
