"""Wire the retrieval server together and run it: bind, load, check, warm up, serve.

Order matters for the operator: the port is bound first (a taken port fails in a second, not after
the model loaded), then the index directory is checked (no encoder needed), then the encoder is
loaded, its dimension checked against the index, and a warm-up batch run. Only then does uvicorn
start answering, so /health is 200 exactly when the server can serve.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestra_ops.errors import LaunchError

from .batcher import BatchingDispatcher, Dispatcher, SerialDispatcher
from .encoder import load_encoder
from .index import load_index, to_device
from .metrics import ServerMetrics
from .search import ExampleFilter, Query, Retriever

if TYPE_CHECKING:
    from .app import ServerState

log = logging.getLogger(__name__)

WARMUP_TEXT = "warm-up query for the retrieval server"


@dataclass(frozen=True)
class ServerConfig:
    index_dir: Path
    port: int
    host: str = "127.0.0.1"
    device: str = "cpu"
    max_batch_size: int = 64
    max_wait_ms: float = 5.0
    max_queue: int = 4096
    batching: bool = True
    encoder: str | None = None
    examples: Path | None = None


def bind_socket(host: str, port: int) -> socket.socket:
    """A bound (not yet listening) TCP socket; LaunchError when the address is taken or invalid."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise LaunchError(f"cannot resolve --host {host}: {exc}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise LaunchError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def prepare(config: ServerConfig) -> ServerState:
    """Load and check everything; return the app state with a started dispatcher, ready to serve."""
    from .app import ServerState

    loaded = load_index(config.index_dir)
    examples = ExampleFilter.load(config.examples, loaded.row_of_id()) if config.examples else None
    encoder = load_encoder(config.encoder, config.device)
    loaded.check_dimension(encoder.dim, encoder.name)
    to_device(loaded, config.device)
    retriever = Retriever(encoder, loaded, encode_batch_size=config.max_batch_size)
    warmup = [Query(f"{WARMUP_TEXT} {i}", 1) for i in range(min(config.max_batch_size, 16))]
    retriever.retrieve(warmup)
    retriever.retrieve(warmup[:1])
    metrics = ServerMetrics()
    dispatcher: Dispatcher
    if config.batching:
        dispatcher = BatchingDispatcher(
            retriever.retrieve,
            max_batch_size=config.max_batch_size,
            max_wait_s=config.max_wait_ms / 1000.0,
            max_queue=config.max_queue,
            metrics=metrics,
        )
    else:
        dispatcher = SerialDispatcher(retriever.retrieve, max_queue=config.max_queue, metrics=metrics)
    info = {
        "documents": loaded.count,
        "dim": loaded.dim,
        "encoder": encoder.name,
        "batching": "on" if config.batching else "off",
        "examples": len(examples) if examples else 0,
    }
    state = ServerState(dispatcher=dispatcher, metrics=metrics, examples=examples, info=info)
    dispatcher.start()
    state.ready = True
    log.info(
        "retrieval: %d documents (dimension %d), encoder %s, batching %s",
        loaded.count,
        loaded.dim,
        encoder.name,
        info["batching"],
    )
    return state


def serve(config: ServerConfig) -> None:
    """Run the server in the foreground until SIGINT/SIGTERM."""
    import uvicorn

    from .app import create_app

    sock = bind_socket(config.host, config.port)
    try:
        state = prepare(config)
        try:
            app = create_app(state)
            uv_config = uvicorn.Config(
                app,
                host=config.host,
                port=config.port,
                access_log=False,
                lifespan="off",
                log_level="info",
                backlog=4096,
            )
            log.info("listening on http://%s:%d", config.host, config.port)
            uvicorn.Server(uv_config).run(sockets=[sock])
        finally:
            state.dispatcher.close()
    finally:
        sock.close()
