"""Retrieval indexes a topology needs before `ops up` starts its services.

A retrieval service names its index (`index_dir`), its corpus (`corpus`, a JSONL of `id` +
`content`), or both. Paths are relative to where `ops` runs, as `index_dir` and `lora_modules`
are. Without `index_dir` the index lives under the topology's state dir
(`$OPS_HOME/<name>/index/<service>`, see plan.py). At plan time (`ops plan`, `ops up`, before
anything starts) a service on this machine whose index is missing must declare a corpus, else it
is a located error (`FILE:LINE: services.X.index_dir: …`); `ops up` then builds each missing index
from its corpus with the code `ops index build` runs (the [retrieval] extra: torch and
sentence-transformers are imported only inside `build`). A service on another host finds its
index on that host's disk: it is not checked or built here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestra_ops.config.topology import Topology
from orchestra_ops.config.yamlpos import load_positioned
from orchestra_ops.errors import ConfigError, TopologyError
from orchestra_ops.fleet.plan import LaunchPlan

INDEX_FILE = "eval.index"

# (service, documents encoded so far, documents in all)
BuildProgress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class IndexBuild:
    service: str
    corpus: Path
    out: Path
    encoder: str | None
    device: str


def missing_indexes(topology_file: str | Path, topology: Topology, launch_plan: LaunchPlan) -> list[IndexBuild]:
    """The indexes `ops up` must build first; a TopologyError (located) for one it cannot."""
    doc = None
    problems: list[str] = []
    builds: list[IndexBuild] = []
    index_dirs = {spec.name: _index_dir(spec.argv) for spec in launch_plan.processes if spec.kind == "retrieval"}
    for key, service in topology.services.items():
        if not topology.nodes[service.node].is_local:
            continue
        out = Path(index_dirs[key])
        if (out / INDEX_FILE).exists():
            continue
        doc = doc or load_positioned(Path(topology_file))
        if service.corpus is None:
            field = "index_dir" if service.index_dir is not None else ""
            what = f"{out}: no index there (no {INDEX_FILE})" if field else "no index_dir and no corpus"
            problems.append(doc.where(("services", key, field) if field else ("services", key),
                                      f"{what}; declare corpus: (a JSONL of id + content; `ops up` builds the index "
                                      f"from it) or build one with `ops index build CORPUS --out {out}`"))
        elif not Path(service.corpus).is_file():
            problems.append(doc.where(("services", key, "corpus"), f"{service.corpus}: no such file (relative to "
                                      f"{Path.cwd()})" if not Path(service.corpus).is_absolute()
                                      else f"{service.corpus}: no such file"))
        else:
            builds.append(IndexBuild(service=key, corpus=Path(service.corpus), out=out, encoder=service.encoder,
                                     device="cpu" if service.gpu is None else "cuda"))
    if problems:
        raise TopologyError(problems)
    return builds


def build(job: IndexBuild, on_progress: BuildProgress | None = None) -> int:
    """Encode the corpus into the index directory, as `ops index build` does; the number of documents."""
    try:
        from orchestra_ops.services.retrieval.encoder import load_encoder
        from orchestra_ops.services.retrieval.index import build_index, check_out_dir, read_corpus
    except ImportError as exc:
        raise ConfigError(f"services.{job.service}: building its index from {job.corpus} needs the [retrieval] "
                          f"extra (pip install 'orchestra-ops[retrieval]'): {exc}") from None
    check_out_dir(job.out, False)
    docs = read_corpus(job.corpus)
    model = load_encoder(job.encoder, job.device)
    done = 0

    def step(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(job.service, done, len(docs))

    if on_progress is not None:
        on_progress(job.service, 0, len(docs))
    loaded = build_index(docs, job.out, model, on_progress=step)
    return loaded.count


def _index_dir(argv: tuple[str, ...]) -> str:
    return argv[argv.index("--index-dir") + 1]
