"""`ops serve retrieval`: the micro-batching FAISS retrieval server (heavy imports inside the command)."""

from __future__ import annotations

import logging
from pathlib import Path

import click


@click.command("retrieval")
@click.option(
    "--index-dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory with eval.index + eval.jsonl (from `ops index build`).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", required=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Where the encoder (and, if FAISS can, the index) runs.",
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Queries per encode+search batch.",
)
@click.option(
    "--max-wait-ms",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="How long the oldest queued request may wait for a batch to fill.",
)
@click.option(
    "--max-queue",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Requests allowed to wait; beyond it, 503 with Retry-After.",
)
@click.option(
    "--batching",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="off: each request encoded and searched alone under a global lock (the baseline).",
)
@click.option(
    "--encoder",
    default=None,
    metavar="PATH_OR_NAME",
    help="Local sentence-transformers model dir (default: the bundled all-MiniLM-L6-v2).",
)
@click.option(
    "--examples",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="JSON map eid -> allowed document ids; a request's eid restricts its results.",
)
def retrieval(
    index_dir: Path,
    host: str,
    port: int,
    device: str,
    max_batch_size: int,
    max_wait_ms: float,
    max_queue: int,
    batching: str,
    encoder: str | None,
    examples: Path | None,
) -> None:
    """Serve POST /retrieve, GET /health and GET /metrics over a FAISS index."""
    from orchestra_ops.services.retrieval.server import ServerConfig, serve

    logging.getLogger("orchestra_ops.services.retrieval").setLevel(logging.INFO)
    serve(
        ServerConfig(
            index_dir=index_dir,
            port=port,
            host=host,
            device=device,
            max_batch_size=max_batch_size,
            max_wait_ms=max_wait_ms,
            max_queue=max_queue,
            batching=batching == "on",
            encoder=encoder,
            examples=examples,
        )
    )
