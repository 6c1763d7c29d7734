"""Where an export writes, checked before anything is written or any heavy package imported.

- `writable_dir(path)` (fsutil.py): an `--out` directory (made when missing) that takes a file, else
  ConfigError (exit 2, one line): a read-only or unwritable place is never swapped for another one.
- `tracking_uri(uri)`: what MLflow can use. A path or `file://` store is refused (MLflow's filesystem
  backend is in maintenance mode: `sqlite:///…` instead), so is an unknown scheme or a URI with
  spaces (ConfigError); a `sqlite:///PATH` whose folder cannot be written is ConfigError too; an
  `http(s)://` server that refuses the connection or does not answer within `PROBE_TIMEOUT_S` is
  Unreachable (exit 3), in seconds, before MLflow's own retries (minutes) could start.
"""

from __future__ import annotations

import contextlib
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from orchestra_ops.core.fsutil import writable_dir
from orchestra_ops.errors import ConfigError, Unreachable

PROBE_TIMEOUT_S = 5.0
SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "databricks-uc", "uc")
SERVERS = ("http", "https")


def tracking_uri(uri: str) -> str:
    """The URI when MLflow can use it (see the module doc), else ConfigError or Unreachable."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower().split("+")[0]  # postgresql+psycopg2://…
    if scheme in ("", "file") or len(scheme) == 1:  # a path (C:\… too) or file://
        raise ConfigError(f"--tracking-uri {uri}: MLflow's filesystem backend (a path or file://) is in maintenance "
                          "mode; point to a database, e.g. sqlite:///PATH/mlflow.db, or to an MLflow server "
                          "(http://HOST:PORT)")
    if scheme not in SCHEMES or any(ch.isspace() for ch in uri):
        raise ConfigError(f"--tracking-uri {uri!r}: not a tracking URI MLflow can use: an MLflow server "
                          "(http(s)://HOST:PORT) or a database (sqlite:///PATH, postgresql://…, mysql://…, "
                          "mssql://…), or databricks")
    if scheme == "sqlite":
        database = uri.split(":///", 1)[1] if ":///" in uri else ""
        if database and database != ":memory:":
            writable_dir(Path(database).parent or Path("."), flag=f"--tracking-uri {uri}: the folder")
    if scheme in SERVERS:
        _probe(uri, parts.hostname or "")
    return uri


def _probe(uri: str, host: str) -> None:
    """Any HTTP answer (an error status too: the server is there) will do; no answer is Unreachable."""
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S):
            return
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            why = f"no answer within {PROBE_TIMEOUT_S:g} s"
        elif isinstance(reason, ConnectionRefusedError):
            why = "connection refused (nothing listens there)"
        elif isinstance(reason, socket.gaierror):
            why = f"unknown host {host!r}"
        else:
            why = str(reason)
        raise Unreachable(f"MLflow at {uri} does not answer: {why}; start the server (`mlflow server …`) or "
                          "point --tracking-uri elsewhere") from None


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the block (a tool reads them), then restore what was there."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
