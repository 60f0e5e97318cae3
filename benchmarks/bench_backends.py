"""Memory vs Elasticsearch backend: BM25 agreement, Recall@k, indexing throughput, query latency.

    python -m benchmarks.bench_backends                 # spawns the noida-db emulator
    python -m benchmarks.bench_backends --es-url URL    # a real cluster (credentials from ES_* env vars)

Corpora: the bundled MuSiQue sample (data/musique_sample; passages and triples) and the 2Wiki sample
(data/prepared/2wiki_sample, else the shared HippoRAG corpus with gold passages matched by title).
Backends compared: ``memory`` (bm25s, Snowball English, bm25s's ``en`` stop words = Lucene's 33),
``memory-porter`` (the same backend with the Porter stemmer, i.e. closer to ES), and ``es`` (analyzer ``english``). Embedding time is excluded from every throughput figure
(vectors are computed once, cached, and handed to both backends). Writes a JSON report and prints tables.
NOTE: on the emulator, ES timings measure noida-db, not Elasticsearch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.elasticsearch import ElasticsearchBackend  # noqa: E402
from gear_repro.backends.memory import MemoryBackend  # noqa: E402
from gear_repro.backends.tokenize import tokenize  # noqa: E402
from gear_repro.core.triple_graph import triple_docs  # noqa: E402
from gear_repro.data.canonical import load_corpus, load_questions  # noqa: E402
from gear_repro.evaluation.metrics import recall_at_k  # noqa: E402
from gear_repro.utils.io import read_json, write_json  # noqa: E402

# the english analysis on both backends (the backends' default is ES's standard analyzer): the
# comparison of stemmers in docs/elasticsearch.md needs stop words and stemming on
MEMORY_VARIANTS = {
    "memory": {"stopwords": "en", "stemmer": "english"},
    "memory-porter": {"stopwords": "en", "stemmer": "porter"},
}
KS = (5, 10, 15)


def load_musique(root: Path) -> tuple[list[IndexDoc], list[dict], list[IndexDoc]]:
    from gear_repro.data.canonical import load_triples

    passages = load_corpus(root / "corpus.jsonl")
    qs = [{"q": q.question, "gold": q.gold_ids} for q in load_questions(root / "questions.jsonl")]
    triples = load_triples(root / "triples.jsonl") if (root / "triples.jsonl").exists() else []
    return [IndexDoc(p.id, p.content) for p in passages], qs, triple_docs(triples)


def load_2wiki(prepared: Path, shared: Path) -> tuple[list[IndexDoc], list[dict], str]:
    if (prepared / "corpus.jsonl").exists():
        passages = load_corpus(prepared / "corpus.jsonl")
        qs = [{"q": q.question, "gold": q.gold_ids} for q in load_questions(prepared / "questions.jsonl")]
        return [IndexDoc(p.id, p.content) for p in passages], qs, str(prepared)
    corpus = read_json(shared / "2wikimultihopqa_corpus.json")
    docs = [IndexDoc(str(i), f"{c['title']}\n{c['text']}") for i, c in enumerate(corpus)]
    by_title: dict[str, list[str]] = {}
    for i, c in enumerate(corpus):
        by_title.setdefault(c["title"], []).append(str(i))
    qs = []
    for q in read_json(shared / "2wikimultihopqa_questions_300.json"):
        gold = sorted({g for ev in q.get("evidence", []) for g in by_title.get(ev[0], [])})
        qs.append({"q": q["question"], "gold": gold})
    return docs, qs, str(shared)


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p)) if xs else float("nan")


def timed_single(fn, items) -> list[float]:
    out = []
    for it in items:
        t = time.perf_counter()
        fn(it)
        out.append((time.perf_counter() - t) * 1000)
    return out


def bench_corpus(label: str, docs: list[IndexDoc], qs: list[dict], es_url: str, embedder, triples: list[IndexDoc],
                 prefix: str, n_lat: int = 50) -> dict:
    """All questions for agreement/recall/batch q/s (k=15); the first ``n_lat`` for single-query latency."""
    res: dict = {"corpus": label, "n_docs": len(docs), "n_questions": len(qs), "n_latency_queries": min(n_lat, len(qs)),
                 "backends": {}}
    queries = [q["q"] for q in qs]
    vecs = embedder.encode_corpus([d.text for d in docs], desc=label) if embedder is not None else None
    qvecs = embedder.encode(queries) if embedder is not None else None
    rankings: dict[str, list] = {}

    for name, params in MEMORY_VARIANTS.items():
        be = MemoryBackend(bm25={"k1": 1.2, "b": 0.75, **params}, cache=False)
        coll = be.open_collection("passages", docs, embedder)
        t = time.perf_counter()
        coll._bm25_index()  # memory builds lazily: time the BM25 build alone
        build = time.perf_counter() - t
        t = time.perf_counter()
        rankings[name] = coll.bm25(queries, 15)
        r = {"index_s": build, "index_docs_per_s": len(docs) / build,
             "bm25_batch_qps": len(queries) / (time.perf_counter() - t)}
        lat = timed_single(lambda q, c=coll: c.bm25([q], 10), queries[:n_lat])
        r.update(bm25_ms_p50=pct(lat, 50), bm25_ms_p95=pct(lat, 95))
        if qvecs is not None:
            coll._matrix = np.ascontiguousarray(vecs, dtype=np.float32)
            lat = timed_single(lambda v, c=coll: c.knn(v[None], 10), qvecs[:n_lat])
            r.update(knn_ms_p50=pct(lat, 50), knn_ms_p95=pct(lat, 95))
        res["backends"][name] = r

    es = ElasticsearchBackend(url=es_url, index_prefix=prefix, bulk={"progress": False}, request_timeout=900,
                              bm25={"analyzer": "english"})
    t = time.perf_counter()
    coll = es.open_collection(f"{label}-bm25", docs, None)
    build = time.perf_counter() - t
    r = {"index_s": build, "index_docs_per_s": len(docs) / build, "server": es.server_version}
    t = time.perf_counter()
    rankings["es"] = coll.bm25(queries, 15)
    r["bm25_batch_qps"] = len(queries) / (time.perf_counter() - t)
    lat = timed_single(lambda q: coll.bm25([q], 10), queries[:n_lat])
    r.update(bm25_ms_p50=pct(lat, 50), bm25_ms_p95=pct(lat, 95))
    if embedder is not None:
        t = time.perf_counter()
        dcoll = es.open_collection(f"{label}-dense", docs, embedder)  # vectors come from the embedder cache
        build = time.perf_counter() - t
        r.update(index_with_vectors_s=build, index_with_vectors_docs_per_s=len(docs) / build)
        lat = timed_single(lambda v: dcoll.knn(v[None], 10), qvecs[:n_lat])
        r.update(knn_ms_p50=pct(lat, 50), knn_ms_p95=pct(lat, 95))
        mem = MemoryBackend(cache=False).open_collection("p", docs, embedder)
        mem._matrix = np.ascontiguousarray(vecs, dtype=np.float32)
        exact = mem.knn(qvecs[:n_lat], 10)
        approx = dcoll.knn(qvecs[:n_lat], 10)
        r["knn_top10_overlap_vs_exact"] = statistics.mean(
            len(set(a.ids) & set(b.ids)) / max(1, len(b.ids)) for a, b in zip(approx, exact, strict=True))
    if triples:
        t = time.perf_counter()
        es.open_collection(f"{label}-triples", triples, None)
        tb = time.perf_counter() - t
        mb = MemoryBackend(cache=False).open_collection("t", triples)
        t2 = time.perf_counter()
        mb._bm25_index()
        tm = time.perf_counter() - t2
        res["triples"] = {"n": len(triples), "es_index_docs_per_s": len(triples) / tb,
                          "memory_index_docs_per_s": len(triples) / tm}
    res["backends"]["es"] = r

    # agreement and recall
    with_gold = [i for i, q in enumerate(qs) if q["gold"]]
    for name, rk in rankings.items():
        res["backends"][name].update({f"recall@{k}": 100 * statistics.mean(
            recall_at_k(rk[i].ids, qs[i]["gold"], k) for i in with_gold) for k in KS})
    res["n_questions_with_gold"] = len(with_gold)
    res["agreement"] = {}
    for name in MEMORY_VARIANTS:
        same, overlap, top1 = 0, [], 0
        for a, b in zip(rankings[name], rankings["es"], strict=True):
            sa, sb = set(a.ids[:10]), set(b.ids[:10])
            same += sa == sb
            overlap.append(len(sa & sb) / max(1, len(sa), len(sb)))
            top1 += bool(a.ids[:1] == b.ids[:1])
        res["agreement"][f"{name}_vs_es"] = {"identical_top10_sets_pct": 100 * same / len(qs),
                                             "mean_top10_overlap": statistics.mean(overlap),
                                             "same_top1_pct": 100 * top1 / len(qs)}
    # how often do the two analyses see different query terms?
    client = es.client
    diff = {name: 0 for name in MEMORY_VARIANTS}
    for q in queries:
        toks = [x["token"] for x in client.indices.analyze(analyzer="english", text=q)["tokens"]]
        for name, params in MEMORY_VARIANTS.items():
            p = {"stopwords": "en", "stemmer": "english", **params}
            diff[name] += sorted(set(tokenize([q], p["stopwords"], p["stemmer"])[0])) != sorted(set(toks))
    res["queries_with_different_terms_pct"] = {n: 100 * d / len(queries) for n, d in diff.items()}
    return res


def print_report(results: list[dict]) -> None:
    for r in results:
        print(f"\n## {r['corpus']}: {r['n_docs']} passages, {r['n_questions']} questions "
              f"({r['n_questions_with_gold']} with gold); latency over {r['n_latency_queries']} single queries, "
              "batch q/s over all questions at k=15")
        print("| backend | index docs/s | BM25 p50 ms | BM25 p95 ms | batch q/s | kNN p50 ms | kNN p95 ms | R@5 | R@10 | R@15 |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for name, b in r["backends"].items():
            print(f"| {name} | {b['index_docs_per_s']:.0f} | {b['bm25_ms_p50']:.2f} | {b['bm25_ms_p95']:.2f} | "
                  f"{b['bm25_batch_qps']:.3g} | {b.get('knn_ms_p50', float('nan')):.2f} | "
                  f"{b.get('knn_ms_p95', float('nan')):.2f} | {b['recall@5']:.1f} | {b['recall@10']:.1f} | "
                  f"{b['recall@15']:.1f} |")
        es = r["backends"]["es"]
        if "index_with_vectors_docs_per_s" in es:
            print(f"ES indexing with vectors: {es['index_with_vectors_docs_per_s']:.0f} docs/s; "
                  f"kNN top-10 overlap with exact search: {es['knn_top10_overlap_vs_exact']:.3f}")
        if "triples" in r:
            t = r["triples"]
            print(f"triples ({t['n']}): index docs/s memory {t['memory_index_docs_per_s']:.0f}, "
                  f"es {t['es_index_docs_per_s']:.0f}")
        for k, a in r["agreement"].items():
            print(f"{k}: identical top-10 sets {a['identical_top10_sets_pct']:.1f}%, mean top-10 overlap "
                  f"{a['mean_top10_overlap']:.3f}, same top-1 {a['same_top1_pct']:.1f}%")
        print("queries whose analysed term set differs from ES english:",
              {k: f"{v:.1f}%" for k, v in r["queries_with_different_terms_pct"].items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--es-url", default=None, help="a running cluster (default: spawn the noida-db emulator)")
    ap.add_argument("--musique", type=Path, default=REPO / "data" / "musique_sample")
    ap.add_argument("--twowiki", type=Path, default=REPO / "data" / "prepared" / "2wiki_sample")
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("GEAR_SHARED_DATA", REPO.parent / "shared" / "data")))
    ap.add_argument("--embedder", default="all-MiniLM-L6-v2", help="'none' to skip kNN")
    ap.add_argument("--latency-queries", type=int, default=50, help="questions timed one by one (default 50)")
    ap.add_argument("--out", type=Path, default=REPO / "outputs" / "bench" / "backends.json")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    embedder = None
    if a.embedder != "none":
        from gear_repro.embedding import SentenceEmbedder

        embedder = SentenceEmbedder(a.embedder, show_progress=False)

    server = None
    url = a.es_url
    if url is None:
        from tests.helpers.es_fixtures import NoidaServer

        server = NoidaServer(Path(tempfile.mkdtemp(prefix="bench-noida-")))
        url = server.start()
    prefix = f"gear-bench-{uuid.uuid4().hex[:6]}"
    results = []
    try:
        if (a.musique / "corpus.jsonl").exists():
            docs, qs, triples = load_musique(a.musique)
            src = str(a.musique)
        else:  # fall back to the shared native files (no gold ids, no triples)
            corpus = read_json(a.shared / "musique_sample" / "musique_train_100_corpus.json")
            docs = [IndexDoc(str(i), f"{c['title']}\n{c['text']}") for i, c in enumerate(corpus)]
            qs = [{"q": q["question"], "gold": []}
                  for q in read_json(a.shared / "musique_sample" / "musique_train_100.json")]
            triples, src = [], str(a.shared / "musique_sample")
        r = bench_corpus("musique", docs, qs, url, embedder, triples, prefix, a.latency_queries)
        r["source"] = src
        results.append(r)
        docs, qs, src = load_2wiki(a.twowiki, a.shared / "2wiki_sample")
        r = bench_corpus("2wiki", docs, qs, url, embedder, [], prefix, a.latency_queries)
        r["source"] = src
        results.append(r)
    finally:
        if server is not None:
            server.stop()
        elif a.es_url:
            from tests.es_fixtures import delete_prefix

            delete_prefix(ElasticsearchBackend(url=url), prefix)
    meta = {"load_average_at_end": os.getloadavg(), "es_url_kind": "real cluster" if a.es_url else "noida-db emulator (not Elasticsearch performance)",
            "embedder": a.embedder, "cpus": os.cpu_count()}
    write_json(a.out, {"meta": meta, "results": results})
    print_report(results)
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
