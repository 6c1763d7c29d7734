"""Packaging: every package is listed, and no generic top-level module lands in site-packages."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO

ROOTS = {"orchestra_ops": "orchestra_ops", "evals": "orchestra_ops.evals", "services": "orchestra_ops.services"}


def test_every_package_dir_is_listed() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    on_disk = set()
    for folder, dotted in ROOTS.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            on_disk.add(".".join([dotted, *rel.parts]))
    assert on_disk == listed
    assert config["package-dir"] == {"orchestra_ops": "orchestra_ops", "orchestra_ops.evals": "evals",
                                     "orchestra_ops.services": "services"}
    assert not any(name.split(".")[0] in {"services", "evals"} for name in listed)


def test_mapped_packages_import_under_the_package() -> None:
    import orchestra_ops.evals
    import orchestra_ops.services.simllm

    assert orchestra_ops.services.simllm.__file__.endswith("services/simllm/__init__.py")
    assert orchestra_ops.evals.__file__.endswith("evals/__init__.py")
