"""Scale benchmark of the memory backend and the triple graph on seeded synthetic corpora.

The paper's corpora (GEAR Table 5) cannot be downloaded here, so this script generates corpora of their sizes:

    musique   148,793 chunks / 1.52M triples
    2wiki     490,454 chunks / 4.99M triples
    hotpotqa   10,293 chunks /  122k triples

Text: words drawn from a Zipf(1.1) vocabulary of 100k pseudo-words; passage length log-normal fitted to the
bundled MuSiQue sample (mean 76 words, median 65, p95 167), titles ~3 words; triples "s p o" with predicates of
~2 words. Each triple belongs to one passage. Entities (``--hubs``; the JSON reports median/max degree and the
entities per triple):
  power   (the default, and every earlier figure) a pool of 0.95 entities per triple named by 1-4 words
          of the Zipf vocabulary, the subject/object of each triple drawn from a power law over the pool
          (exponent 0.9). Names collide (a one-word name is a frequent word), so the graph has fewer, heavier
          entities than the pool: 0.35 per triple at 10% of MuSiQue size, the largest linked by 8% of the triples.
          At the bundled sample's size it has 0.41 entities per triple and a largest entity with 14% of the
          triples, against the sample's 0.94 and 1.3% ("united states"): a stress test for the hubs.
  sample  hubs as the bundled MuSiQue sample predicts them at the corpus's size (``benchmarks/
          musique_sample_entities.json``, made by ``--write-profile``): the sample is 100 questions' contexts,
          so an entity found in the contexts of at least ``--global-questions`` (3) of them is taken as
          corpus-wide and keeps its share of the triples (degree x chunks / 1,890: "united states" 226 ->
          ~17,800 at MuSiQue size), one found in fewer is question-local and keeps its degree (the corpus
          repeats such entities: degrees drawn from the sample's local ones fill the remaining triples);
          names are unique. Applied to every ``--corpus`` (the MuSiQue sample is the only one with triples).
Vectors: random unit vectors (768-d, as all-mpnet-base-v2) written as float16 ``.npy`` files and memory-mapped;
queries get seeded random unit vectors, so no encoder runs (retrieval cost, not encoding cost, is measured).
BLAS runs one thread unless OPENBLAS_NUM_THREADS/OMP_NUM_THREADS say otherwise; all times are the process's
CPU time (``time.process_time``), i.e. what one idle core takes, whatever else the machine runs.

Measured (one process per fraction): peak RSS is the process's maximum resident set, which counts the pages of
the memory-mapped vector files it touched (file-backed: the kernel drops them under memory pressure); peak anon
is the maximum of its anonymous resident memory (RssAnon, sampled every 20 ms), the memory that cannot be
dropped, i.e. what a run needs beside the page cache.
  build_bm25_s   BM25 index of the passages (memory backend: bm25s, stop words, Snowball stemmer)
  build_vectors_s  writing the fp16 vector files; vectors_gib on disk
  build_graph_s  triple graph (TripleIndex: entity adjacency, passage alignment)
  build_hub_slices_s  contiguous float16 copies of the entities with >= 256 triples (graph.hub_slices_min_degree;
                  core/hub_slices.py: NaiveGE's neighbour choice, exact, without scoring every hub row)
  build_ann_s    the passages' faiss index (``--dense``, default configs/backend/memory.yaml's ``backend.dense``; at
                  a size where ``auto`` would search exactly, its ``auto_index``); anon_ann_gib its anonymous memory
  bm25, dense_*, hybrid_* p50/p95 ms per query (k=15, hybrid fusion depth 100)
  naive_* p50/p95 ms per query: hybrid k=15 + NaiveGE with the paper's beam settings (l=2, b=10, 100 neighbours,
  γ=20) and the ``mean`` scorer (pre-computed vectors only; the encoder cost of the exact/fast scorers is
  independent of corpus size: benchmarks/bench_expansion.py)
  naive_parts_ms mean ms per query of the expansion's own timings (its trace): ``gather_s`` the neighbour choice
                  (Alg. 1 lines 8-12: hub scans, exact re-scoring of their candidates and of smaller entities),
                  ``score_s`` the path scores, ``query_s`` the query vector

Every dense, hybrid and NaiveGE figure is measured twice in the same process, query by query in alternating order:
``*_exact`` with exact search (``backend.dense.index=exact``: numpy over the whole matrix) and ``*_ann`` through the
faiss index (its candidates re-scored exactly). Beside them: recall@100 = the share of the exact top-100 (the
hybrid's dense list) that the faiss search returns, mean and min over the queries, and the share of queries whose
hybrid top-15 is the same list both ways.

    python -m benchmarks.bench_scale --corpus musique --fraction 0.01 --out F.json
    python -m benchmarks.bench_scale --corpus 2wiki --fraction 1 --dense index=hnsw --dense hnsw.ef_search=512
    python -m benchmarks.bench_scale --plot docs/scale_curve.png results/*.json   # the scaling curve
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import tempfile
import threading
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread: stable latencies
    os.environ.setdefault(_v, "1")  # on a shared 2-core machine (set them to override)

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

from gear_repro.backends.ann import DenseIndex, DenseSettings  # noqa: E402
from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.memory import MemoryBackend, top_k_dense  # noqa: E402
from gear_repro.core.triple_graph import TripleIndex, normalize_entity  # noqa: E402
from gear_repro.methods.gear.expansion import NaiveGE  # noqa: E402
from gear_repro.retrieval.base import BM25Retriever, DenseRetriever, HybridRetriever  # noqa: E402
from gear_repro.types import Passage, Triple  # noqa: E402
from gear_repro.utils.memory import status_gib  # noqa: E402

SIZES = {"musique": (148_793, 1_520_000), "2wiki": (490_454, 4_990_000), "hotpotqa": (10_293, 122_000)}
DIM = 768
VOCAB = 100_000
GLOBAL_QUESTIONS = 3  # an entity in the contexts of at least this many of the sample's questions is corpus-wide
SYLLABLES = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "an", "is", "ur", "pe", "ta", "ne", "ri", "gu",
             "bel", "mar", "on", "shi", "tek", "ya", "zo", "qui"]


def zipf_sampler(rng: np.random.Generator, n: int, exponent: float):
    """Sample ranks 0..n-1 with P(r) ∝ (r+1)^-exponent (inverse CDF on a cumulative table)."""
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -exponent)
    cdf /= cdf[-1]
    return lambda size: np.minimum(np.searchsorted(cdf, rng.random(size)), n - 1)


def pseudo_words(rng: np.random.Generator, n: int) -> np.ndarray:
    syl = np.asarray(SYLLABLES)
    parts = rng.integers(0, len(syl), size=(n, 3))
    lens = rng.integers(1, 4, size=n)
    words = ["".join(syl[p[:m]]) + str(i % 97) for i, (p, m) in enumerate(zip(parts, lens, strict=True))]
    return np.asarray(words, dtype=object)


def generate(corpus: str, fraction: float, seed: int = 0, hubs: str = "power",
             global_questions: int = GLOBAL_QUESTIONS) -> tuple[list[Passage], list[Triple]]:
    """A seeded synthetic corpus of ``fraction`` of the paper's size (see the module docstring)."""
    n_chunks, n_triples = (max(1, round(x * fraction)) for x in SIZES[corpus])
    rng = np.random.default_rng(seed)
    vocab = pseudo_words(rng, VOCAB)
    word = zipf_sampler(rng, VOCAB, 1.1)
    lengths = np.clip(rng.lognormal(np.log(65), 0.55, n_chunks).astype(int), 5, 400)
    flat = vocab[word(int(lengths.sum()) + 3 * n_chunks)]
    passages, pos = [], 0
    for i, m in enumerate(lengths):
        title = " ".join(flat[pos:pos + 3]).title()
        passages.append(Passage(str(i), title, " ".join(flat[pos + 3:pos + 3 + m])))
        pos += 3 + m
    if hubs == "sample":
        subj, obj = sample_hub_endpoints(rng, n_chunks, n_triples, global_questions)
        n_ent = int(max(subj.max(), obj.max())) + 1
    else:
        n_ent = max(2, int(0.95 * n_triples))
    ent_words = vocab[word(n_ent * 4)].reshape(n_ent, 4)
    ent_len = rng.integers(1, 5, size=n_ent)
    entities = [" ".join(w[:m]).title() for w, m in zip(ent_words, ent_len, strict=True)]
    if hubs == "sample":  # one entity, one name
        entities = [f"{e} {i}" for i, e in enumerate(entities)]
    preds = [" ".join(vocab[word(2)]) for _ in range(2000)]
    if hubs != "sample":
        ent = zipf_sampler(rng, n_ent, 0.9)
        subj, obj = ent(n_triples), ent(n_triples)
    perm = rng.permutation(n_ent)  # hubs are not the first entities in corpus order
    pred = rng.integers(0, len(preds), n_triples)
    owner = np.sort(rng.integers(0, n_chunks, n_triples))  # triples grouped by passage, as extraction writes them
    triples = [Triple(f"t{j}", entities[perm[s]], preds[p], entities[perm[o]], str(c))
               for j, (s, p, o, c) in enumerate(zip(subj, pred, obj, owner, strict=True))]
    return passages, triples


