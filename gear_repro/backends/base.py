"""The retrieval contract every backend fulfils (DESIGN.md "Engines").

A backend opens *collections* (the passage index C and the triple index T). A collection answers
BM25 queries and k-nearest-neighbour queries over pre-computed vectors, and exact-match lookups on
keyword fields (``subject_key``/``object_key``/``passage_id`` for triples). Retrievers and the
graph expansion are written against this contract only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol, runtime_checkable

import numpy as np

from gear_repro.types import Ranking
from gear_repro.utils.errors import ConfigError

# shared by every doc without keyword fields: millions of passages and GRIEVER units at the papers' corpus sizes
# would otherwise each hold an empty dict of their own (64 B)
NO_FIELDS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class IndexDoc:
    """One item of a collection: id, the text BM25 and the embedder see, and keyword fields."""

    id: str
    text: str
    fields: Mapping[str, str] = field(default_factory=lambda: NO_FIELDS)


@runtime_checkable
class Collection(Protocol):
    name: str

    def __len__(self) -> int: ...

    @property
    def ids(self) -> list[str]: ...

    def bm25(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Top-k by BM25 for each query (best first). Queries with no indexable token give an empty ranking."""
        ...

    def knn(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        """Top-k by cosine similarity for each (normalised) query vector."""
        ...

    def vectors(self) -> np.ndarray:
        """The collection's embedding matrix, rows aligned with ``ids`` (for in-process scoring)."""
        ...

    def lookup(self, field_name: str, values: Sequence[str]) -> dict[str, list[str]]:
        """Exact keyword lookup: value -> ids of docs whose ``field_name`` equals it."""
        ...


@runtime_checkable
class Backend(Protocol):
    name: str

    def open_collection(self, name: str, docs: Sequence[IndexDoc], embedder=None) -> Collection:
        """Build (or reuse a cached build of) an index over ``docs``; ``embedder`` enables kNN."""
        ...


class DocCollection:
    """What every backend's collection shares: its docs in load order and the embedding matrix.

    ``vectors()`` is the embedder's content-hashed corpus cache (the same matrix a backend indexes),
    so in-process scoring never pulls vectors back from an engine.
    """

    dtype: np.dtype = np.dtype(np.float32)

    def __init__(self, name: str, docs: Sequence[IndexDoc], embedder=None):
        self.name = name
        # a sequence is kept as given, not copied: a lazy one (GRIEVER's units) makes its docs on access
        self._docs = docs if isinstance(docs, Sequence) else list(docs)
        self._ids = [d.id for d in self._docs]
        self.embedder = embedder
        self._matrix: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def ids(self) -> list[str]:
        return self._ids

    @property
    def docs(self) -> Sequence[IndexDoc]:
        return self._docs

    def _need_vectors(self) -> None:
        if self.embedder is None:
            raise ConfigError(f"collection '{self.name}' was opened without an embedder: no dense search")

    def vectors(self) -> np.ndarray:
        self._need_vectors()
        if self._matrix is None:
            from gear_repro.embedding.embedder import corpus_matrix

            self._matrix = corpus_matrix(self.embedder, [d.text for d in self._docs], self.name, self.dtype)
        return self._matrix
