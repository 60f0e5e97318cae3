"""Base retrievers h_base^k(q, R) over any backend collection (GEAR §3, §6.2).

The same class serves the passage index C and the triple index T, so tripleLink and passageLink
use "the same base retriever type" as the passage retrieval (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np

from gear_repro.backends.base import Collection
from gear_repro.core.fusion import RRF_K, rrf
from gear_repro.types import Ranking
from gear_repro.utils.component import Component
from gear_repro.utils.settings import Settings, num


class Retriever(Protocol):
    """h_base^k over one collection (passages C or triples T). ``k_dependent``: the top k of a k-list differs
    from the top k of a longer list (GRIEVER pools k per iteration), so single-step runs call it per evaluated k;
    ``needs_vectors`` (a class attribute): its collection must hold embeddings."""

    name: str
    k_dependent: bool
    needs_vectors: bool

    def retrieve(self, query: str, k: int) -> Ranking: ...

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]: ...


# -- the retriever group's settings (configs/retriever/*.yaml): schema, constructor settings --------------------
@dataclass
class BM25RetrieverSettings(Settings):
    """``retriever=bm25`` (the backend's ``bm25`` settings rank)."""

    config_key: ClassVar[str] = "retriever"

    _target_: str = "gear_repro.retrieval.BM25Retriever"
    name: str = "bm25"


@dataclass
class DenseRetrieverSettings(Settings):
    """``retriever=sbert`` (the run's embedder; the backend's dense search)."""

    config_key: ClassVar[str] = "retriever"

    _target_: str = "gear_repro.retrieval.DenseRetriever"
    name: str = "sbert"


@dataclass
class HybridRetrieverSettings(Settings):
    """``retriever=hybrid``: RRF of BM25 and SBERT (GEAR §6.2, App. B.1)."""

    config_key: ClassVar[str] = "retriever"

    _target_: str = "gear_repro.retrieval.HybridRetriever"
    name: str = "hybrid"
    # depth of each list before fusion (>= max(run.ks), refused at start-up: config.validate); a method asking for
    # more passages, e.g. a deeper base list, gets each list to that depth
    fusion_depth: int = num(100, ge=1)
    k_rrf: int = num(RRF_K, ge=0)  # RRF constant (Cormack et al.'s 60)


@dataclass
class ComposedRetrieverSettings(Settings):
    """``retriever=composed``: BM25 candidates re-scored densely (GRIEVER §4.2.2)."""

    config_key: ClassVar[str] = "retriever"

    _target_: str = "gear_repro.retrieval.ComposedRetriever"
    name: str = "composed"
    # BM25 candidates re-scored densely (the paper gives no number: the hybrid's fusion depth; >= max(run.ks),
    # refused at start-up: config.validate); a method asking for more passages gets that many
    candidates: int = num(100, ge=1)


class _Base:
    name = "base"
    k_dependent = False  # the top k of a longer list is the k-list
    needs_vectors = True  # the collection must hold embeddings (dense search)
    searches_bm25 = True  # builds the collection's BM25 index (the start-up capacity check counts it)
    searches_knn = True  # searches the collection by kNN (collection.knn), which builds its faiss index (counted too)
    settings_class: type[Settings] = BM25RetrieverSettings

    def __init__(self, collection: Collection, embedder=None, settings: Settings | None = None, **given: Any):
        self.settings = self.settings_class.of(settings, type(self).__name__, **given)
        self.collection = collection
        self.embedder = embedder
        self.name = self.settings.name  # type: ignore[attr-defined]

    def retrieve(self, query: str, k: int) -> Ranking:
        return self.retrieve_many([query], k)[0]

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        raise NotImplementedError


class BM25Retriever(_Base):
    """Sparse BM25 (Robertson & Zaragoza, 2009)."""

    name = "bm25"
    needs_vectors = False
    searches_knn = False
    settings_class = BM25RetrieverSettings

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        return self.collection.bm25(list(queries), k)


class DenseRetriever(_Base):
    """SBERT dense retrieval by cosine similarity (Reimers & Gurevych, 2019)."""

    name = "sbert"
    settings_class = DenseRetrieverSettings
    searches_bm25 = False

    def __init__(self, collection: Collection, embedder=None, settings: Settings | None = None, **given: Any):
        if embedder is None:
            raise ValueError("DenseRetriever needs an embedder")
        super().__init__(collection, embedder, settings, **given)

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        if not queries:
            return []
        return self.collection.knn(self.embedder.encode(list(queries)), k)


class HybridRetriever(_Base):
    """RRF of BM25 and SBERT lists, each retrieved to ``fusion_depth`` before truncation to k. A run refuses a
    ``fusion_depth`` below max(run.ks) (config.validate); a call for more passages than it (a method's deeper
    internal list) retrieves each list to k, so the fused list is never shorter than asked."""

    name = "hybrid"
    settings_class = HybridRetrieverSettings

    def __init__(self, collection: Collection, embedder=None, settings: HybridRetrieverSettings | None = None,
                 **given: Any):
        super().__init__(collection, embedder, settings, **given)
        self.sparse = BM25Retriever(collection)
        self.dense = DenseRetriever(collection, embedder)
        self.fusion_depth = self.settings.fusion_depth
        self.k_rrf = self.settings.k_rrf

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        depth = max(self.fusion_depth, k)
        sp = self.sparse.retrieve_many(queries, depth)
        de = self.dense.retrieve_many(queries, depth)
        return [rrf([s, d], k_rrf=self.k_rrf, limit=k) for s, d in zip(sp, de, strict=True)]


class ComposedRetriever(_Base):
    """Composed retrieval (GRIEVER §4.2.2): the top ``candidates`` BM25 passages re-scored by SBERT cosine,
    best k by cosine (ties: BM25 order); ``candidates`` below max(run.ks) is refused (config.validate), a call for
    more passages re-scores k candidates. Dense scoring touches only the candidates, hence its low latency
    (GRIEVER Table 1). The cosine uses the collection's embedding matrix (``vectors()``, the cached corpus
    embeddings) on every backend."""

    name = "composed"
    settings_class = ComposedRetrieverSettings
    searches_knn = False  # the candidates' cosines from vectors()

    def __init__(self, collection: Collection, embedder=None, settings: ComposedRetrieverSettings | None = None,
                 **given: Any):
        if embedder is None:
            raise ValueError("ComposedRetriever needs an embedder")
        super().__init__(collection, embedder, settings, **given)
        self.candidates = self.settings.candidates
        self._row: dict[str, int] | None = None

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        if not queries:
            return []
        if self._row is None:
            self._row = {d: i for i, d in enumerate(self.collection.ids)}
        matrix = self.collection.vectors()
        vecs = self.embedder.encode(list(queries))
        out = []
        for cands, v in zip(self.collection.bm25(list(queries), max(self.candidates, k)), vecs, strict=True):
            rows = np.asarray([self._row[i] for i in cands.ids], dtype=np.int64)
            sims = (matrix[rows] @ v).astype(np.float32) if rows.size else np.zeros(0, np.float32)
            order = np.argsort(-sims, kind="stable")[:k]
            out.append(Ranking([cands.ids[i] for i in order], [float(sims[i]) for i in order]))
        return out


def _retriever(schema: str, settings: type, hooks: str | None = None) -> Component:
    """A base retriever's declaration: its configs name the package path, its class lives here; the wiring hands it
    ``collection`` and ``embedder`` by name. Its report hooks (BM25's paper settings) are with the single-step
    method's (methods/single.py), above this layer."""
    name = settings._target_.rsplit(".", 1)[-1]
    return Component("retriever", schema, settings, settings._target_, aliases=(f"{__name__}.{name}",), recursive=True,
                     report=hooks and f"gear_repro.methods.single:{hooks}")


# the registry's declarations (gear_repro/registry.py)
COMPONENTS = (_retriever("bm25_schema", BM25RetrieverSettings, "BM25_HOOKS"),
              _retriever("sbert_schema", DenseRetrieverSettings),
              _retriever("hybrid_schema", HybridRetrieverSettings, "HYBRID_HOOKS"),
              _retriever("composed_schema", ComposedRetrieverSettings, "COMPOSED_HOOKS"))
