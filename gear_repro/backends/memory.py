"""In-process backend: bm25s sparse BM25 + cosine search over a float32/float16 matrix, exact (numpy) or through a
faiss index (``backend.dense``, :mod:`gear_repro.backends.ann`).

Indexes are cached by content hash under $GEAR_CACHE/indexes (BM25, faiss) and $GEAR_CACHE/embeddings.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import bm25s
import numpy as np

from gear_repro.backends.ann import (
    AnnIndex,
    DenseIndex,
    DenseSettings,
    approximation,
    import_faiss,
    resolve_kind,
)
from gear_repro.backends.base import DocCollection, IndexDoc
from gear_repro.backends.lucene_bm25 import LuceneBM25
from gear_repro.backends.tokenize import Snowball, StopWords, Tokenizer, analyse, tokenize_ids
from gear_repro.types import Ranking
from gear_repro.utils.arrays import matrix_scores, top_k_row
from gear_repro.utils.component import Component
from gear_repro.utils.hashing import hash_obj, hash_texts
from gear_repro.utils.io import load_cached
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, Settings, choice, num, refuse_unknown

log = logging.getLogger(__name__)


def top_k_dense(matrix: np.ndarray, queries: np.ndarray, k: int,
                block: int = 16384) -> list[tuple[np.ndarray, np.ndarray]]:
    """Exact top-k rows of ``matrix @ q`` for each query row: (row indices, scores), best first.

    Ties break by row index (stable), so results are deterministic; each query is scored on its own, so its
    scores do not depend on the other queries of the call.
    """
    n = matrix.shape[0]
    k = min(k, n)
    if k <= 0 or queries.shape[0] == 0:
        return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in range(queries.shape[0])]
    out = []
    for q in queries.astype(np.float32, copy=False):  # one product per query: scores do not depend on the batch
        row = matrix_scores(matrix, q, block)
        order = top_k_row(row, k)
        out.append((order, row[order]))
    return out


class BM25Variant(Choice):
    """The BM25 formula (backend.bm25.method): ``lucene`` is Lucene's BM25Similarity computed as Lucene computes it
    (:mod:`gear_repro.backends.lucene_bm25`: one-byte length norms, float32); the others are bm25s's variants,
    ``bm25s_lucene`` its approximation of Lucene's (exact lengths, the earlier default); ``bm25+`` is not an
    identifier."""

    lucene = "lucene"
    bm25s_lucene = "bm25s_lucene"
    robertson = "robertson"
    atire = "atire"
    bm25l = "bm25l"
    bm25plus = "bm25+"


class Analyzer(Choice):
    """The Elasticsearch analyzer whose text analysis bm25s stands in for (backend.bm25.analyzer)."""

    standard = "standard"  # no stop words, no stemming (ES's default analyzer)
    english = "english"  # English stop words and stemmer


class DenseDtype(Choice):
    """Dtype of the embedding matrix (backend.dense_dtype)."""

    float32 = "float32"
    float16 = "float16"  # half the memory; scores differ in the 3rd decimal


# analyzer -> (stop words, stemmer) of the bm25s analysis that stands in for it
ANALYZERS: dict[str, tuple[str | None, str | None]] = {"standard": (None, None), "english": ("en", "english")}


class MemoryCollection(DocCollection):
    """A passage or triple index held in process memory. ``analyzer`` (``standard`` | ``english``), when given,
    sets ``stopwords``/``stemmer`` as that Elasticsearch analyzer would (no stop words, no stemming | both); their
    defaults (none, none) are ES's default ``standard`` analysis (GEAR App. B.1: the papers ran Elasticsearch).
    ``dense`` (``backend.dense``) chooses the dense search; it is resolved for this collection's size here, so a
    missing faiss fails when the collection opens."""

    def __init__(self, name: str, docs: Sequence[IndexDoc], embedder=None, *, k1: float = 1.2, b: float = 0.75,
                 method: str = "lucene", tokenizer: str = "standard", stopwords: str | None = None,
                 stemmer: str | None = None,
                 dtype: str = "float32", cache: bool = True, analyzer: str | None = None,
                 dense: DenseSettings | None = None):
        if not docs:
            raise ValueError(f"collection '{name}' has no documents")
        if analyzer is not None:
            stopwords, stemmer = ANALYZERS[choice(Analyzer, analyzer, "backend.bm25.analyzer").value]
        stopwords = None if stopwords is None else choice(StopWords, stopwords, "backend.bm25.stopwords").value
        stemmer = None if stemmer is None else choice(Snowball, stemmer, "backend.bm25.stemmer").value
        method = choice(BM25Variant, method, "backend.bm25.method").value
        tokenizer = choice(Tokenizer, tokenizer, "backend.bm25.tokenizer").value
        super().__init__(name, docs, embedder)
        self.bm25_params = {"k1": k1, "b": b, "method": method, "tokenizer": tokenizer, "stopwords": stopwords,
                            "stemmer": stemmer}
        self.dtype = np.dtype(choice(DenseDtype, dtype, "backend.dense_dtype").value)
        self.cache = cache
        self.content_hash = hash_texts(d.id + "\t" + d.text for d in self._docs)
        self.dense = DenseSettings.from_config(dense)
        self.dense_kind = resolve_kind(self.dense, len(self._docs))
        if self.dense_kind != DenseIndex.exact and embedder is not None:
            import_faiss()
        self._bm25: bm25s.BM25 | LuceneBM25 | None = None
        self._ann: AnnIndex | None = None
        self._lookup: dict[str, dict[str, list[str]]] = {}

    # -- BM25 --------------------------------------------------------------------------------
    def _analyse(self, texts: Sequence[str]) -> list[list[str]]:
        p = self.bm25_params
        return analyse(texts, p["tokenizer"], p["stopwords"], p["stemmer"])

    def _bm25_index(self) -> bm25s.BM25 | LuceneBM25:
        if self._bm25 is not None:
            return self._bm25
        p = self.bm25_params
        key = hash_obj({"docs": self.content_hash, **p, "v": 3})
        path = cache_dir() / "indexes" / f"bm25-{self.name}-{key}"
        exact = p["method"] == BM25Variant.lucene.value
        if self.cache and path.exists():
            self._bm25 = load_cached(path, LuceneBM25.load if exact else lambda q: bm25s.BM25.load(str(q)),
                                     "BM25 index")
            if self._bm25 is not None:
                return self._bm25
        texts = [d.text for d in self._docs]
        method = "lucene" if p["method"] == BM25Variant.bm25s_lucene.value else p["method"]
        if exact:
            index: bm25s.BM25 | LuceneBM25 = LuceneBM25(self._analyse(texts), k1=p["k1"], b=p["b"])
        else:
            index = bm25s.BM25(k1=p["k1"], b=p["b"], method=method)
            index.index(tokenize_ids(texts, p["stopwords"], p["stemmer"]) if p["tokenizer"] == Tokenizer.word2.value
                        else self._analyse(texts), show_progress=False)
        if self.cache:
            # concurrent runs (hydra/launcher=joblib) may build the same index: each saves to its own temp
            # directory and renames it into place; a loser of the race drops its copy (same content hash)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=path.name + ".tmp"))
            index.save(str(tmp))
            try:
                os.rename(tmp, path)
            except OSError:  # the index appeared meanwhile
                shutil.rmtree(tmp, ignore_errors=True)
        self._bm25 = index
        return index

    def bm25_scores(self, queries: Sequence[str]) -> list[np.ndarray | None]:
        """Full BM25 score vector per query (rows aligned with ``ids``); None for a query with no indexed
        token. For in-process filtered search (GRIEVER's entity and novelty filters)."""
        index = self._bm25_index()
        toks = self._analyse(list(queries))
        if isinstance(index, LuceneBM25):
            return [index.scores(t) for t in toks]
        vocab = index.vocab_dict
        toks = [[t for t in q if t in vocab] for q in toks]
        return [np.asarray(index.get_scores(t), dtype=np.float32) if t else None for t in toks]

    def bm25(self, queries: Sequence[str], k: int) -> list[Ranking]:
        k_eff = min(k, len(self._ids))
        if k_eff <= 0 or not queries:
            return [Ranking() for _ in queries]
        out: list[Ranking] = []
        for scores in self.bm25_scores(queries):
            if scores is None:
                out.append(Ranking())
                continue
            order = [int(d) for d in top_k_row(scores, k_eff) if scores[d] > 0]
            out.append(Ranking([self._ids[d] for d in order], [float(scores[d]) for d in order]))
        return out

    # -- dense -------------------------------------------------------------------------------
    @property
    def approximation(self) -> str | None:
        """How this collection's dense search departs from the exact top-k (:func:`ann.approximation`), or None."""
        return approximation(self.dense_kind, self.dense)

    def ann_index(self) -> AnnIndex | None:
        """The faiss index of the dense search (built or read from the cache on first use); None = exact."""
        if self.dense_kind == DenseIndex.exact:
            return None
        if self._ann is None:
            root = cache_dir() / "indexes" if self.cache else None
            self._ann = AnnIndex.open(self.vectors(), self.dense_kind, self.dense, root, self.name)
            log.info("%s: dense search through faiss %s over %d vectors (backend.dense.index=%s)", self.name,
                     self._ann.description, len(self._ids), self.dense.index)
        return self._ann

    def knn(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        queries = np.atleast_2d(vectors)
        ann = self.ann_index()
        hits = top_k_dense(self.vectors(), queries, k) if ann is None else ann.search(queries, k)
        return [Ranking([self._ids[i] for i in idx], [float(s) for s in sc]) for idx, sc in hits]

    # -- keyword fields ------------------------------------------------------------------------
    def lookup(self, field_name: str, values: Sequence[str]) -> dict[str, list[str]]:
        table = self._lookup.get(field_name)
        if table is None:
            table = defaultdict(list)
            for d in self._docs:
                v = d.fields.get(field_name)
                if v is not None:
                    table[v].append(d.id)
            self._lookup[field_name] = table = dict(table)
        return {v: table.get(v, []) for v in values}


@dataclass
class BM25Params(Settings):
    """``backend.bm25``'s k1 and b, Elasticsearch's defaults (Lucene's BM25Similarity), for every in-process
    backend."""

    config_key: ClassVar[str] = "backend.bm25"

    k1: float = num(1.2, ge=0)  # term saturation (Elasticsearch's default)
    b: float = num(0.75, ge=0, le=1)  # length normalisation (Elasticsearch's default)


@dataclass
class MemoryBM25Settings(BM25Params):
    """``backend.bm25`` of the memory backend: the BM25 formula and text analysis. The defaults are Elasticsearch's
    for a ``text`` field, the standard analyzer (no stop words, no stemming), as the papers' ES indexes (GEAR
    App. B.1 "using Elasticsearch"; HippoRAG legacy src/elastic_search_tool.py:6-28)."""

    # lucene: Lucene 9's BM25Similarity computed as Lucene does (one-byte length norms, float32;
    # backends/lucene_bm25.py) | bm25s_lucene (bm25s's approximation) | robertson | atire | bm25l | bm25+ (bm25s)
    method: BM25Variant = BM25Variant.lucene
    # standard: Lucene's StandardTokenizer + lowercase, token for token (backends/tokenize.py) | word2: a \\w\\w+ split
    # (with method=bm25s_lucene the numbers of runs before the standard tokenizer)
    tokenizer: Tokenizer = Tokenizer.standard
    # null, null = Elasticsearch's default standard analyzer (GEAR App. B.1), the default of every method
    # stop-word list: null keeps every token | en (bm25s's English list = Lucene's 33, as ES's english analyzer) |
    # en_plus (179 words) | de | fr | ... (backends/tokenize.py:StopWords)
    stopwords: StopWords | None = None
    stemmer: Snowball | None = None  # Snowball language (PyStemmer): english | porter | german | ...; null: no stemming
    # null: stopwords/stemmer above | standard (no stop words, no stemming) | english (en + english: ES's english
    # analyzer); set, it replaces stopwords/stemmer
    analyzer: Analyzer | None = None


@dataclass
class InProcessBackendSettings(Settings):
    """What the in-process backends (memory, lucene) share: ``bm25`` (of the type its field's default is), dense
    vectors and their search in this process, and caches by content hash."""

    config_key: ClassVar[str] = "backend"

    _target_: str = ""
    bm25: BM25Params = field(default_factory=BM25Params)
    dense_dtype: DenseDtype = DenseDtype.float32  # float16 halves memory; scores differ in the 3rd decimal
    # dense search (kNN) of every collection (passages, triples): exact | faiss flat/hnsw/ivf (backends/ann.py)
    dense: DenseSettings = field(default_factory=DenseSettings)
    cache: bool = True  # reuse the BM25 (or Lucene) and faiss indexes and the embeddings cached by content hash

    def __post_init__(self) -> None:
        bm25_type = next(f.default_factory for f in fields(self) if f.name == "bm25")
        if not isinstance(self.bm25, bm25_type):
            refuse_unknown("backend.bm25", self.bm25 or {}, bm25_type, type(self).__name__.removesuffix("Settings"))
            self.bm25 = bm25_type(**(self.bm25 or {}))
        self.dense = DenseSettings.from_config(self.dense)
        super().__post_init__()


@dataclass
class MemoryBackendSettings(InProcessBackendSettings):
    """``backend=memory``: the schema and :class:`MemoryBackend`'s settings (each field's default declared here or
    in :class:`InProcessBackendSettings`)."""

    _target_: str = "gear_repro.backends.memory.MemoryBackend"
    bm25: MemoryBM25Settings = field(default_factory=MemoryBM25Settings)


class InProcessBackend:
    """What the in-process backends' factories share: their settings (:class:`InProcessBackendSettings`, of the
    subclass's ``settings_type``) and the part of ``describe()`` they have in common."""

    name = ""
    settings_type: ClassVar[type[InProcessBackendSettings]]

    def __init__(self, settings: InProcessBackendSettings | None = None, **given: Any):
        s = self.settings = self.settings_type.of(settings, type(self).__name__, **given)
        self.bm25_params = asdict(s.bm25)
        self.dense_dtype = s.dense_dtype.value
        self.dense = s.dense
        self.cache = s.cache

    def describe(self) -> dict:
        return {"name": self.name, "bm25": self.bm25_params, "dense_dtype": self.dense_dtype,
                "dense": asdict(self.dense)}


class MemoryBackend(InProcessBackend):
    """Factory for :class:`MemoryCollection` with the BM25, matrix and dense-search settings of the config
    (``configs/backend/memory.yaml``); ``settings, **given``: :class:`MemoryBackendSettings`."""

    name = "memory"
    settings_type = MemoryBackendSettings
    settings: MemoryBackendSettings

    def open_collection(self, name: str, docs: Sequence[IndexDoc], embedder=None) -> MemoryCollection:
        return MemoryCollection(name, docs, embedder, dtype=self.dense_dtype, cache=self.cache, dense=self.dense,
                                **self.bm25_params)

# the registry's declaration (gear_repro/registry.py); Resources builds the backend from its node
COMPONENTS = (Component("backend", "memory_schema", MemoryBackendSettings, MemoryBackendSettings._target_),)
