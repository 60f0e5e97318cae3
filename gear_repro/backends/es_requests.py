"""Elasticsearch request bodies (pure functions; docs/elasticsearch.md "Mapping"): index settings and
mappings, BM25 / kNN / terms query bodies, bulk actions and the documents' content key. The unit tests
compare them verbatim; :mod:`gear_repro.backends.elasticsearch` sends them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gear_repro.backends.base import IndexDoc
from gear_repro.utils.hashing import hash_texts, stable_json
from gear_repro.utils.settings import num

MAX_WINDOW = 10_000  # ES index.max_result_window and the knn k / num_candidates ceiling


@dataclass
class BM25Settings:
    """``backend.bm25``: the indices' BM25 similarity and text analysis. These three dataclasses are also the
    config schemas of their nodes (``gear_repro/config.py``)."""

    k1: float = num(1.2, ge=0)  # index-level BM25 similarity, as ES's own default
    b: float = num(0.75, ge=0, le=1)
    # standard: ES's own default for a text field, no stop words, no stemming (GEAR App. B.1 "using Elasticsearch";
    # HippoRAG legacy src/elastic_search_tool.py:6-28) | english (possessive, English stop words, Porter stemmer) |
    # any analyzer of the cluster
    analyzer: str = "standard"


@dataclass
class KnnSettings:
    """``backend.knn``: the dense_vector index and kNN search."""

    num_candidates: int = num(100, ge=1, le=MAX_WINDOW)  # HNSW candidates per shard (raised to k when k is larger)
    # any dense_vector index type of the cluster: hnsw (float32) | int8_hnsw (a quarter of the vector RAM; ES 8.14+'s
    # default) | flat (exact) | ...
    index_type: str = "hnsw"
    m: int = num(16, ge=1)  # HNSW graph degree
    ef_construction: int = num(100, ge=1)  # HNSW build beam


@dataclass
class BulkSettings:
    """``backend.bulk``: bulk indexing."""

    chunk_size: int = num(500, ge=1)  # documents per _bulk request
    threads: int = num(1, ge=1)  # 1: streaming_bulk; more: parallel_bulk with this many threads
    max_retries: int = num(3, ge=0)  # retries of documents rejected with 429 (streaming_bulk only)
    progress: bool = True  # tqdm bar
    pause_refresh: bool = True  # refresh_interval -1 while loading, restored and refreshed after


# -- request bodies (pure; unit tests compare them verbatim) ------------------------------------

def index_settings(bm25: dict, shards: int = 1, replicas: int = 0, pause_refresh: bool = True) -> dict:
    """Index settings: shard layout and the BM25 similarity ``gear_bm25`` used by ``text``."""
    s: dict[str, Any] = {
        "number_of_shards": shards,
        "number_of_replicas": replicas,
        "similarity": {"gear_bm25": {"type": "BM25", "k1": bm25["k1"], "b": bm25["b"]}},
    }
    if pause_refresh:
        s["refresh_interval"] = "-1"
    return {"index": s}


def index_mappings(bm25: dict, keyword_fields: Sequence[str], dims: int | None, knn: dict,
                   meta: dict | None = None) -> dict:
    """Strict mapping: id/pos/text (+ embedding when ``dims``) + one keyword field per doc field."""
    props: dict[str, Any] = {
        "id": {"type": "keyword"},
        "pos": {"type": "integer"},
        "text": {"type": "text", "analyzer": bm25["analyzer"], "similarity": "gear_bm25"},
    }
    for f in keyword_fields:
        props[f] = {"type": "keyword"}
    m: dict[str, Any] = {"dynamic": "strict", "properties": props}
    if dims is not None:
        opts: dict[str, Any] = {"type": knn["index_type"]}
        if "hnsw" in knn["index_type"]:
            opts.update(m=knn["m"], ef_construction=knn["ef_construction"])
        props["embedding"] = {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine",
                              "index_options": opts}
        m["_source"] = {"excludes": ["embedding"]}
    if meta is not None:
        m["_meta"] = meta
    return m


def bm25_body(query: str, size: int) -> dict:
    """BM25 ``match`` on ``text``; ties broken by document position, as the memory backend does."""
    return {"query": {"match": {"text": {"query": query}}}, "size": size,
            "sort": ["_score", {"pos": "asc"}], "_source": False, "track_total_hits": False}


def knn_body(vector: Sequence[float], k: int, num_candidates: int) -> dict:
    """Approximate kNN over ``embedding`` (num_candidates per shard, at least k)."""
    return {"knn": {"field": "embedding", "query_vector": [float(x) for x in vector], "k": k,
                    "num_candidates": num_candidates},
            "size": k, "_source": False}


def terms_body(field_name: str, values: Sequence[str], size: int, search_after: list | None = None) -> dict:
    """Exact keyword match, in document order, paged with ``search_after`` on ``pos``."""
    body: dict[str, Any] = {"query": {"terms": {field_name: list(values)}}, "size": size,
                            "sort": [{"pos": "asc"}], "_source": [field_name], "track_total_hits": False}
    if search_after is not None:
        body["search_after"] = search_after
    return body


def bulk_actions(index: str, docs: Sequence[IndexDoc], vectors: np.ndarray | None) -> Iterator[dict]:
    """One ``index`` action per document, ``_id`` = doc id."""
    for i, d in enumerate(docs):
        src: dict[str, Any] = {"id": d.id, "pos": i, "text": d.text, **d.fields}
        if vectors is not None:
            src["embedding"] = vectors[i].tolist()
        yield {"_op_type": "index", "_index": index, "_id": d.id, "_source": src}


def docs_key(docs: Sequence[IndexDoc]) -> str:
    """Content hash of ids, texts and keyword fields, in order."""
    return hash_texts(f"{d.id}\t{d.text}\t{stable_json(d.fields) if d.fields else ''}" for d in docs)


# -- backend --------------------------------------------------------------------------------
