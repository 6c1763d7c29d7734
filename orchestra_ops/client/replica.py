"""One replica (or one provider endpoint) as the pool sees it: where it is and how loaded it is."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(eq=False)
class Replica:
    """A server that answers chat requests. `address` names it in tables, logs and profile events."""

    address: str  # "host:port" for a replica, the base URL for a provider
    chat_url: str
    health_url: str | None  # None: never ejected (an external provider has no health endpoint)
    cap: int  # the most requests (and connections) in flight to it at once
    outstanding: int = 0
    healthy: bool = True
    consecutive_failures: int = 0
    last_error: str = ""
    requests: int = field(default=0)

    @classmethod
    def for_server(cls, host: str, port: int, cap: int) -> Replica:
        base = f"http://{host}:{port}"
        return cls(address=f"{host}:{port}", chat_url=f"{base}/v1/chat/completions",
                   health_url=f"{base}/health", cap=cap)

    @classmethod
    def for_provider(cls, base_url: str, cap: int) -> Replica:
        base = base_url.rstrip("/")
        return cls(address=base, chat_url=f"{base}/chat/completions", health_url=None, cap=cap)

    @property
    def models_url(self) -> str:
        return self.chat_url.removesuffix("/chat/completions") + "/models"
