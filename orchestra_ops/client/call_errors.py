"""CallError: why a model call failed, with a short machine-readable kind."""

from __future__ import annotations

from orchestra_ops.errors import EvalError


class CallError(EvalError):
    """A model call that failed for good (after its retries, or at once when retrying cannot help).

    `kind` is what `ops eval-status` groups failures by: `http_400`, `context_length`,
    `http_500`, `http_429`, `timeout`, `connection`, `no_replica`, `prompt_too_long`,
    `bad_response`, `missing_api_key`.
    """

    def __init__(self, kind: str, message: str, *, attempts: int = 0, replica: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.attempts = attempts
        self.replica = replica


class TransportError(Exception):
    """Raised by a Transport when no HTTP response arrived: `kind` is `connection` or `timeout`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
