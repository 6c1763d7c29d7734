"""Which tests must share an xdist worker (`make test` runs `-n N --dist loadgroup`); tests/conftest.py
imports the hook below.

A test without a group goes to any free worker on its own; a group runs whole on one worker, in
collection order, so what it shares is started once and nothing in it runs beside another of its kind:

    vllm         a real vLLM replica (~45 s of 2 cores each): never two side by side
    slurm        the dev cluster (slurmctld, slurmd, sshd; tests/devcluster.py): one cluster at a time
    destructive  tests that change the machine (useradd, tmpfs mounts), marked `destructive`
    <file>       the tests of one module that share a module-scoped fixture (a fleet started once)

xdist puts the group into the node id (`path::test@group`) and its scheduler reads it back. pytest 9.2
keeps node ids structured and ignores the attribute xdist 3.8 writes (pytest-dev/pytest-xdist#1386),
so every test would go anywhere alone: after xdist's hook this one writes the id where pytest 9.2 reads
it, when xdist's did not take.
"""

from __future__ import annotations

from collections.abc import Generator

import pytest

SHARED_SCOPES = ("module", "package", "session")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The xdist group a test runs in (None: any worker, alone)."""
    names = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("vllm") or "real_vllm" in names:
        return "vllm"
    if item.get_closest_marker("slurm") or item.get_closest_marker("sshd") or "cluster" in names:
        return "slurm"
    if item.get_closest_marker("destructive"):
        return "destructive"
    fixture_info = getattr(item, "_fixtureinfo", None)
    definitions = fixture_info.name2fixturedefs if fixture_info is not None else {}
    # a fixture of ours (a plugin's, like tmp_path_factory, has no baseid) that lives longer than one test
    if any(defs and defs[-1].scope in SHARED_SCOPES and defs[-1].baseid for defs in definitions.values()):
        return item.nodeid.split("::", 1)[0]
    return None


def _group_names(item: pytest.Item) -> list[str]:
    """The names of an item's xdist_group marks, as xdist joins them."""
    names = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
             for mark in item.iter_markers("xdist_group")}
    return sorted(names)


def _suffix_node_id(item: pytest.Item) -> None:
    """`path::test@group`, as xdist's worker means to make it (see the module docstring)."""
    names = _group_names(item)
    suffix = f"@{'_'.join(names)}"
    if not names or item.nodeid.endswith(suffix):
        return
    structured = getattr(item, "_id", None)
    if structured is not None and hasattr(type(structured), "parse"):
        item._id = type(structured).parse(f"{item.nodeid}{suffix}")


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
    # before every other plugin: the marks must be there when `-m "not vllm"` and xdist read them
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = xdist_group_of(item)
        if group == "vllm" and not item.get_closest_marker("vllm"):
            item.add_marker(pytest.mark.vllm)  # so `-m "not vllm"` leaves it out too
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    yield
    if getattr(config.option, "loadgroup", False):  # an xdist worker under --dist loadgroup
        for item in items:
            _suffix_node_id(item)
