"""`ops index build|check`: build a retrieval index from a corpus JSONL, or check one."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click


@click.group("index")
def index() -> None:
    """Build and check retrieval indexes (eval.index + eval.jsonl) for `ops serve retrieval`."""


@index.command("build")
@click.argument("corpus", type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Index directory to write (eval.index + eval.jsonl).",
)
@click.option(
    "--encoder",
    default=None,
    metavar="PATH_OR_NAME",
    help="Local sentence-transformers model dir (default: the bundled all-MiniLM-L6-v2).",
)
@click.option(
    "--batch-size", type=click.IntRange(min=1), default=256, show_default=True, help="Documents per encoder batch."
)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--force", is_flag=True, help="Replace eval.index/eval.jsonl in a directory that is not empty.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def build(
    corpus: Path, out_dir: Path, encoder: str | None, batch_size: int, device: str, force: bool, as_json: bool
) -> None:
    """Encode CORPUS (JSONL: `id`, `content`, other fields kept) into an inner-product FAISS index."""
    from orchestra_ops.services.retrieval.encoder import load_encoder
    from orchestra_ops.services.retrieval.index import build_index, check_out_dir, read_corpus

    check_out_dir(out_dir, force)
    docs = read_corpus(corpus)
    start = time.perf_counter()
    model = load_encoder(encoder, device)
    with click.progressbar(length=len(docs), label="encoding", file=sys.stderr, show_pos=True) as bar:
        loaded = build_index(docs, out_dir, model, batch_size=batch_size, on_progress=bar.update)
    summary = {
        "index_dir": str(out_dir),
        "documents": loaded.count,
        "dim": loaded.dim,
        "encoder": model.name,
        "seconds": round(time.perf_counter() - start, 2),
    }
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(
            f"wrote {loaded.count} documents (dimension {loaded.dim}, encoder {model.name}) "
            f"to {out_dir} in {summary['seconds']} s"
        )


@index.command("check")
@click.argument("index_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def check(index_dir: Path, as_json: bool) -> None:
    """Check that INDEX_DIR is complete and consistent (files present, counts match)."""
    from orchestra_ops.services.retrieval.index import load_index

    loaded = load_index(index_dir)
    summary = {"index_dir": str(index_dir), "documents": loaded.count, "dim": loaded.dim}
    if as_json:
        click.echo(json.dumps(summary))
    else:
        click.echo(f"{index_dir}: {loaded.count} documents, dimension {loaded.dim}")
