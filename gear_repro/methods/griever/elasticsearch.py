"""GRIEVER's three indices on Elasticsearch (§4.1, App. A.1: "All indices are implemented using
Elasticsearch"), and the searches of :class:`gear_repro.methods.griever.store.GrieverStore` as ES queries.

Indices ``<prefix>-griever-<kind>-<content key>`` (kind: passages, partial_triples / full_triples, same_as),
built once per content (docs, their vectors, settings) and reused; an index counts as built only when its
mapping ``_meta.gear_complete`` is true (set after the bulk load and a matching ``_count``), as the base
backend's collections.

* passages: ``id``, ``pos``, ``title`` (text), ``content`` (text, BM25: title + text as the base indexes),
  ``triples`` / ``subjects`` / ``objects`` (keyword lists), ``embedding`` (dense_vector, cosine).
* units (partial_triples): ``id``, ``pos``, ``content`` (text), ``subject`` (anchor), ``predicate`` (keyword),
  ``is_inverse`` (boolean), ``objects`` (complements), ``passage_ids``, ``triple_ids`` (keywords), ``embedding``.
* same_as: ``id``, ``pos``, ``content`` (entity name, text), ``entity``, ``aliases``, ``passage_ids``
  (keywords), ``embedding``.

Filters are ``terms``/``ids`` clauses: BM25 as ``bool{must: match, filter: [...], must_not: [...]}``, kNN with
the same clauses in its ``filter``. The composed re-scoring is a kNN restricted by an ``ids`` filter to the
BM25 candidates (k = their number). Ties break by ``pos`` as in the memory store; kNN scores
(1 + cos) / 2 are mapped back to cosines.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from elasticsearch import helpers

from gear_repro.backends.elasticsearch import (
    MAX_WINDOW,
    ElasticsearchBackend,
    ElasticsearchError,
    index_settings,
)
from gear_repro.embedding.embedder import Embedder
from gear_repro.methods.griever.index import GrieverData
from gear_repro.methods.griever.store import PassageFilter
from gear_repro.types import Ranking
from gear_repro.utils.hashing import hash_obj, hash_texts

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
KEYWORDS = {
    "passages": ("triples", "subjects", "objects"),
    "units": ("subject", "predicate", "objects", "passage_ids", "triple_ids"),
    "same_as": ("entity", "aliases", "passage_ids"),
}


def mappings(kind: str, analyzer: str, dims: int, knn: dict, meta: dict | None = None) -> dict:
    """Strict mapping of one GRIEVER index (module docstring)."""
    props: dict[str, Any] = {"id": {"type": "keyword"}, "pos": {"type": "integer"},
                             "content": {"type": "text", "analyzer": analyzer, "similarity": "gear_bm25"}}
    if kind == "passages":
        props["title"] = {"type": "text", "analyzer": analyzer, "similarity": "gear_bm25"}
    if kind == "units":
        props["is_inverse"] = {"type": "boolean"}
    for f in KEYWORDS[kind]:
        props[f] = {"type": "keyword"}
    opts: dict[str, Any] = {"type": knn["index_type"]}
    if "hnsw" in knn["index_type"]:
        opts.update(m=knn["m"], ef_construction=knn["ef_construction"])
    props["embedding"] = {"type": "dense_vector", "dims": dims, "index": True, "similarity": "cosine",
                          "index_options": opts}
    m: dict[str, Any] = {"dynamic": "strict", "properties": props, "_source": {"excludes": ["embedding"]}}
    if meta is not None:
        m["_meta"] = meta
    return m


def passage_filter_clauses(filt: PassageFilter | None) -> tuple[list[dict], list[dict]]:
    """(filter, must_not) clauses of a passage filter (§4.2.2)."""
    flt: list[dict] = []
    must_not: list[dict] = []
    if filt is not None:
        if filt.entities is not None:
            ents = sorted(filt.entities)
            flt.append({"bool": {"should": [{"terms": {"subjects": ents}}, {"terms": {"objects": ents}}],
                                 "minimum_should_match": 1}})
        if filt.exclude:
            must_not.append({"ids": {"values": sorted(filt.exclude)}})
    return flt, must_not


def unit_filter_clauses(passage_ids: Sequence[str], anchors: Sequence[str]) -> list[dict]:
    """Alg. 2's F: passage_ids meet the retrieved passages and the anchor is one of their entities."""
    return [{"terms": {"passage_ids": sorted(set(passage_ids))}}, {"terms": {"subject": sorted(set(anchors))}}]


def bm25_query(text: str, size: int, flt: list[dict], must_not: list[dict], source: list[str] | bool = False) -> dict:
    return {"query": {"bool": {"must": [{"match": {"content": {"query": text}}}], "filter": flt,
                               "must_not": must_not}},
            "size": size, "sort": ["_score", {"pos": "asc"}], "_source": source, "track_total_hits": False}


