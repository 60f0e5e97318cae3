"""Elasticsearch backend unit tests: exact request bodies and bulk payloads (captured at the client's
transport), credential handling, and fault handling (unreachable, 401/403, version mismatch, missing
index, partial bulk failure). Tests that need the noida-db emulator are marked ``es``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

import numpy as np
import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig, Transport, TransportApiResponse
from elasticsearch import Elasticsearch

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.elasticsearch import (
    ElasticsearchBackend,
    ElasticsearchError,
    check_server_version,
)
from gear_repro.backends.es_requests import bm25_body, index_mappings, knn_body, terms_body
from gear_repro.utils.errors import ConfigError, DataError
from gear_repro.utils.secrets import redact_url
from tests.helpers import es_fixtures
from tests.helpers.doubles import TableEmbedder
from tests.helpers.es_fixtures import LoopbackServer, free_port

noida_url = es_fixtures.noida_url  # session fixture, registered here by name

INFO = {"name": "fake", "cluster_name": "fake", "version": {"number": "8.15.3", "build_flavor": "default"},
        "tagline": "You Know, for Search"}
DOCS = [IndexDoc("a", "Alpha river", {"subject_key": "alpha", "passage_id": "p1"}),
        IndexDoc("b", "Beta mountain", {"subject_key": "beta", "passage_id": "p1"}),
        IndexDoc("c", "Gamma river delta", {"subject_key": "alpha", "passage_id": "p2"})]


# -- a transport that records requests and answers like a small cluster ----------------------------

class FakeTransport(Transport):
    """Records (method, path, query, body, headers); answers from ``routes`` or a default fake cluster."""

    def __init__(self, routes: dict[tuple[str, str], Callable] | None = None):
        super().__init__([NodeConfig("http", "fake.invalid", 9200)])
        self.routes = routes or {}
        self.calls: list[dict] = []
        self.indices: dict[str, dict] = {}

    def perform_request(self, method, target, *, body=None, headers=None, **kw):  # type: ignore[override]
        path, _, query = target.partition("?")
        if isinstance(body, list):  # ndjson (bulk, msearch): lines as dicts
            body = [json.loads(x) if isinstance(x, str | bytes) else x for x in body]
        call = {"method": method, "path": path, "query": parse_qs(query), "body": body, "headers": dict(headers or {})}
        self.calls.append(call)
        handler = self.routes.get((method, path)) or self.routes.get((method, "*" + path.rsplit("/", 1)[-1]))
        status, resp = handler(call) if handler else self.default(call)
        meta = ApiResponseMeta(status=status, http_version="1.1", duration=0.0, node=self.node_pool.get().config,
                               headers=HttpHeaders({"x-elastic-product": "Elasticsearch"}))
        return TransportApiResponse(meta, resp)

    def default(self, call: dict) -> tuple[int, object]:
        m, p, body = call["method"], call["path"], call["body"]
        parts = p.strip("/").split("/")
        if p == "/":
            return 200, INFO
        if m == "HEAD":
            return (200 if parts[0] in self.indices else 404), None
        if m == "PUT" and len(parts) == 1 and parts[0] != "_bulk":
            self.indices[parts[0]] = {"body": body, "docs": 0, "meta": body["mappings"].get("_meta", {})}
            return 200, {"acknowledged": True, "index": parts[0]}
        if parts[-1] == "_bulk":
            items = []
            for header in body[::2]:
                h = header["index"]
                self.indices[h["_index"]]["docs"] += 1
                items.append({"index": {"_index": h["_index"], "_id": h["_id"], "status": 201, "result": "created"}})
            return 200, {"errors": False, "items": items, "took": 1}
        if parts[-1] == "_count":
            return 200, {"count": self.indices[parts[0]]["docs"]}
        if parts[-1] == "_mapping" and m == "PUT":
            self.indices[parts[0]]["meta"] = body["_meta"]
            return 200, {"acknowledged": True}
        if parts[-1] == "_mapping":
            return 200, {parts[0]: {"mappings": {"_meta": self.indices[parts[0]]["meta"]}}}
        if parts[-1] == "_msearch":
            return 200, {"responses": [{"status": 200, "hits": {"hits": []}} for _ in body[1::2]]}
        if parts[-1] == "_search":
            return 200, {"hits": {"hits": []}}
        return 200, {"acknowledged": True}

    def paths(self, method: str | None = None) -> list[str]:
        return [c["path"] for c in self.calls if method is None or c["method"] == method]


def make_backend(transport: FakeTransport | None = None, **kw) -> tuple[ElasticsearchBackend, FakeTransport]:
    t = transport or FakeTransport()
    kw.setdefault("bulk", {"progress": False})
    return ElasticsearchBackend(url="http://fake.invalid:9200", client=Elasticsearch(_transport=t), **kw), t


# -- exact bodies -----------------------------------------------------------------------------

def test_index_creation_and_bulk_payload_exact():
    be, t = make_backend(bulk={"progress": False, "chunk_size": 2}, knn={"num_candidates": 50})
    emb = TableEmbedder(dim=3)
    coll = be.open_collection("Triples!", DOCS, emb)
    assert coll.index.startswith("gear-triples-") and len(coll.index) == len("gear-triples-") + 12
    create = next(c for c in t.calls if c["method"] == "PUT" and c["path"] == f"/{coll.index}")
    assert create["body"]["settings"] == {"index": {
        "number_of_shards": 1, "number_of_replicas": 0, "refresh_interval": "-1",
        "similarity": {"gear_bm25": {"type": "BM25", "k1": 1.2, "b": 0.75}}}}
    assert create["body"]["mappings"] == {
        "dynamic": "strict",
        "_source": {"excludes": ["embedding"]},
        "_meta": {"gear_complete": False, "doc_count": 3, "collection": "Triples!", "schema": 1,
                  "embedder": "table"},
        "properties": {
            "id": {"type": "keyword"},
            "pos": {"type": "integer"},
            "text": {"type": "text", "analyzer": "standard", "similarity": "gear_bm25"},  # ES's default (App. B.1)
            "passage_id": {"type": "keyword"},
            "subject_key": {"type": "keyword"},
            "embedding": {"type": "dense_vector", "dims": 3, "index": True, "similarity": "cosine",
                          "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100}},
        }}
    bulks = [c for c in t.calls if c["path"] == "/_bulk"]
    assert len(bulks) == 2  # chunk_size 2, 3 docs
    lines = bulks[0]["body"] + bulks[1]["body"]
    vec = emb.encode([d.text for d in DOCS])
    assert lines[0] == {"index": {"_index": coll.index, "_id": "a"}}
    assert lines[1] == {"id": "a", "pos": 0, "text": "Alpha river", "subject_key": "alpha", "passage_id": "p1",
                        "embedding": pytest.approx(vec[0].tolist())}
    assert [x["index"]["_id"] for x in lines[::2]] == ["a", "b", "c"]
    assert [x["pos"] for x in lines[1::2]] == [0, 1, 2]
    # order of the finishing requests: refresh back on, refresh, count, then the completion flag last
    tail = [(c["method"], c["path"].rsplit("/", 1)[-1]) for c in t.calls[-4:]]
    assert tail == [("PUT", "_settings"), ("POST", "_refresh"), ("POST", "_count"), ("PUT", "_mapping")]
    assert t.calls[-4]["body"] == {"index": {"refresh_interval": None}}
    assert t.calls[-1]["body"] == {"_meta": {"gear_complete": True, "doc_count": 3, "collection": "Triples!",
                                             "schema": 1, "embedder": "table"}}


def test_bm25_msearch_body_exact_and_batched():
    be, t = make_backend(search_batch=2)
    coll = be.open_collection("p", DOCS)
    t.calls.clear()
    coll.bm25(["river", "mountain", "delta"], 10)
    ms = [c for c in t.calls if c["path"].endswith("/_msearch")]
    assert [c["path"] for c in ms] == [f"/{coll.index}/_msearch"] * 2  # 3 queries, batches of 2
    assert ms[0]["body"] == [{}, {"query": {"match": {"text": {"query": "river"}}}, "size": 3,
                                  "sort": ["_score", {"pos": "asc"}], "_source": False, "track_total_hits": False},
                             {}, bm25_body("mountain", 3)]
    assert ms[1]["body"] == [{}, bm25_body("delta", 3)]
    assert "search_type" not in ms[0]["query"]


def test_bm25_parses_hits_and_uses_dfs_with_shards():
    def msearch(call):
        hits = [{"_id": "c", "_score": 2.5, "sort": [2.5, 2]}, {"_id": "a", "_score": None, "sort": [1.0, 0]}]
        return 200, {"responses": [{"status": 200, "hits": {"hits": hits}}]}

    be, t = make_backend(FakeTransport({("POST", "*_msearch"): msearch}), shards=3)
    r = be.open_collection("p", DOCS).bm25(["river"], 2)[0]
    assert r.ids == ["c", "a"] and r.scores == [2.5, 1.0]
    ms = next(c for c in t.calls if c["path"].endswith("/_msearch"))
    assert ms["query"]["search_type"] == ["dfs_query_then_fetch"]


def test_knn_body_exact_and_cosine_scores():
    def msearch(call):
        return 200, {"responses": [{"status": 200, "hits": {"hits": [{"_id": "b", "_score": 0.75},
                                                                     {"_id": "a", "_score": 0.75},
                                                                     {"_id": "c", "_score": 0.5}]}}]}

    be, t = make_backend(FakeTransport({("POST", "*_msearch"): msearch}), knn={"num_candidates": 2})
    coll = be.open_collection("p", DOCS, TableEmbedder(dim=3))
    r = coll.knn(np.array([[1.0, 0.0, 0.0]], np.float32), 3)[0]
    assert r.ids == ["a", "b", "c"]  # tie at 0.75 broken by position
    assert r.scores == pytest.approx([0.5, 0.5, 0.0])  # ES cosine score (1 + cos) / 2 -> cos
    ms = next(c for c in t.calls if c["path"].endswith("/_msearch"))
    assert ms["body"] == [{}, {"knn": {"field": "embedding", "query_vector": [1.0, 0.0, 0.0], "k": 3,
                                       "num_candidates": 3}, "size": 3, "_source": False}]
    assert knn_body([0.5], 5, 100)["knn"]["num_candidates"] == 100


def test_lookup_terms_body_paging_and_chunking():
    pages = {
        None: [{"_id": "a", "_source": {"subject_key": "alpha"}, "sort": [0]},
               {"_id": "b", "_source": {"subject_key": "beta"}, "sort": [1]}],
        (1,): [{"_id": "c", "_source": {"subject_key": "alpha"}, "sort": [2]}],
    }

    def search(call):
        after = call["body"].get("search_after")
        if "alpha" not in call["body"]["query"]["terms"]["subject_key"]:
            return 200, {"hits": {"hits": []}}
        return 200, {"hits": {"hits": pages.get(tuple(after) if after else None, [])}}

    be, t = make_backend(FakeTransport({("POST", "*_search"): search}), lookup_page=2, lookup_batch=2)
    coll = be.open_collection("t", DOCS)
    t.calls.clear()
    got = coll.lookup("subject_key", ["alpha", "beta", "alpha", "zeta"])
    assert got == {"alpha": ["a", "c"], "beta": ["b"], "zeta": []}
    bodies = [c["body"] for c in t.calls]
    assert bodies[0] == {"query": {"terms": {"subject_key": ["alpha", "beta"]}}, "size": 2, "sort": [{"pos": "asc"}],
                         "_source": ["subject_key"], "track_total_hits": False}
    assert bodies[1] == terms_body("subject_key", ["alpha", "beta"], 2, [1])
    assert bodies[2]["query"] == {"terms": {"subject_key": ["zeta"]}}  # second chunk of values
    assert len(bodies) == 3
    t.calls.clear()
    assert coll.lookup("unknown_field", ["x"]) == {"x": []} and t.calls == []


def test_reuse_complete_index_sends_no_bulk():
    t = FakeTransport()
    be, _ = make_backend(t)
    first = be.open_collection("p", DOCS)
    n_bulk = t.paths().count("/_bulk")
    again, _ = make_backend(t)
    coll = again.open_collection("p", DOCS)
    assert coll.index == first.index and coll.reused
    assert t.paths().count("/_bulk") == n_bulk
    assert again.stats == {"built": 0, "reused": 1, "indexed_docs": 0, "rebuilt_incomplete": 0}


def test_incomplete_index_is_deleted_and_rebuilt():
    t = FakeTransport()
    be, _ = make_backend(t)
    name = be.index_name("p", DOCS)
    t.indices[name] = {"body": {}, "docs": 2, "meta": {"gear_complete": False, "doc_count": 3}}
    be.open_collection("p", DOCS)
    assert ("DELETE", f"/{name}") in [(c["method"], c["path"]) for c in t.calls]
    assert be.stats["rebuilt_incomplete"] == 1 and be.stats["built"] == 1


def test_index_name_stamps_docs_fields_settings_and_model():
    be, _ = make_backend()
    base = be.index_name("p", DOCS, TableEmbedder())
    assert base == be.index_name("p", list(DOCS), TableEmbedder())
    changed_field = [DOCS[0], DOCS[1], IndexDoc("c", DOCS[2].text, {"subject_key": "other", "passage_id": "p2"})]
    variants = [
        be.index_name("p", changed_field, TableEmbedder()),
        be.index_name("p", DOCS[::-1], TableEmbedder()),
        be.index_name("p", DOCS, TableEmbedder(model_id="other-model")),
        be.index_name("p", DOCS, None),
        make_backend(bm25={"k1": 0.9})[0].index_name("p", DOCS, TableEmbedder()),
        make_backend(bm25={"analyzer": "english"})[0].index_name("p", DOCS, TableEmbedder()),
        make_backend(knn={"index_type": "int8_hnsw"})[0].index_name("p", DOCS, TableEmbedder()),
    ]
    assert len({base, *variants}) == len(variants) + 1
    # settings that do not change results do not change the stamp
    assert make_backend(replicas=2, bulk={"chunk_size": 7})[0].index_name("p", DOCS, TableEmbedder()) == base


def test_pure_body_helpers():
    assert index_mappings({"analyzer": "english"}, [], None, {})["properties"]["text"]["similarity"] == "gear_bm25"
    assert "embedding" not in index_mappings({"analyzer": "english"}, [], None, {})["properties"]
    flat = index_mappings({"analyzer": "english"}, [], 4, {"index_type": "flat"})
    assert flat["properties"]["embedding"]["index_options"] == {"type": "flat"}


# -- input and config validation ------------------------------------------------------------------

def test_validation_errors():
    be, _ = make_backend()
    with pytest.raises(DataError, match="duplicate document id 'a'"):
        be.open_collection("p", [DOCS[0], DOCS[0]])
    with pytest.raises(ConfigError, match="clash"):
        be.open_collection("p", [IndexDoc("x", "t", {"text": "y"})])
    with pytest.raises(ValueError, match="no documents"):
        be.open_collection("p", [])
    with pytest.raises(ConfigError, match=r"backend\.bm25\.k_1 is not a setting of backend\.bm25"):
        ElasticsearchBackend(bm25={"k_1": 1.0})
    with pytest.raises(ConfigError, match="num_candidates"):
        ElasticsearchBackend(knn={"num_candidates": 20000})


# -- secrets ----------------------------------------------------------------------------------

def test_credentials_from_env_never_leak(monkeypatch, caplog):
    monkeypatch.setenv("ES_API_KEY", "sekrit-key-123")
    monkeypatch.setenv("ES_PASSWORD", "hunter2-pw")
    t = FakeTransport()
    be = ElasticsearchBackend(url="https://user:pw-in-url@fake.invalid:9200", bulk={"progress": False})
    assert be.auth == "api_key"
    with caplog.at_level(logging.DEBUG):
        be._client = Elasticsearch(_transport=t, api_key="sekrit-key-123")
        be.open_collection("p", DOCS)
    text = json.dumps(be.describe()) + repr(be) + caplog.text
    for secret in ("sekrit-key-123", "hunter2-pw", "pw-in-url"):
        assert secret not in text
    assert be.describe()["url"] == "https://***@fake.invalid:9200"
    kw_client = be._make_client()  # the real client gets the key as an Authorization header
    assert kw_client._headers["authorization"] == "ApiKey sekrit-key-123"


def test_an_api_key_with_a_carriage_return_is_stripped_and_never_quoted(monkeypatch):
    """ES_API_KEY from a CRLF .env file ends in a CR: urllib3 refused the header with "Invalid header value b'ApiKey
    <key>\\r'", a raw ValueError quoting the key into the console and failure.json (the key was not a registered
    secret). Now stripped; a control character inside is a ConfigError that names the variable, not the value."""
    from gear_repro.utils.secrets import redact_text

    monkeypatch.setenv("ES_API_KEY", "crlf-es-key-77\r")
    be = ElasticsearchBackend(url="http://h:9200")
    assert be._make_client()._headers["authorization"] == "ApiKey crlf-es-key-77"
    assert redact_text("b'ApiKey crlf-es-key-77\\r'") == "b'ApiKey ***\\r'"
    monkeypatch.setenv("ES_API_KEY", "inner\nes-key-78")
    with pytest.raises(ConfigError, match=r"\$ES_API_KEY\) holds a character an HTTP header cannot carry") as err:
        ElasticsearchBackend(url="http://h:9200")
    assert "es-key-78" not in str(err.value)


def test_basic_auth_and_config_wins_over_env(monkeypatch):
    monkeypatch.setenv("ES_PASSWORD", "from-env")
    monkeypatch.delenv("ES_API_KEY", raising=False)
    monkeypatch.delenv("ES_USERNAME", raising=False)
    be = ElasticsearchBackend(url="http://h:9200")
    assert be.auth == "basic" and be._username == "elastic"
    assert be._make_client()._headers["authorization"].startswith("Basic ")
    be2 = ElasticsearchBackend(url="http://h:9200", api_key="id:key")
    assert be2.auth == "api_key"


def test_redact_url():
    assert redact_url("https://u:p@h:9243/x") == "https://***@h:9243/x"
    assert redact_url("http://localhost:9200") == "http://localhost:9200"


# -- faults: unreachable, auth, version --------------------------------------------------------

class _FakeServer(LoopbackServer):
    """A tiny HTTP server answering every request with one status, JSON body and header set."""

    def __init__(self, status: int, body: dict, product: bool = True):
        outer = self

        class H(BaseHTTPRequestHandler):
            def _answer(self):
                data = json.dumps(outer.body).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                if outer.product:
                    self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *a):
                pass

        self.status, self.body, self.product = status, body, product
        super().__init__(H)


@pytest.fixture
def fake_server() -> Iterator[Callable[..., _FakeServer]]:
    yield _FakeServer


def test_unreachable_cluster():
    url = f"http://127.0.0.1:{free_port()}"
    be = ElasticsearchBackend(url=url, max_retries=0, request_timeout=2)
    with pytest.raises(ElasticsearchError, match=f"unreachable at {url}"):
        be.open_collection("p", DOCS)


def test_a_server_that_never_answers_is_found_at_start_up(monkeypatch):
    """A listener that accepts and never answers (a dropping firewall, a wrong proxy port) took request_timeout x
    (max_retries + 1) = 4 minutes; the start-up check has its own short timeout and says what it waited."""
    import socket
    import time

    import gear_repro.backends.elasticsearch as es

    monkeypatch.setattr(es, "CONNECT_TIMEOUT_S", 0.5)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://u:SECRET1@127.0.0.1:{listener.getsockname()[1]}"
        t0 = time.perf_counter()
        with pytest.raises(ElasticsearchError) as e:
            ElasticsearchBackend(url=url).open_collection("p", DOCS)
    assert time.perf_counter() - t0 < 10
    assert str(e.value) == (f"Elasticsearch at http://***@127.0.0.1:{url.rsplit(':', 1)[1]} timed out during connect: "
                            "no answer in 2 attempt(s) of 0.5 s (backend.request_timeout=60, backend.max_retries=3); "
                            "is backend.url the cluster's HTTP port?")


def test_auth_failure_401(fake_server, monkeypatch):
    monkeypatch.delenv("ES_API_KEY", raising=False)
    body = {"error": {"type": "security_exception", "reason": "unable to authenticate user"}, "status": 401}
    with fake_server(401, body) as url:
        be = ElasticsearchBackend(url=url, password="wrong", max_retries=0)
        with pytest.raises(ConfigError, match=r"rejected the credentials \(401\).*ES_API_KEY"):
            be.open_collection("p", DOCS)


def test_authorization_failure_403(fake_server):
    body = {"error": {"type": "security_exception", "reason": "action [indices:admin/create] is unauthorized"},
            "status": 403}
    with fake_server(403, body) as url, pytest.raises(ConfigError, match=r"lacks privileges.*unauthorized"):
        ElasticsearchBackend(url=url, max_retries=0).open_collection("p", DOCS)


@pytest.mark.parametrize("version", ["7.17.9", "8.3.0", "10.0.0"])
def test_version_mismatch(fake_server, version):
    with fake_server(200, {**INFO, "version": {"number": version}}) as url:
        with pytest.raises(ConfigError, match=f"version mismatch: Elasticsearch server {version}"):
            ElasticsearchBackend(url=url, max_retries=0).open_collection("p", DOCS)
        be = ElasticsearchBackend(url=url, max_retries=0, check_version=False)
        _ = be.client  # the check can be switched off
        assert be.server_version == version


def test_version_rules():
    check_server_version("8.4.0", None, "x")
    check_server_version("9.1.2", "elasticsearch", "x")  # ES 9 serves the 8.x client (compatible-with=8)
    with pytest.raises(ConfigError, match="opensearch"):
        check_server_version("2.11.0", "opensearch", "x")


def test_not_elasticsearch(fake_server):
    with fake_server(200, INFO, product=False) as url, pytest.raises(ConfigError, match="not Elasticsearch"):
        ElasticsearchBackend(url=url, max_retries=0).open_collection("p", DOCS)


# -- faults: bulk ---------------------------------------------------------------------------------

def _failing_bulk(call):
    items = []
    for header in call["body"][::2]:
        _id = header["index"]["_id"]
        if _id == "b":
            items.append({"index": {"_id": _id, "status": 400, "error": {
                "type": "document_parsing_exception", "reason": "failed to parse field [text]"}}})
        else:
            items.append({"index": {"_id": _id, "status": 201, "result": "created"}})
    return 200, {"errors": True, "items": items}


def test_partial_bulk_failure_fails_loudly_and_deletes(caplog):
    t = FakeTransport({("PUT", "/_bulk"): _failing_bulk})
    be, _ = make_backend(t)
    with pytest.raises(ElasticsearchError, match=r"failed for 1 of 3 documents \(first: b: HTTP 400 "
                                                 r"document_parsing_exception: failed to parse field \[text\]\)"):
        be.open_collection("p", DOCS)
    name = be.index_name("p", DOCS)
    assert ("DELETE", f"/{name}") in [(c["method"], c["path"]) for c in t.calls]
    assert not any(c["path"].endswith("/_mapping") and c["method"] == "PUT" for c in t.calls)  # never complete
    assert "document b rejected" in caplog.text


def test_count_mismatch_fails():
    t = FakeTransport({("POST", "*_count"): lambda call: (200, {"count": 2})})
    be, _ = make_backend(t)
    with pytest.raises(ElasticsearchError, match="holds 2 documents after the bulk load.*expected 3"):
        be.open_collection("p", DOCS)


def test_bulk_request_rejected_as_a_whole():
    err = {"error": {"type": "es_rejected_execution_exception", "reason": "queue full"}, "status": 429}
    t = FakeTransport({("PUT", "/_bulk"): lambda call: (429, err)})
    be, _ = make_backend(t, bulk={"progress": False, "max_retries": 0})
    with pytest.raises(ElasticsearchError, match="failed for 3 of 3 documents"):
        be.open_collection("p", DOCS)


# -- faults on the emulator -----------------------------------------------------------------------

@pytest.mark.es
def test_missing_index_on_emulator(noida_url):
    be = ElasticsearchBackend(url=noida_url, index_prefix="unit-missing", bulk={"progress": False})
    coll = be.open_collection("p", DOCS, TableEmbedder(dim=3))
    assert coll.bm25(["river"], 2)[0].ids
    be.client.indices.delete(index=coll.index)
    with pytest.raises(ElasticsearchError, match=f"index '{coll.index}' is missing"):
        coll.bm25(["river"], 2)
    with pytest.raises(ElasticsearchError, match=f"index '{coll.index}' is missing"):
        coll.knn(np.ones((1, 3), np.float32), 2)
    with pytest.raises(ElasticsearchError, match=f"index '{coll.index}' is missing"):
        coll.lookup("subject_key", ["alpha"])
    again = be.open_collection("p", DOCS, TableEmbedder(dim=3))  # re-open rebuilds
    assert not again.reused and again.bm25(["river"], 2)[0].ids


@pytest.mark.es
def test_rejected_documents_on_emulator(noida_url, monkeypatch):
    """A document the server rejects (wrong vector size) -> loud error, no index left behind."""
    be = ElasticsearchBackend(url=noida_url, index_prefix="unit-reject", bulk={"progress": False, "chunk_size": 2})
    from gear_repro.backends import elasticsearch as mod

    orig = mod.bulk_actions

    def broken(index, docs, vectors):
        for a in orig(index, docs, vectors):
            if a["_id"] == "c":
                a["_source"]["embedding"] = a["_source"]["embedding"][:2]
            yield a

    monkeypatch.setattr(mod, "bulk_actions", broken)
    with pytest.raises(ElasticsearchError, match=r"failed for 1 of 3 documents \(first: c: HTTP 400"):
        be.open_collection("p", DOCS, TableEmbedder(dim=3))
    assert not be.client.indices.exists(index=be.index_name("p", DOCS, TableEmbedder(dim=3)))


@pytest.mark.es
def test_interrupted_build_is_not_reused_on_emulator(noida_url):
    be = ElasticsearchBackend(url=noida_url, index_prefix="unit-partial", bulk={"progress": False})
    emb = TableEmbedder(dim=3)
    name = be.index_name("p", DOCS, emb)
    # simulate a killed run: the index exists, holds one doc, and was never marked complete
    be.client.indices.create(index=name, mappings={"_meta": {"gear_complete": False, "doc_count": 3}})
    be.client.index(index=name, id="a", document={"id": "a", "text": "Alpha river"}, refresh=True)
    coll = be.open_collection("p", DOCS, emb)
    assert not coll.reused and be.stats["rebuilt_incomplete"] == 1
    assert be.client.count(index=name)["count"] == 3
    assert be.client.indices.get_mapping(index=name)[name]["mappings"]["_meta"]["gear_complete"] is True


def test_a_server_that_trickles_its_reply_fails_at_the_request_timeout():
    """urllib3's timeout is per read: a server sending a byte every 0.1 s kept a search with
    ``backend.request_timeout=1`` waiting as long as it trickled (200 s and more). Each request now has an overall
    deadline (backends/elasticsearch.DeadlineNode), retried like any timeout."""
    import time

    from tests.helpers.es_fixtures import TricklingServer

    with TricklingServer(INFO, every_s=0.1, for_s=8.0) as url:
        be = ElasticsearchBackend(url=url, request_timeout=1, max_retries=1)
        assert be.client.info()["version"]["number"] == "8.15.3"  # a whole reply passes
        t0 = time.perf_counter()
        with pytest.raises(ElasticsearchError) as e, be.errors("search"):
            be.client.search(index="gear-x", query={"match_all": {}})
        elapsed = time.perf_counter() - t0
        be.close()
    assert 1.5 < elapsed < 5, elapsed  # 2 attempts of 1 s, not the 8 s of trickling
    assert str(e.value) == (f"Elasticsearch at {url} timed out during search: no answer in 2 attempt(s) of 1 s "
                            "(backend.request_timeout=1, backend.max_retries=1); is backend.url the cluster's HTTP "
                            "port?")