PROFILE = REPO / "benchmarks" / "musique_sample_entities.json"




def entity_spans(raw_questions: Path, sample_dir: Path) -> tuple[dict[str, int], dict[str, set[int]], int]:
    """The bundled MuSiQue sample's entities (``normalize_entity`` keys): their degree (triples naming them), the
    questions whose contexts hold them, and the number of passages. ``raw_questions`` is HippoRAG's
    ``musique_train_100.json`` (20 paragraphs per question), ``sample_dir`` the bundled ``data/musique_sample``
    (corpus.jsonl, triples.jsonl). Shared by ``--hubs sample`` and scripts/make_fullsize_corpus.py."""
    questions_of: dict[tuple[str, str], set[int]] = {}
    raw = json.loads(raw_questions.read_text())
    if not isinstance(raw, list) or not all(isinstance(q, dict) and "paragraphs" in q for q in raw):
        raise SystemExit(f"{raw_questions}: not a MuSiQue question file (a list of questions with 'paragraphs')")
    for qi, q in enumerate(raw):
        for p in q["paragraphs"]:
            questions_of.setdefault((p["title"].strip(), p["paragraph_text"].strip()), set()).add(qi)
    passage_questions = {}
    for line in (sample_dir / "corpus.jsonl").read_text().splitlines():
        r = json.loads(line)
        key = (r["title"].strip(), r["text"].strip())
        if key not in questions_of:
            raise SystemExit(f"{sample_dir / 'corpus.jsonl'}: passage {r['id']} ('{key[0]}') is in no question's "
                             f"paragraphs of {raw_questions}: not the file the sample was made from")
        passage_questions[r["id"]] = questions_of[key]
    degree: dict[str, int] = {}
    spans: dict[str, set[int]] = {}
    for line in (sample_dir / "triples.jsonl").read_text().splitlines():
        r = json.loads(line)
        for e in {normalize_entity(r["subject"]), normalize_entity(r["object"])}:
            degree[e] = degree.get(e, 0) + 1
            spans.setdefault(e, set()).update(passage_questions[r["passage_id"]])
    return degree, spans, len(passage_questions)


