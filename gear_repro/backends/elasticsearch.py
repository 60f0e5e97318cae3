"""Elasticsearch backend: the retrieval contract of ``backends/base.py`` on an ES 8.x/9.x cluster.

One index per collection, named ``<prefix>-<collection>-<content key>`` where the key hashes the
documents (ids, texts, keyword fields), the settings and mapping, and the embedder's model id: a
re-run reuses the index, a changed corpus or model builds a new one. An index counts as built only
when its mapping ``_meta.gear_complete`` is true, set last, after the bulk load reported no failure
and ``_count`` equals the number of documents; an incomplete index is deleted and rebuilt.

Mapping (docs/elasticsearch.md): ``id`` keyword, ``pos`` integer (position in ``ids``, the tie
breaker), ``text`` text (analyzer ``standard`` by default, ES's own, index-level BM25 similarity with k1, b),
``embedding`` dense_vector (cosine, HNSW, excluded from ``_source``), one keyword field per
``IndexDoc.fields`` key (``subject_key``/``object_key``/``passage_id`` for triples).

BM25 (``match``), kNN (``knn`` option) and lookups (``terms``, paged with ``search_after``) run on the
cluster; hybrid RRF stays on the client. ``vectors()`` returns the embedder's on-disk corpus cache
(the matrix the index was loaded from), never 5M vectors pulled back over HTTP.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

import elastic_transport
import elasticsearch
import numpy as np
from elastic_transport.client_utils import DEFAULT
from elasticsearch import Elasticsearch, helpers
from tqdm.auto import tqdm

from gear_repro.backends.base import DocCollection, IndexDoc
from gear_repro.backends.es_requests import (
    MAX_WINDOW,
    BM25Settings,
    BulkSettings,
    KnnSettings,
    bm25_body,
    bulk_actions,
    docs_key,
    index_mappings,
    index_settings,
    knn_body,
    terms_body,
)
from gear_repro.types import Ranking
from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError, DataError, GearError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.secrets import header_secret, redact_url, register_secret
from gear_repro.utils.settings import Settings, check_fields, num, refuse_unknown

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
RESERVED_FIELDS = frozenset({"id", "pos", "text", "embedding"})
MIN_SERVER = (8, 4)  # knn search option with num_candidates
CONNECT_TIMEOUT_S = 10.0  # the start-up info() call: a cluster answers it in milliseconds
CLIENT_MAJOR = int(elasticsearch.__versionstr__.split(".")[0])
ENV = {"url": "ES_URL", "api_key": "ES_API_KEY", "username": "ES_USERNAME", "password": "ES_PASSWORD",
       "ca_certs": "ES_CA_CERTS"}
DEFAULT_URL = "http://localhost:9200"


class ElasticsearchError(GearError):
    """A cluster-side failure (unreachable, missing index, rejected documents, failed query)."""


class DeadlineNode(elastic_transport.Urllib3HttpNode):
    """The client's HTTP node with an overall deadline per request. urllib3's timeout bounds each socket read, so a
    server that trickles its reply (a byte every second) never trips ``backend.request_timeout=5`` and a query
    hangs for as long as it trickles; here the whole request (connect, headers, body) runs in a helper thread and
    fails with the transport's ``ConnectionTimeout`` after the request's timeout, which the client retries like any
    timeout (``backend.max_retries``), as the LLM client's ``llm/deadline.py`` does for its HTTP calls. An abandoned
    request keeps its helper thread (a daemon) until the server stops sending."""

    def perform_request(self, method: str, target: str, body: bytes | None = None, headers: Any = None,
                        request_timeout: Any = DEFAULT) -> Any:
        deadline = self.config.request_timeout if request_timeout is DEFAULT else request_timeout
        if deadline is None:
            return super().perform_request(method, target, body, headers, request_timeout)
        result: dict[str, Any] = {}

        def attempt() -> None:
            try:
                result["response"] = super(DeadlineNode, self).perform_request(method, target, body, headers,
                                                                               request_timeout)
            except BaseException as e:  # handed to the caller's thread
                result["error"] = e

        worker = threading.Thread(target=attempt, name="es-request", daemon=True)
        worker.start()
        worker.join(float(deadline))
        if worker.is_alive():
            raise elastic_transport.ConnectionTimeout(
                f"no complete answer within {float(deadline):g} s (the overall deadline of one request)")
        if "error" in result:
            raise result["error"]
        return result["response"]


def _safe_name(s: str) -> str:
    out = re.sub(r"[^a-z0-9_-]+", "-", s.lower()).strip("-_")
    return out or "x"


@dataclass
class ElasticsearchBackendSettings(Settings):
    """``backend=elasticsearch`` (each field's default and meaning declared here; docs/elasticsearch.md): the schema and :class:`ElasticsearchBackend`'s settings. ``bm25`` / ``knn`` / ``bulk`` are the request
    dataclasses of :mod:`gear_repro.backends.es_requests`."""

    config_key: ClassVar[str] = "backend"

    _target_: str = "gear_repro.backends.elasticsearch.ElasticsearchBackend"
    url: str | None = None  # null: $ES_URL, else http://localhost:9200
    # secrets: leave them null and set the variables, so they never reach the saved run config
    api_key: str | None = None  # null: $ES_API_KEY ("id:key" or the base64 encoded key)
    username: str | None = None  # null: $ES_USERNAME, else "elastic" when a password is set
    password: str | None = None  # null: $ES_PASSWORD (basic auth; api_key wins when both are set)
    ca_certs: str | None = None  # null: $ES_CA_CERTS (PEM of the cluster CA, https only)
    verify_certs: bool = True  # false only for a throwaway test cluster
    # seconds per request as a whole (a trickled reply too; bulk chunks included): DeadlineNode
    request_timeout: float = num(60, gt=0)
    max_retries: int = num(3, ge=0)  # client retries on connection errors and timeouts
    index_prefix: str = "gear"  # index = <prefix>-<collection>-<content hash>
    shards: int = num(1, ge=1)  # > 1 switches searches to dfs_query_then_fetch (global BM25 statistics)
    replicas: int = num(0, ge=0)  # 0: a single node; 1+ on a real cluster for redundancy
    check_version: bool = True  # refuse servers outside 8.4+ / 9.x (the 8.x client's range)
    search_batch: int = num(64, ge=1)  # queries per _msearch request
    lookup_batch: int = num(1000, ge=1)  # values per terms query
    lookup_page: int = num(MAX_WINDOW, ge=1, le=MAX_WINDOW)  # hits per page; larger results page with search_after
    bm25: BM25Settings = field(default_factory=BM25Settings)
    knn: KnnSettings = field(default_factory=KnnSettings)
    bulk: BulkSettings = field(default_factory=BulkSettings)

    def __post_init__(self) -> None:
        for key, cls in (("bm25", BM25Settings), ("knn", KnnSettings), ("bulk", BulkSettings)):
            given = getattr(self, key)
            if not isinstance(given, cls):
                refuse_unknown(f"backend.{key}", given or {}, cls, "ElasticsearchBackend")
                given = cls(**(given or {}))
                setattr(self, key, given)
            check_fields(given, f"backend.{key}")
        super().__post_init__()


class ElasticsearchBackend:
    """Opens :class:`ElasticsearchCollection` s on one cluster; connects (and checks it) on first use.

    ``settings, **given``: :class:`ElasticsearchBackendSettings`. Credentials come from them or, when those are
    None, from ES_URL, ES_API_KEY, ES_USERNAME/ES_PASSWORD and ES_CA_CERTS. They are never logged nor returned by
    ``describe()``.
    """

    name = "elasticsearch"

    def __init__(self, settings: ElasticsearchBackendSettings | None = None, client: Elasticsearch | None = None,
                 **given: Any):
        s = ElasticsearchBackendSettings.of(settings, "ElasticsearchBackend", **given)
        url, api_key, username, password = s.url, s.api_key, s.username, s.password
        self.url = url or os.environ.get(ENV["url"]) or DEFAULT_URL
        # a header value (urllib3's "Invalid header value b'ApiKey <key>\r'" quoted it): stripped, registered, checked
        self._api_key = header_secret(api_key or os.environ.get(ENV["api_key"]), f"backend.api_key (or ${ENV['api_key']})")
        self._username = username or os.environ.get(ENV["username"]) or None
        self._password = password or os.environ.get(ENV["password"]) or None
        register_secret(self._password or "")  # never in an error, log line or failure.json
        if self._password and not self._username:
            self._username = "elastic"
        self.ca_certs = s.ca_certs or os.environ.get(ENV["ca_certs"]) or None
        self.verify_certs = s.verify_certs
        self.request_timeout = s.request_timeout
        self.max_retries = s.max_retries
        self.index_prefix = _safe_name(s.index_prefix)
        self.shards, self.replicas = s.shards, s.replicas
        self.bm25_params, self.knn_params, self.bulk_params = asdict(s.bm25), asdict(s.knn), asdict(s.bulk)
        self.search_batch, self.lookup_batch, self.lookup_page = s.search_batch, s.lookup_batch, s.lookup_page
        self.check_version = s.check_version
        self._client = client
        self._checked = False
        self.server_version: str | None = None
        self.stats = {"built": 0, "reused": 0, "indexed_docs": 0, "rebuilt_incomplete": 0}

    # -- connection -----------------------------------------------------------------------------
    @property
    def auth(self) -> str:
        if self._api_key:
            return "api_key"
        if self._password or urlsplit(self.url).password:
            return "basic"
        return "none"

    def _make_client(self) -> Elasticsearch:
        kw: dict[str, Any] = {"request_timeout": self.request_timeout, "max_retries": self.max_retries,
                              "retry_on_timeout": True, "node_class": DeadlineNode}
        if self._api_key:
            key = self._api_key
            kw["api_key"] = tuple(key.split(":", 1)) if ":" in key else key
        elif self._password:
            kw["basic_auth"] = (self._username, self._password)
        if self.url.startswith("https"):
            kw["verify_certs"] = self.verify_certs
            if self.ca_certs:
                kw["ca_certs"] = self.ca_certs
        try:
            return Elasticsearch(self.url, **kw)
        except ValueError as e:
            raise ConfigError(f"backend.url '{redact_url(self.url)}': {e}") from e

    @property
    def client(self) -> Elasticsearch:
        """The client, connected and version-checked on first access."""
        if self._client is None:
            self._client = self._make_client()
        if not self._checked:
            # a server that accepts the connection and never answers (a dropping firewall, a wrong proxy port)
            # is found in at most 2 x CONNECT_TIMEOUT_S, not request_timeout x (max_retries + 1) (4 minutes)
            with self.errors("connect", timeout=min(self.request_timeout, CONNECT_TIMEOUT_S), attempts=2):
                info = self._client.options(request_timeout=min(self.request_timeout, CONNECT_TIMEOUT_S),
                                            max_retries=1).info()
            self.server_version = str(info["version"]["number"])
            if self.check_version:
                check_server_version(self.server_version, info["version"].get("distribution"),
                                     redact_url(self.url))
            self._checked = True
            log.info("Elasticsearch %s at %s (auth: %s)", self.server_version, redact_url(self.url), self.auth)
        return self._client

    @contextmanager
    def errors(self, what: str, index: str | None = None, timeout: float | None = None,
               attempts: int | None = None) -> Iterator[None]:
        """Translate client exceptions into GearError/ConfigError naming the cause (``timeout`` / ``attempts``: of
        the request, when not ``backend.request_timeout`` / ``backend.max_retries`` + 1)."""
        where = redact_url(self.url)
        try:
            yield
        except GearError:
            raise
        except elasticsearch.AuthenticationException as e:
            raise ConfigError(
                f"Elasticsearch at {where} rejected the credentials (401) during {what}: set backend.api_key / "
                f"{ENV['api_key']} or backend.username+password / {ENV['username']}+{ENV['password']}") from e
        except elasticsearch.AuthorizationException as e:
            raise ConfigError(f"Elasticsearch at {where}: the user lacks privileges for {what} (403): "
                              f"{_reason(e)}") from e
        except elasticsearch.UnsupportedProductError as e:
            raise ConfigError(f"the server at {where} is not Elasticsearch (or older than 7.14); "
                              f"this backend needs Elasticsearch >= {MIN_SERVER[0]}.{MIN_SERVER[1]}") from e
        except elasticsearch.NotFoundError as e:
            if index is not None and "index_not_found" in str(e):
                raise ElasticsearchError(f"index '{index}' is missing on {where} (deleted after it was opened?); "
                                         "open the collection again to rebuild it") from e
            raise ElasticsearchError(f"Elasticsearch {what} at {where}: not found: {_reason(e)}") from e
        except elasticsearch.ApiError as e:
            raise ElasticsearchError(f"Elasticsearch {what} failed at {where} "
                                     f"(HTTP {e.meta.status}): {_reason(e)}") from e
        except elasticsearch.SSLError as e:
            raise ConfigError(f"TLS failure talking to {where}: {e}. Set backend.ca_certs / {ENV['ca_certs']} to "
                              "the cluster's CA certificate (or verify_certs: false for a test cluster)") from e
        except elasticsearch.ConnectionTimeout as e:
            per, n = timeout or self.request_timeout, attempts or self.max_retries + 1
            raise ElasticsearchError(f"Elasticsearch at {where} timed out during {what}: no answer in {n} attempt(s) "
                                     f"of {per:g} s (backend.request_timeout={self.request_timeout:g}, "
                                     f"backend.max_retries={self.max_retries}); is backend.url the cluster's "
                                     "HTTP port?") from e
        except elasticsearch.ConnectionError as e:
            raise ElasticsearchError(f"Elasticsearch unreachable at {where} during {what}: {e}. "
                                     "Is the cluster running and backend.url / ES_URL right?") from e

    def describe(self) -> dict:
        """Settings for run records: no secrets, URL without credentials."""
        return {"name": self.name, "url": redact_url(self.url), "auth": self.auth, "index_prefix": self.index_prefix,
                "shards": self.shards, "replicas": self.replicas, "bm25": self.bm25_params, "knn": self.knn_params,
                "bulk": {k: v for k, v in self.bulk_params.items() if k != "progress"},
                "server_version": self.server_version, "client_version": elasticsearch.__versionstr__}

    def __repr__(self) -> str:
        return f"ElasticsearchBackend(url={redact_url(self.url)!r}, auth={self.auth!r}, prefix={self.index_prefix!r})"

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- collections ----------------------------------------------------------------------------
    def index_name(self, name: str, docs: Sequence[IndexDoc], embedder=None) -> str:
        """The content-stamped index name for ``docs`` under this backend's settings and ``embedder``."""
        fields = _keyword_fields(docs)
        key = hash_obj({
            "v": SCHEMA_VERSION, "docs": docs_key(docs),
            "settings": index_settings(self.bm25_params, self.shards, 0, False),
            "mappings": index_mappings(self.bm25_params, fields, 0 if embedder is not None else None,
                                       self.knn_params),
            "embedder": embedder.model_id if embedder is not None else None,
        }, 12)
        return f"{self.index_prefix}-{_safe_name(name)}-{key}"

    def open_collection(self, name: str, docs: Sequence[IndexDoc], embedder=None) -> ElasticsearchCollection:
        """Reuse the complete index for (docs, settings, embedder) or build it."""
        docs = list(docs)
        if not docs:
            raise ValueError(f"collection '{name}' has no documents")
        seen: set[str] = set()
        for d in docs:
            if d.id in seen:
                raise DataError(f"collection '{name}': duplicate document id '{d.id}'")
            seen.add(d.id)
        fields = _keyword_fields(docs)
        clash = RESERVED_FIELDS.intersection(fields)
        if clash:
            raise ConfigError(f"collection '{name}': document fields {sorted(clash)} clash with the index's own "
                              f"fields {sorted(RESERVED_FIELDS)}")
        index = self.index_name(name, docs, embedder)
        reused = self._reusable(index, len(docs))
        if reused:
            self.stats["reused"] += 1
            log.info("reusing Elasticsearch index %s (%d docs)", index, len(docs))
        else:
            self._build(index, name, docs, fields, embedder)
        return ElasticsearchCollection(self, name, index, docs, fields, embedder, reused=reused)

    def _reusable(self, index: str, n: int) -> bool:
        client = self.client
        with self.errors("index check", index):
            if not client.indices.exists(index=index):
                return False
            meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta", {})
            count = client.count(index=index)["count"]
        if meta.get("gear_complete") is True and meta.get("doc_count") == n == count:
            return True
        log.warning("index %s exists but is incomplete (complete=%s, %s of %d docs): deleting and rebuilding",
                    index, meta.get("gear_complete"), count, n)
        self.stats["rebuilt_incomplete"] += 1
        with self.errors("delete incomplete index", index):
            client.indices.delete(index=index)
        return False

    def _build(self, index: str, name: str, docs: list[IndexDoc], fields: list[str], embedder) -> None:
        client = self.client
        bp = self.bulk_params
        vecs = None
        if embedder is not None:
            vecs = np.asarray(embedder.encode_corpus([d.text for d in docs], desc=name), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(docs):
                raise GearError(f"embedder returned {vecs.shape} vectors for {len(docs)} '{name}' docs")
        meta = {"gear_complete": False, "doc_count": len(docs), "collection": name, "schema": SCHEMA_VERSION,
                "embedder": embedder.model_id if embedder is not None else None}
        body_settings = index_settings(self.bm25_params, self.shards, self.replicas, bool(bp["pause_refresh"]))
        body_mappings = index_mappings(self.bm25_params, fields, None if vecs is None else int(vecs.shape[1]),
                                       self.knn_params, meta)
        with self.errors("create index", index):
            client.indices.create(index=index, settings=body_settings, mappings=body_mappings)
        log.info("building Elasticsearch index %s: %d docs%s", index, len(docs),
                 "" if vecs is None else f", {vecs.shape[1]}-d vectors")
        try:
            ok, failures = self._bulk_load(index, name, docs, vecs)
            if failures:
                shown = "; ".join(f"{fid}: {why}" for fid, why in failures[:5])
                raise ElasticsearchError(
                    f"bulk indexing into '{index}' failed for {len(failures)} of {len(docs)} documents "
                    f"(first: {shown}); the partial index was deleted")
            with self.errors("finish index", index):
                if bp["pause_refresh"]:
                    client.indices.put_settings(index=index, settings={"index": {"refresh_interval": None}})
                client.indices.refresh(index=index)
                count = client.count(index=index)["count"]
            if count != len(docs) or ok != len(docs):
                raise ElasticsearchError(f"index '{index}' holds {count} documents after the bulk load "
                                         f"({ok} acknowledged), expected {len(docs)}; the partial index was deleted")
            with self.errors("mark index complete", index):
                client.indices.put_mapping(index=index, meta={**meta, "gear_complete": True})
        except BaseException:
            self._drop(index)
            raise
        self.stats["built"] += 1
        self.stats["indexed_docs"] += len(docs)

    def _bulk_load(self, index: str, name: str, docs: list[IndexDoc],
                   vecs: np.ndarray | None) -> tuple[int, list[tuple[str, str]]]:
        bp = self.bulk_params
        client = self.client
        common = {"chunk_size": int(bp["chunk_size"]), "raise_on_error": False, "raise_on_exception": False}
        actions = bulk_actions(index, docs, vecs)
        if int(bp["threads"]) > 1:
            stream: Iterable = helpers.parallel_bulk(client, actions, thread_count=int(bp["threads"]), **common)
        else:
            stream = helpers.streaming_bulk(client, actions, max_retries=int(bp["max_retries"]), **common)
        ok = 0
        failures: list[tuple[str, str]] = []
        with self.errors("bulk indexing", index), tqdm(total=len(docs), unit="doc", desc=f"indexing {name}",
                                                       disable=not bp["progress"]) as bar:
            for success, item in stream:
                if success:
                    ok += 1
                else:
                    res = next(iter(item.values()), {})
                    err = res.get("error") or res.get("exception") or res
                    if isinstance(err, dict):
                        err = f"{err.get('type', '')}: {err.get('reason', '')}"
                    failures.append((str(res.get("_id")), f"HTTP {res.get('status')} {err}"))
                    log.error("bulk: document %s rejected: %s", res.get("_id"), err)
                bar.update(1)
        return ok, failures

    def _drop(self, index: str) -> None:
        try:
            self.client.options(ignore_status=404).indices.delete(index=index)
        except Exception as e:  # best effort while another error propagates
            log.warning("could not delete partial index %s: %s", index, e)


def check_server_version(number: str, distribution: str | None, where: str) -> None:
    """Server must be Elasticsearch >= 8.4 with major 8 or 9 (the 8.x client's compatibility range)."""
    if distribution and distribution != "elasticsearch":
        raise ConfigError(f"the server at {where} is {distribution} {number}, not Elasticsearch")
    try:
        major, minor = (int(x) for x in number.split(".")[:2])
    except ValueError as e:
        raise ConfigError(f"unparseable Elasticsearch version '{number}' at {where}") from e
    if major not in (CLIENT_MAJOR, CLIENT_MAJOR + 1) or (major, minor) < MIN_SERVER:
        raise ConfigError(
            f"version mismatch: Elasticsearch server {number} at {where}, client elasticsearch-py "
            f"{elasticsearch.__versionstr__}; this client works with servers {MIN_SERVER[0]}.{MIN_SERVER[1]}+ "
            f"of major {CLIENT_MAJOR} or {CLIENT_MAJOR + 1} (set backend.check_version=false to try anyway)")


def _reason(e: elasticsearch.ApiError) -> str:
    body = e.body if isinstance(e.body, dict) else {}
    err = body.get("error")
    if isinstance(err, dict):
        root = (err.get("root_cause") or [err])[0]
        return f"{root.get('type', err.get('type'))}: {root.get('reason', err.get('reason'))}"
    return str(err or e.message)


def _keyword_fields(docs: Sequence[IndexDoc]) -> list[str]:
    return sorted({k for d in docs for k in d.fields})


# -- collection -----------------------------------------------------------------------------

class ElasticsearchCollection(DocCollection):
    """A passage or triple index on the cluster; ``ids`` order is the load order (``pos``)."""

    def __init__(self, backend: ElasticsearchBackend, name: str, index: str, docs: list[IndexDoc],
                 fields: list[str], embedder=None, *, reused: bool = False):
        super().__init__(name, docs, embedder)
        self.backend = backend
        self.index = index
        self.reused = reused
        self.fields = fields
        self._pos: dict[str, int] | None = None

    def __repr__(self) -> str:
        return f"ElasticsearchCollection({self.name!r}, index={self.index!r}, n={len(self)})"

    def _msearch(self, bodies: list[dict], what: str) -> list[list[dict]]:
        """Hits per body, in batches of ``backend.search_batch``; any failed search raises."""
        b = self.backend
        client = b.client
        params = {"search_type": "dfs_query_then_fetch"} if b.shards > 1 else {}
        out: list[list[dict]] = []
        for start in range(0, len(bodies), b.search_batch):
            chunk = bodies[start:start + b.search_batch]
            searches: list[dict] = []
            for body in chunk:
                searches += [{}, body]
            with b.errors(what, self.index):
                resp = client.msearch(index=self.index, searches=searches, **params)
            for r in resp["responses"]:
                if "error" in r:
                    err = r["error"]
                    if isinstance(err, dict) and err.get("type") == "index_not_found_exception":
                        raise ElasticsearchError(f"index '{self.index}' is missing (deleted after it was opened?); "
                                                 "open the collection again to rebuild it")
                    raise ElasticsearchError(f"{what} on '{self.index}' failed (HTTP {r.get('status')}): {err}")
                out.append(r["hits"]["hits"])
        return out

    def _size(self, k: int) -> int:
        size = min(int(k), len(self._ids), MAX_WINDOW)
        if k > MAX_WINDOW and size == MAX_WINDOW:
            log.warning("k=%d capped at Elasticsearch's result window %d", k, MAX_WINDOW)
        return size

    # -- BM25 --------------------------------------------------------------------------------
    def bm25(self, queries: Sequence[str], k: int) -> list[Ranking]:
        queries = list(queries)
        size = self._size(k)
        if size <= 0 or not queries:
            return [Ranking() for _ in queries]
        hits = self._msearch([bm25_body(q, size) for q in queries], "BM25 search")
        return [Ranking([h["_id"] for h in hs], [float(h["_score"] if h.get("_score") is not None else h["sort"][0])
                                                  for h in hs]) for hs in hits]

    # -- dense -------------------------------------------------------------------------------
    def knn(self, vectors: np.ndarray, k: int) -> list[Ranking]:
        """Cosine top-k; ES scores (1 + cos) / 2 are mapped back to cos. Ties: document position."""
        self._need_vectors()
        q = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
        size = self._size(k)
        if size <= 0 or q.shape[0] == 0:
            return [Ranking() for _ in range(q.shape[0])]
        nc = min(MAX_WINDOW, max(size, int(self.backend.knn_params["num_candidates"])))
        hits = self._msearch([knn_body(v, size, nc) for v in q], "kNN search")
        pos = self._positions()
        out = []
        for hs in hits:
            pairs = sorted(((h["_id"], 2.0 * float(h["_score"]) - 1.0) for h in hs), key=lambda p: (-p[1], pos[p[0]]))
            out.append(Ranking([p[0] for p in pairs], [p[1] for p in pairs]))
        return out

    def _positions(self) -> dict[str, int]:
        if self._pos is None:
            self._pos = {d: i for i, d in enumerate(self._ids)}
        return self._pos

    # -- keyword fields ------------------------------------------------------------------------
    def lookup(self, field_name: str, values: Sequence[str]) -> dict[str, list[str]]:
        """value -> ids (document order) whose ``field_name`` equals it; unknown fields give no ids."""
        uniq = list(dict.fromkeys(values))
        table: dict[str, list[str]] = {}
        if field_name in self.fields and uniq:
            b = self.backend
            client = b.client
            for start in range(0, len(uniq), b.lookup_batch):
                chunk = uniq[start:start + b.lookup_batch]
                after: list | None = None
                while True:
                    with b.errors(f"lookup on '{field_name}'", self.index):
                        resp = client.search(index=self.index, **terms_body(field_name, chunk, b.lookup_page, after))
                    hs = resp["hits"]["hits"]
                    for h in hs:
                        table.setdefault(h["_source"][field_name], []).append(h["_id"])
                    if len(hs) < b.lookup_page:
                        break
                    after = hs[-1]["sort"]
        return {v: list(table.get(v, [])) for v in values}

# the registry's declaration (gear_repro/registry.py); Resources builds the backend from its node
COMPONENTS = (Component("backend", "elasticsearch_schema", ElasticsearchBackendSettings,
                        ElasticsearchBackendSettings._target_),)
