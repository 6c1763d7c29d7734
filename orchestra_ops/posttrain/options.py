"""What `ops posttrain` is asked (PosttrainOptions), the adapter argument, its default run dir, and the one eval
session it is handed (the API is above this package: orchestra_ops.api.training passes `evaluate` in)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from orchestra_ops.errors import ConfigError

if TYPE_CHECKING:
    from orchestra_ops.runner.options import EvalOptions

POSTTRAIN_FILE = "posttrain.json"
SUITE = "opencompass"


class ScoredRun(Protocol):
    """What posttrain reads of the session's result (api's EvalResult): the run's scores."""

    @property
    def scores(self) -> dict[str, Any] | None: ...


class EvalSession(Protocol):
    """The one eval session, `orchestra_ops.api.evaluate`: the caller passes it in (the API is above this module)."""

    def __call__(self, options: EvalOptions, suite: str, *, console: Callable[[str], None] | None = None,
                 analyze: bool = True) -> ScoredRun: ...


@dataclass
class PosttrainOptions:
    topology: str  # a topology file, or the name of a topology that is up
    model: str  # the base model: key, served name or role
    adapter: str  # NAME=DIR
    datasets: str | Sequence[str] = "gsm8k,mmlu"
    max_drop: float = 1.0  # points
    timeout_s: float | None = 3600.0  # the whole call: up, load, eval, unload
    up: bool = False
    down: bool = False
    run_dir: str | None = None  # default runs/posttrain-<adapter>-<topology>
    concurrency: int = 64
    dataset_dirs: Mapping[str, str] = field(default_factory=dict)
    dataset_root: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    sample: int | None = None
    seed: int | None = None
    cache: str | None = None
    cache_sampled: bool = False
    attempts: int = 3
    request_timeout_s: float | None = None
    load_timeout_s: float = 300.0


def parse_adapter(spec: str) -> tuple[str, Path]:
    name, sep, directory = spec.partition("=")
    if not sep or not name.strip() or not directory.strip():
        raise ConfigError(f"--adapter {spec!r}: expected NAME=DIR (e.g. ft=./output/checkpoint-200)")
    path = Path(directory.strip()).expanduser()
    if not path.is_dir():
        raise ConfigError(f"--adapter {name.strip()}={directory.strip()}: no such directory")
    return name.strip(), path.absolute()


def default_run_dir(adapter: str, topology: str) -> Path:
    return Path("runs") / f"posttrain-{adapter.replace('/', '_')}-{topology}"