def entity_profile(raw_questions: Path, sample_dir: Path) -> dict:
    """The bundled MuSiQue sample's entities as counts of (degree, questions whose contexts contain them): the
    input of ``--hubs sample`` (:func:`entity_spans`)."""
    degree, spans, passages = entity_spans(raw_questions, sample_dir)
    triples = (sample_dir / "triples.jsonl").read_text().splitlines()
    counts: dict[tuple[int, int], int] = {}
    for e, d in degree.items():
        counts[(d, len(spans[e]))] = counts.get((d, len(spans[e])), 0) + 1
    return {"source": "data/musique_sample (HippoRAG's GPT-3.5 OpenIE triples of 100 MuSiQue questions' contexts)",
            "passages": passages, "questions": len({q for v in spans.values() for q in v}),
            "triples": len(triples), "degree_questions_entities": sorted([d, q, c] for (d, q), c in counts.items())}


def sample_hub_endpoints(rng: np.random.Generator, n_chunks: int, n_triples: int,
                         global_questions: int) -> tuple[np.ndarray, np.ndarray]:
    """Subject and object entity ids of ``n_triples`` triples whose entity degrees follow the bundled sample's
    profile at ``n_chunks`` chunks (``--hubs sample``, module docstring)."""
    prof = json.loads(PROFILE.read_text())
    rows = np.asarray(prof["degree_questions_entities"], dtype=np.int64)  # (degree, questions, entities)
    scale = n_chunks / prof["passages"]
    corpus_wide = rows[:, 1] >= global_questions
    hub = np.rint(np.repeat(rows[corpus_wide, 0], rows[corpus_wide, 2]) * scale).astype(np.int64)
    hub = np.sort(hub[hub > 0])[::-1]
    ends = 2 * n_triples
    hub = hub[np.cumsum(hub) <= ends]  # tiny corpora: the largest that fit
    local = np.repeat(rows[~corpus_wide, 0], rows[~corpus_wide, 2])
    need = ends - int(hub.sum())
    draws = rng.choice(local, size=int(need / local.mean() * 1.2) + 16)
    while draws.sum() < need:
        draws = np.concatenate([draws, rng.choice(local, size=draws.size)])
    cut = int(np.searchsorted(np.cumsum(draws), need))
    draws = draws[:cut + 1].copy()
    draws[-1] -= int(draws.sum()) - need
    endpoints = np.repeat(np.arange(hub.size + draws.size), np.concatenate([hub, draws]))
    rng.shuffle(endpoints)
    return endpoints[:n_triples], endpoints[n_triples:]