def knn_query(vector: np.ndarray, k: int, num_candidates: int, flt: list[dict], must_not: list[dict]) -> dict:
    knn: dict[str, Any] = {"field": "embedding", "query_vector": [float(x) for x in vector], "k": k,
                           "num_candidates": max(k, num_candidates)}
    if flt or must_not:
        knn["filter"] = {"bool": {"filter": flt, "must_not": must_not}}
    return {"knn": knn, "size": k, "_source": False}


class ElasticsearchGrieverStore:
    """:class:`~gear_repro.methods.griever.store.GrieverStore` on an Elasticsearch cluster (the run's backend)."""

    def __init__(self, backend: ElasticsearchBackend, data: GrieverData, embedder: Embedder):
        self.backend = backend
        self.data = data
        self.embedder = embedder
        ps = data.passages
        pvec = np.asarray(embedder.encode_corpus([p.content for p in ps], desc="passages"), dtype=np.float32)
        uvec = data.unit_vectors()
        ents = list(data.entity_name)
        evec = data.entity_vectors(ents)
        self.passage_pos = {p.id: i for i, p in enumerate(ps)}
        self.unit_pos = {u.id: i for i, u in enumerate(data.units)}
        unit_kind = f"{data.unit_kind.value}_triples"
        self.index = {
            "passages": self._open("passages", list(self._passage_docs()), pvec, embedder),
            "units": self._open(unit_kind, list(self._unit_docs()), uvec, embedder, kind="units"),
            "same_as": self._open("same_as", list(self._same_as_docs(ents)), evec, embedder),
        }

    # -- documents ------------------------------------------------------------------------------
    def _passage_docs(self) -> Iterator[dict]:
        d = self.data
        for p in d.passages:
            yield {"id": p.id, "title": p.title, "content": p.content, "triples": d.passage_triples.get(p.id, []),
                   "subjects": d.passage_subjects.get(p.id, []), "objects": d.passage_objects.get(p.id, [])}

    def _unit_docs(self) -> Iterator[dict]:
        for u in self.data.units:
            yield {"id": u.id, "content": u.text, "subject": u.anchor, "predicate": u.predicate,
                   "is_inverse": u.inverse, "objects": list(u.complements), "passage_ids": list(u.passage_ids),
                   "triple_ids": list(u.triple_ids)}

    def _same_as_docs(self, ents: list[str]) -> Iterator[dict]:
        d = self.data
        for n, e in enumerate(ents):
            yield {"id": f"sa{n}", "content": d.entity_name[e], "entity": e, "aliases": d.same_as_entity.get(e, []),
                   "passage_ids": d.entity_passages.get(e, [])}

    # -- building -------------------------------------------------------------------------------
    def _open(self, name: str, docs: list[dict], vecs: np.ndarray, embedder: Embedder, kind: str | None = None) -> str:
        b = self.backend
        kind = kind or name
        key = hash_obj({"v": SCHEMA_VERSION, "docs": hash_texts(repr(sorted(d.items())) for d in docs),
                        "bm25": b.bm25_params, "knn": b.knn_params, "shards": b.shards,
                        "embedder": embedder.model_id,
                        "vectors": hashlib.sha256(np.ascontiguousarray(vecs, np.float32).tobytes()).hexdigest()}, 12)
        index = f"{b.index_prefix}-griever-{name.replace('_', '-')}-{key}"
        client = b.client
        with b.errors("index check", index):
            if client.indices.exists(index=index):
                meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta", {})
                if meta.get("gear_complete") is True and client.count(index=index)["count"] == len(docs):
                    log.info("reusing Elasticsearch index %s", index)
                    return index
                client.indices.delete(index=index)
        meta = {"gear_complete": False, "doc_count": len(docs), "collection": f"griever-{name}"}
        with b.errors("create index", index):
            client.indices.create(index=index, settings=index_settings(b.bm25_params, b.shards, b.replicas, True),
                                  mappings=mappings(kind, b.bm25_params["analyzer"], int(vecs.shape[1]),
                                                    b.knn_params, meta))
        actions = ({"_op_type": "index", "_index": index, "_id": d["id"],
                    "_source": {**d, "pos": i, "embedding": vecs[i].tolist()}} for i, d in enumerate(docs))
        try:
            with b.errors("bulk indexing", index):
                ok, errors = helpers.bulk(client, actions, chunk_size=int(b.bulk_params["chunk_size"]),
                                          raise_on_error=False, stats_only=False)
                if errors:
                    raise ElasticsearchError(f"bulk indexing into '{index}' failed for {len(errors)} documents "
                                             f"(first: {errors[0]})")
                client.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
                client.indices.refresh(index=index)
                count = client.count(index=index)["count"]
            if count != len(docs):
                raise ElasticsearchError(f"index '{index}' holds {count} documents, expected {len(docs)}")
            with b.errors("mark index complete", index):
                client.indices.put_mapping(index=index, meta={**meta, "gear_complete": True})
        except BaseException:
            client.options(ignore_status=404).indices.delete(index=index)
            raise
        return index

    # -- searches -------------------------------------------------------------------------------
    def _msearch(self, index: str, bodies: list[dict], what: str) -> list[list[dict]]:
        b = self.backend
        out: list[list[dict]] = []
        for start in range(0, len(bodies), b.search_batch):
            searches: list[dict] = []
            for body in bodies[start:start + b.search_batch]:
                searches += [{}, body]
            with b.errors(what, index):
                resp = b.client.msearch(index=index, searches=searches)
            for r in resp["responses"]:
                if "error" in r:
                    raise ElasticsearchError(f"{what} on '{index}' failed (HTTP {r.get('status')}): {r['error']}")
                out.append(r["hits"]["hits"])
        return out

    @staticmethod
    def _knn_ranking(hits: list[dict], pos: dict[str, int]) -> Ranking:
        pairs = sorted(((h["_id"], 2.0 * float(h["_score"]) - 1.0) for h in hits), key=lambda p: (-p[1], pos[p[0]]))
        return Ranking([p[0] for p in pairs], [p[1] for p in pairs])

    @staticmethod
    def _bm25_ranking(hits: list[dict]) -> Ranking:
        return Ranking([h["_id"] for h in hits],
                       [float(h["_score"] if h.get("_score") is not None else h["sort"][0]) for h in hits])

    def _size(self, k: int, n: int) -> int:
        return max(0, min(int(k), n, MAX_WINDOW))

    def passage_bm25(self, queries: Sequence[str], k: int, filt: PassageFilter | None = None) -> list[Ranking]:
        size = self._size(k, len(self.passage_pos))
        if size == 0 or not queries:
            return [Ranking() for _ in queries]
        flt, must_not = passage_filter_clauses(filt)
        hits = self._msearch(self.index["passages"], [bm25_query(q, size, flt, must_not) for q in queries],
                             "GRIEVER passage BM25")
        return [self._bm25_ranking(h) for h in hits]

    def passage_knn(self, vector: np.ndarray, k: int, filt: PassageFilter | None = None) -> Ranking:
        size = self._size(k, len(self.passage_pos))
        if size == 0:
            return Ranking()
        flt, must_not = passage_filter_clauses(filt)
        body = knn_query(vector, size, int(self.backend.knn_params["num_candidates"]), flt, must_not)
        return self._knn_ranking(self._msearch(self.index["passages"], [body], "GRIEVER passage kNN")[0],
                                 self.passage_pos)

    def passage_rescore(self, vector: np.ndarray, ids: Sequence[str]) -> Ranking:
        ids = list(dict.fromkeys(ids))
        if not ids:
            return Ranking()
        body = knn_query(vector, len(ids), len(ids), [{"ids": {"values": ids}}], [])
        return self._knn_ranking(self._msearch(self.index["passages"], [body], "GRIEVER composed re-scoring")[0],
                                 self.passage_pos)

    def passage_triples(self, ids: Sequence[str]) -> dict[str, list[str]]:
        """The ``triples`` field of the passages (one ``mget``)."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        b = self.backend
        with b.errors("GRIEVER passage triples", self.index["passages"]):
            resp = b.client.mget(index=self.index["passages"], ids=ids, source=["triples"])
        return {d["_id"]: list(d["_source"].get("triples", [])) for d in resp["docs"] if d.get("found")}

    def unit_bm25(self, query: str, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking:
        if not passage_ids or not anchors:
            return Ranking()
        body = bm25_query(query, self._size(k, len(self.unit_pos)), unit_filter_clauses(passage_ids, anchors), [])
        return self._bm25_ranking(self._msearch(self.index["units"], [body], "GRIEVER unit BM25")[0])

    def unit_knn(self, vector: np.ndarray, k: int, passage_ids: Sequence[str], anchors: Sequence[str]) -> Ranking:
        if not passage_ids or not anchors:
            return Ranking()
        size = self._size(k, len(self.unit_pos))
        body = knn_query(vector, size, int(self.backend.knn_params["num_candidates"]),
                         unit_filter_clauses(passage_ids, anchors), [])
        return self._knn_ranking(self._msearch(self.index["units"], [body], "GRIEVER unit kNN")[0], self.unit_pos)

    def same_as(self, entities: Sequence[str], passage_ids: Sequence[str]) -> dict[str, list[str]]:
        ents = list(dict.fromkeys(entities))
        if not ents or not passage_ids:
            return {}
        body = {"query": {"bool": {"filter": [{"terms": {"entity": ents}},
                                              {"terms": {"passage_ids": sorted(set(passage_ids))}},
                                              {"exists": {"field": "aliases"}}]}},
                "size": self._size(len(ents), MAX_WINDOW), "_source": ["entity", "aliases"],
                "track_total_hits": False}
        hits = self._msearch(self.index["same_as"], [body], "GRIEVER same_as")[0]
        found = {h["_source"]["entity"]: list(h["_source"].get("aliases") or []) for h in hits}
        return {e: found[e] for e in ents if found.get(e)}