def write_unit_vectors(path: Path, n: int, seed: int, block: int = 65_536) -> np.ndarray:
    """n random unit vectors as a float16 .npy file; returned memory-mapped read-only."""
    rng = np.random.default_rng(seed)
    mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(n, DIM))
    for a in range(0, n, block):
        x = rng.standard_normal((min(block, n - a), DIM), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        mm[a:a + x.shape[0]] = x
    mm.flush()
    del mm
    return np.load(path, mmap_mode="r")


class RandomEmbedder:
    """Stand-in encoder: seeded random unit vectors per text; corpus vectors come from a memory-mapped file."""

    model_id = "random-unit"
    dim = DIM

    def __init__(self, corpus_vectors: dict[int, np.ndarray]):
        self.corpus_vectors = corpus_vectors  # number of texts -> memmap

    def encode(self, texts):
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

    def encode_corpus(self, texts, desc: str = ""):
        return self.corpus_vectors[len(texts)]


def clock() -> float:
    """CPU seconds of this process: on a shared machine the wall clock mostly measures other jobs; with one
    BLAS thread the process's CPU time is the latency an idle core would show."""
    return time.process_time()


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


class AnonPeak(threading.Thread):
    """Samples the anonymous resident memory (:func:`~gear_repro.utils.memory.status_gib` of ``RssAnon``) every ``interval`` s until stopped; ``peak`` is the largest sample."""

    def __init__(self, interval: float = 0.02):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = status_gib("RssAnon")
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.peak = max(self.peak, status_gib("RssAnon"))

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        self.peak = max(self.peak, status_gib("RssAnon"))
        return self.peak


def pct(xs: list[float]) -> dict[str, float]:
    a = np.asarray(xs) * 1000.0
    return {"p50_ms": round(float(np.percentile(a, 50)), 2), "p95_ms": round(float(np.percentile(a, 95)), 2)}


def parse_dense(items: list[str]) -> dict:
    """``--dense index=hnsw --dense hnsw.m=16`` -> the nested ``backend.dense`` mapping (values as YAML reads them)."""
    import yaml

    out: dict = {}
    for item in items:
        key, _, value = item.partition("=")
        node = out
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return out


def ann_settings(dense: dict, n: int) -> dict:
    """``--dense`` settings whose search at ``n`` vectors is a faiss index: ``auto`` below its threshold (where it
    would search exactly) becomes its ``auto_index``."""
    settings = DenseSettings.from_config(dense)
    if settings.index == DenseIndex.auto and n < settings.auto_min_vectors:
        return {**dense, "index": str(settings.auto_index)}
    if settings.index == DenseIndex.exact:
        raise SystemExit("--dense index=exact: nothing to compare; exact search is measured in every run")
    return dense


def dense_recall(coll, queries: np.ndarray, depth: int = 100) -> dict[str, float]:
    """Share of the exact top-``depth`` rows that the collection's faiss search returns, per query (mean, min)."""
    shares = []
    for q in queries:
        (exact, _), = top_k_dense(coll.vectors(), q[None], depth)
        got = set(coll.knn(q[None], depth)[0].ids)
        shares.append(len({coll.ids[i] for i in exact} & got) / len(exact))
    return {"mean": round(float(np.mean(shares)), 4), "min": round(float(np.min(shares)), 4)}


def run(corpus: str, fraction: float, n_queries: int, workdir: Path, seed: int, dense: dict | None = None,
        hubs: str = "power", global_questions: int = GLOBAL_QUESTIONS) -> dict:
    out: dict = {"corpus": corpus, "fraction": fraction, "seed": seed, "hubs": hubs,
                 **({"global_questions": global_questions} if hubs == "sample" else {}),
                 "cpu": platform.processor() or platform.machine(),
                 "cores": os.cpu_count(), "blas_threads": os.environ["OPENBLAS_NUM_THREADS"],
                 "load_avg_start": os.getloadavg(), "dense_settings": dense or {}}
    probe = AnonPeak()
    probe.start()
    t = clock()
    passages, triples = generate(corpus, fraction, seed, hubs, global_questions)
    out.update(chunks=len(passages), triples=len(triples), generate_s=round(clock() - t, 1),
               rss_after_generate_gib=round(rss_gib(), 2))
    print(f"{corpus} {fraction:g}: {len(passages):,} chunks, {len(triples):,} triples generated", flush=True)

    t = clock()
    pvec = write_unit_vectors(workdir / "passages.npy", len(passages), seed + 1)
    tvec = write_unit_vectors(workdir / "triples.npy", len(triples), seed + 2)
    out["build_vectors_s"] = round(clock() - t, 1)
    out["vectors_gib"] = round(sum(f.stat().st_size for f in workdir.glob("*.npy")) / 2**30, 3)
    emb = RandomEmbedder({len(passages): pvec})

    t = clock()
    dense = ann_settings(dense or {}, len(passages))
    out["dense_settings"] = dense
    coll = MemoryBackend(dense_dtype="float16", cache=False, dense=dense).open_collection(
        "passages", [IndexDoc(p.id, p.content) for p in passages], emb)
    coll.bm25(["warm"], 1)
    out["build_bm25_s"] = round(clock() - t, 1)
    out["rss_after_bm25_gib"] = round(rss_gib(), 2)
    out["anon_after_bm25_gib"] = round(status_gib("RssAnon"), 2)
    print(f"  BM25 {out['build_bm25_s']} s, RSS {out['rss_after_bm25_gib']} GiB, anon {out['anon_after_bm25_gib']} GiB",
          flush=True)
    out["dense_index"] = str(coll.dense_kind)
    t = clock()
    ann = coll.ann_index()
    out["build_ann_s"] = round(clock() - t, 1)
    out["dense_faiss"] = ann.description
    out["anon_ann_gib"] = round(status_gib("RssAnon") - out["anon_after_bm25_gib"], 3)
    print(f"  dense index faiss {ann.description}: {out['build_ann_s']} s, anon +{out['anon_ann_gib']} GiB", flush=True)

    t = clock()
    index = TripleIndex(None, triples)
    index.set_vectors(tvec)
    out["build_graph_s"] = round(clock() - t, 1)
    deg = index._entity_rows.degrees()
    out["entity_degree"] = {"entities": int(deg.size), "per_triple": round(deg.size / len(triples), 3),
                            "median": float(np.median(deg)), "max": int(deg.max()),
                            "hubs_capped": int(index.stats.get("hub_entities", 0))}
    out["rss_after_graph_gib"] = round(rss_gib(), 2)
    out["anon_after_graph_gib"] = round(status_gib("RssAnon"), 2)
    print(f"  triple graph {out['build_graph_s']} s, RSS {out['rss_after_graph_gib']} GiB, anon "
          f"{out['anon_after_graph_gib']} GiB", flush=True)
    del triples
    t = clock()
    codes = index.hub_slices()  # built on first use otherwise; timed here, outside the queries
    if codes is not None:
        out["build_hub_slices_s"] = round(clock() - t, 1)
        out["hub_slices"] = {"entities": len(codes.hubs), "min_degree": index.hub_slices_min_degree,
                            "gib": round(codes.bytes / 2**30, 3)}
        print(f"  hub slices {out['build_hub_slices_s']} s: {out['hub_slices']}, anon {status_gib('RssAnon'):.2f} GiB", flush=True)

    rng = np.random.default_rng(seed + 3)
    queries = [" ".join(rng.choice([p.title for p in passages[:5000]], 3)) + f" {i}" for i in range(n_queries)]
    bm25, dense_r, hybrid = BM25Retriever(coll, emb), DenseRetriever(coll, emb), HybridRetriever(coll, emb)
    naive = NaiveGE(index, emb, beam={"scorer": "mean"})
    kinds = {"exact": DenseIndex.exact, "ann": coll.dense_kind}
    times: dict[str, list[float]] = {"bm25": []}
    parts: dict[str, list[dict[str, float]]] = {}
    same_top = []
    for i, q in enumerate(queries):
        t = clock()
        bm25.retrieve(q, 15)
        times["bm25"].append(clock() - t)
        tops = {}
        for mode in (("exact", "ann") if i % 2 == 0 else ("ann", "exact")):  # alternating: no order bias
            coll.dense_kind = kinds[mode]  # the same collection, searched exactly or through its faiss index
            t = clock()
            dense_r.retrieve(q, 15)
            times.setdefault(f"dense_{mode}", []).append(clock() - t)
            t = clock()
            tops[mode] = hybrid.retrieve(q, 15).ids
            times.setdefault(f"hybrid_{mode}", []).append(clock() - t)
            t = clock()
            parts.setdefault(mode, []).append(naive.expand(q, hybrid.retrieve(q, 15)).trace["timings"])
            times.setdefault(f"naive_{mode}", []).append(clock() - t)
        same_top.append(tops["exact"] == tops["ann"])
    coll.dense_kind = kinds["ann"]
    lat = out["latency"] = {k: pct(v) for k, v in times.items()}
    out["ratios_p50"] = {
        "hybrid_exact_over_ann": round(lat["hybrid_exact"]["p50_ms"] / lat["hybrid_ann"]["p50_ms"], 2),
        "naive_exact_over_ann": round(lat["naive_exact"]["p50_ms"] / lat["naive_ann"]["p50_ms"], 2),
        "naive_over_hybrid_exact": round(lat["naive_exact"]["p50_ms"] / lat["hybrid_exact"]["p50_ms"], 2),
        "naive_over_hybrid_ann": round(lat["naive_ann"]["p50_ms"] / lat["hybrid_ann"]["p50_ms"], 2)}
    out["naive_parts_ms"] = {mode: {k: round(1000 * float(np.mean([t[k] for t in ts])), 2) for k in ts[0]}
                             for mode, ts in parts.items()}
    out["queries"] = n_queries
    out["hybrid_top15_same"] = round(float(np.mean(same_top)), 4)
    out["dense_recall_at_100"] = dense_recall(coll, emb.encode(queries))
    print(f"  ratios {out['ratios_p50']}; dense recall@100 of the exact top-100: {out['dense_recall_at_100']}; "
          f"hybrid top-15 identical for {out['hybrid_top15_same']:.0%} of the queries; NaiveGE parts (ms/query): "
          f"{out['naive_parts_ms']}", flush=True)
    out["peak_rss_gib"] = round(rss_gib(), 2)
    out["peak_anon_gib"] = round(probe.stop(), 2)
    out["load_avg_end"] = os.getloadavg()
    return out


def table(rows: list[dict]) -> str:
    head = ("| corpus | fraction | chunks | triples | faiss index (build s, anon GiB) | recall@100 mean / min "
            "| hybrid top-15 same | dense p50 exact / ANN | hybrid p50 exact / ANN (ratio) "
            "| hybrid+NaiveGE p50 exact / ANN (ratio) | NaiveGE / hybrid p50 exact; ANN | BM25 build s "
            "| graph build s | hub slices build s (GiB) | peak RSS / anon GiB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lat, ratio, rec = r["latency"], r["ratios_p50"], r["dense_recall_at_100"]
        hub = r.get("hub_slices")
        cells = [r["corpus"] + (" (sample hubs)" if r.get("hubs") == "sample" else ""), f"{r['fraction']:g}", f"{r['chunks']:,}", f"{r['triples']:,}",
                 f"{r['dense_index']} {r['dense_faiss']} ({r['build_ann_s']}, {r['anon_ann_gib']:.2f})",
                 f"{rec['mean']:.3f} / {rec['min']:.2f}", f"{r['hybrid_top15_same']:.0%}",
                 f"{lat['dense_exact']['p50_ms']:.1f} / {lat['dense_ann']['p50_ms']:.1f}",
                 f"{lat['hybrid_exact']['p50_ms']:.1f} / {lat['hybrid_ann']['p50_ms']:.1f} "
                 f"({ratio['hybrid_exact_over_ann']:.2f}x)",
                 f"{lat['naive_exact']['p50_ms']:.1f} / {lat['naive_ann']['p50_ms']:.1f} "
                 f"({ratio['naive_exact_over_ann']:.2f}x)",
                 f"{ratio['naive_over_hybrid_exact']:.2f}; {ratio['naive_over_hybrid_ann']:.2f}",
                 r["build_bm25_s"], r["build_graph_s"],
                 f"{r['build_hub_slices_s']} ({hub['gib']:.2f})" if hub else "—",
                 f"{r['peak_rss_gib']} / {r['peak_anon_gib']}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def plot(files: list[str], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    rows = sorted((json.loads(Path(f).read_text()) for f in files), key=lambda r: (r["corpus"], r["chunks"]))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for corpus in sorted({r["corpus"] for r in rows}):
        rs = [r for r in rows if r["corpus"] == corpus]
        x = [r["chunks"] for r in rs]
        for key, style in (("bm25", "-o"), ("hybrid_exact", "-^"), ("hybrid_ann", "--^"), ("naive_exact", "-d"),
                           ("naive_ann", "--d")):
            axes[0].plot(x, [r["latency"][key]["p50_ms"] for r in rs], style, label=f"{corpus} {key}")
        line, = axes[1].plot(x, [r["peak_rss_gib"] for r in rs], "-o", label=f"{corpus} RSS")
        if all("peak_anon_gib" in r for r in rs):
            axes[1].plot(x, [r["peak_anon_gib"] for r in rs], "--", color=line.get_color(), label=f"{corpus} anon")
        axes[2].plot(x, [r["build_bm25_s"] + r["build_graph_s"] + r["build_vectors_s"] for r in rs], "-o",
                     label=corpus)
    for ax, title in zip(axes, ("p50 CPU time per query (ms)", "peak RSS (solid) / anonymous (dashed), GiB",
                                         "index + graph build, CPU s"),
                         strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("chunks")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels (2x10^3, 3x10^4, ...) overlap
        ax.set_title(title)
        ax.grid(True, which="both", alpha=.3)
    axes[0].legend(fontsize=6)
    axes[1].legend(fontsize=8)
    fig.suptitle("Memory backend on synthetic corpora at fractions of GEAR Table 5 sizes (2 shared cores)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", choices=sorted(SIZES), default="musique")
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="where the vector files go (default: a temporary directory)")
    ap.add_argument("--out", default=None, help="write the measurements as JSON here")
    ap.add_argument("--dense", action="append", default=[], metavar="KEY=VALUE",
                    help="a backend.dense setting of the faiss search measured beside exact search, e.g. index=hnsw "
                         "or hnsw.ef_search=512 (repeatable; default: configs/backend/memory.yaml's)")
    ap.add_argument("--hubs", choices=("power", "sample"), default="power",
                    help="the entities' degrees: power = the power-law stress generator (default), sample = hubs as "
                         "the bundled MuSiQue sample predicts them at this size (module docstring)")
    ap.add_argument("--global-questions", type=int, default=GLOBAL_QUESTIONS,
                    help="--hubs sample: an entity in the contexts of at least this many of the sample's 100 "
                         "questions is corpus-wide (its degree scales with the corpus)")
    ap.add_argument("--write-profile", default=None, metavar="MUSIQUE_TRAIN_100_JSON",
                    help="rebuild benchmarks/musique_sample_entities.json from HippoRAG's musique_train_100.json "
                         "and data/musique_sample")
    ap.add_argument("--plot", default=None, help="write the scaling curve PNG from the JSON files given")
    ap.add_argument("files", nargs="*", help="JSON files for --plot / the table")
    a = ap.parse_args()
    if a.write_profile:
        PROFILE.write_text(json.dumps(entity_profile(Path(a.write_profile), REPO / "data" / "musique_sample")) + "\n")
        print(f"wrote {PROFILE}")
        return
    if a.plot:
        plot(a.files, a.plot)
        print(table(sorted((json.loads(Path(f).read_text()) for f in a.files),
                           key=lambda r: (r["corpus"], r["chunks"]))))
        return
    if a.workdir:
        Path(a.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=a.workdir) as d:
        r = run(a.corpus, a.fraction, a.queries, Path(d), a.seed, parse_dense(a.dense), a.hubs, a.global_questions)
    print(table([r]))
    if a.out:
        Path(a.out).write_text(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
