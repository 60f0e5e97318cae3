#!/usr/bin/env python
"""GRIEVER Table 1 and Table 3 on one machine in one process (GRIEVER §5.2): R@5/10/15 and per-query
latency of BM25, dense (SBERT), RRF hybrid, composed and GRIEVER, plus GRIEVER's ablations, all on the
memory backend with the same embedder, and GRIEVER's index build time and peak memory.

  python -m benchmarks.bench_griever [--embedder minilm|mpnet] [--dataset data/musique_sample] [--limit N]
                                  [--out outputs/bench/griever_<embedder>.json]

Latency: wall time of ``retrieve(question, k)`` per question, query encoding included (the embedders'
query caches are emptied before each timed pass; one warm-up query per retriever loads the model).
Recall: per question |gold ∩ top-k| / |gold|, x100 (DESIGN.md). The retriever is called with k = the
evaluated rank (Table 1: "R@k" with "ms@k"). Prints a Markdown table and writes JSON.

``--scale F`` instead builds GRIEVER's indexes alone on a seeded synthetic corpus of F times a paper corpus
(``--corpus musique``: 148,793 passages, 10.2 triples each; ``2wiki``: 490,454), with random unit vectors (384-d,
as MiniLM) written beforehand into the embedding cache under the keys a SentenceEmbedder looks up, so the build
reads cached vectors as a CLI rerun does and no encoder runs. Each build runs in its own process (the corpus
generated there, then ``GrieverRetriever.build`` and the first BM25 searches of the passages and the units);
the JSON reports its peak RSS (``ru_maxrss``: mapped vector files included, as far as read), its peak
anonymous memory (RssAnon sampled every 20 ms: what the kernel cannot drop), wall seconds and the process's CPU
seconds (``cpu_s``, all steps: comparable on a shared machine). ``--base-code DIR`` builds a second time with the
``gear_repro`` of DIR (another commit's: ``git archive COMMIT gear_repro | tar -x -C DIR``) for an A/B in the same run:

  python -m benchmarks.bench_griever --scale 0.1 --base-code /tmp/base --workdir /tmp/gs --out F.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
EMBEDDERS = {"mpnet": "all-mpnet-base-v2", "minilm": "all-MiniLM-L6-v2"}
ABLATIONS = {  # GRIEVER Table 3 rows (+ our final-ranking variant)
    "GRIEVER w/ full_triples": {"shortlist_index": "full"},
    "GRIEVER w/o shortlisting": {"shortlist": False},
    "GRIEVER w/o composed_retriever": {"composed": False},
    "GRIEVER final=rrf (ours)": {"final": "rrf"},
}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


CORPORA = {"musique": 148_793, "2wiki": 490_454}  # passages (GEAR Table 5); 10.2 triples per passage in both
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70: syllable-string names, as docs/scale.md's


def _word(i: int) -> str:
    out = ""
    while True:
        i, r = divmod(i, len(SYLLABLES))
        out += SYLLABLES[r]
        if i == 0:
            return out
        i -= 1


def synthetic_corpus(corpus: str, fraction: float, seed: int = 0) -> tuple[list, list]:
    """Passages and triples in the shape of MuSiQue's full-size rehearsal (docs/scale.md): 10.2 triples per
    passage, ~0.98 distinct entity and predicate names and ~1.5 partial units per triple. Each passage has a
    topic entity (the subject of most of its triples) and 4 predicates of a shared pool; objects are mostly new
    two-word names, else one of a pool of corpus-wide entities."""
    from gear_repro.types import Passage, Triple

    rng = random.Random(seed)
    n = max(1, round(CORPORA[corpus] * fraction))
    vocab = max(1000, int(0.6 * n * 10.2))  # ~3 names per content token: a few same_as candidates per name
    preds = [f"{_word(rng.randrange(vocab))} {rng.choice(['of', 'in', 'by', 'for'])}" for _ in range(max(50, n // 3))]
    hubs = [f"{_word(rng.randrange(vocab))} {_word(rng.randrange(vocab))}" for _ in range(max(100, n // 5))]
    passages, triples = [], []
    for pi in range(n):
        pid = f"p{pi}"
        topic = f"{_word(rng.randrange(vocab))} {_word(rng.randrange(vocab))}"
        mine = rng.sample(preds, 4)
        text = []
        for ti in range(int(10.2 + rng.random())):
            s = topic if rng.random() < 0.9 else f"{_word(rng.randrange(vocab))} {_word(rng.randrange(vocab))}"
            o = hubs[int(len(hubs) * rng.random() ** 3)] if rng.random() < 0.25 else \
                f"{_word(rng.randrange(vocab))} {_word(rng.randrange(vocab))}"
            p = rng.choice(mine)
            triples.append(Triple(f"{pid}-t{ti}", s, p, o, pid))
            text.append(f"{s} {p} {o}.")
        passages.append(Passage(pid, topic, " ".join(text)))
    return passages, triples


def _write_npy(path: Path, rows: int, dim: int, rng: np.random.Generator) -> None:
    """Random unit float32 rows as an ``.npy``, written in blocks (never the whole matrix in memory)."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)})
        for a in range(0, rows, 65536):
            m = rng.standard_normal((min(65536, rows - a), dim), dtype=np.float32)
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            f.write(m.tobytes())


def scale_prepare(corpus: str, fraction: float, dim: int) -> dict:
    """Write the cached vectors a build at this scale reads: passages, names and units (the lists
    ``GrieverData._embed`` asks for, in its order)."""
    from omegaconf import OmegaConf

    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.methods.griever import GrieverRetriever
    from gear_repro.methods.griever.index import GrieverData
    from gear_repro.pipeline import capacity
    from gear_repro.utils.hashing import hash_texts
    from gear_repro.utils.paths import cache_dir

    passages, triples = synthetic_corpus(corpus, fraction)
    data = GrieverData.build(passages, triples, None)
    names = list(dict.fromkeys([*data.entity_name.values(), *data.pred_name.values()]))
    emb = SentenceEmbedder(EMBEDDERS["minilm"], show_progress=False)
    folder = cache_dir() / "embeddings"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for texts in ([p.content for p in passages], names, [u.text for u in data.units]):
        path = folder / f"{emb.model_id}-{hash_texts(texts)}-distinct.npy"
        if not path.exists():
            _write_npy(path, len(texts), dim, rng)
    cfg = OmegaConf.create({"backend": {"dense_dtype": "float32"}, "embedder": {"model": "all-MiniLM-L6-v2"},
                            "retriever": {"_target_": f"{GrieverRetriever.__module__}.GrieverRetriever"}})
    est = capacity.config_estimate(cfg, {"passages": (len(passages), sum(len(p.content) for p in passages))},
                                   GrieverRetriever.capacity_collections({}, triples), emb.model_id)
    return {"passages": len(passages), "triples": len(triples), "names": len(names), "units": len(data.units),
            "entities": len(data.entity_name),
            # the start-up check's memory estimate less its allowance for the process and model (no model here)
            "capacity_estimate_gib": round((est.memory - capacity.BASE_BYTES) / 2**30, 3)}


def scale_build(corpus: str, fraction: float) -> dict:
    """One measured build (this process): corpus, passage collection, ``GrieverRetriever.build`` and the first
    BM25 search of the passages and of the units (their indexes are built on first use)."""
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.methods.griever import GrieverRetriever

    peak_anon = [0]

    # RssAnon every 20 ms: the memory the kernel cannot drop (mapped files it can). Read here rather than through
    # bench_scale.AnonPeak: the A/B runs this in a base code tree, which may predate capacity.status_gib.
    def sample_anon() -> None:
        while True:
            with open("/proc/self/status") as f:
                kb = next(int(line.split()[1]) for line in f if line.startswith("RssAnon:"))
            peak_anon[0] = max(peak_anon[0], kb)
            time.sleep(0.02)

    threading.Thread(target=sample_anon, daemon=True).start()
    t0 = time.perf_counter()
    passages, triples = synthetic_corpus(corpus, fraction)
    t1 = time.perf_counter()
    emb = SentenceEmbedder(EMBEDDERS["minilm"], show_progress=False)
    backend = MemoryBackend()
    coll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in passages], emb)
    griever = GrieverRetriever(coll, emb, passages, triples, backend)
    stats = griever.build()
    t2 = time.perf_counter()
    store = griever.store
    store.passages.bm25_scores(["warm up"])
    store.units.bm25_scores(["warm up"])
    return {"generate_s": round(t1 - t0, 1), "build_s": round(t2 - t1, 1), "cpu_s": round(time.process_time(), 1),
            "bm25_s": round(time.perf_counter() - t2, 1), "build": stats, "peak_rss_gib": round(rss_mb() / 1024, 3),
            "peak_anon_gib": round(peak_anon[0] / 2**20, 3)}


def _child(fn: str, args: tuple, env: dict) -> dict:
    """``fn(*args)`` of this module in a new process (its own peak RSS); its JSON result."""
    code = f"import json; from bench_griever import {fn}; print(json.dumps({fn}(*{args!r})))"
    # run in the cache folder: ``python -c`` puts its working directory first on sys.path, and REPO's gear_repro
    # there would shadow the tree under test
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=env["GEAR_CACHE"], check=True, capture_output=True,
                       text=True)
    return json.loads(r.stdout.splitlines()[-1])


def scale_main(a: argparse.Namespace) -> None:
    """``--scale``: prepare the cache, then one process per code tree (base first), each measured alone."""
    work = Path(a.workdir).resolve()
    (work / "cache").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GEAR_CACHE": str(work / "cache"), "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    prep = _child("scale_prepare", (a.corpus, a.scale, 384), {**env, "PYTHONPATH": f"{REPO}:{REPO / 'benchmarks'}"})
    out: dict = {"corpus": a.corpus, "fraction": a.scale, "counts": prep}
    trees = ({"base": Path(a.base_code).resolve()} if a.base_code else {}) | {"this": REPO}
    for label, tree in trees.items():
        # its own index cache (the BM25 indexes are built, not reused), the shared embedding cache
        shutil.rmtree(work / label / "indexes", ignore_errors=True)
        (work / label).mkdir(parents=True, exist_ok=True)
        if not (work / label / "embeddings").exists():
            (work / label / "embeddings").symlink_to(work / "cache" / "embeddings")
        out[label] = _child("scale_build", (a.corpus, a.scale),
                            {**env, "GEAR_CACHE": str(work / label), "PYTHONPATH": f"{tree}:{REPO / 'benchmarks'}"})
        print(label, json.dumps(out[label]), flush=True)
    if "base" in out:
        out["peak_rss_ratio"] = round(out["this"]["peak_rss_gib"] / out["base"]["peak_rss_gib"], 3)
        out["peak_anon_ratio"] = round(out["this"]["peak_anon_gib"] / out["base"]["peak_anon_gib"], 3)
        out["cpu_s_ratio"] = round(out["this"]["cpu_s"] / max(out["base"]["cpu_s"], 0.1), 3)
    path = Path(a.out or REPO / "outputs" / "bench" / f"griever_scale_{a.corpus}_{a.scale}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k not in trees}), f"wrote {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm", choices=sorted(EMBEDDERS))
    ap.add_argument("--dataset", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--limit", type=int, default=None, help="first N questions (default all)")
    ap.add_argument("--ks", type=int, nargs="+", default=[5, 10, 15])
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the embedder (default 1)")
    ap.add_argument("--no-ablations", action="store_true")
    ap.add_argument("--unit-vectors", default="encode", choices=["encode", "compose"],
                    help="GRIEVER unit embeddings: encode the unit texts (paper) or compose name vectors")
    ap.add_argument("--out", default=None)
    ap.add_argument("--scale", type=float, default=None, help="build-only memory run at this fraction of --corpus")
    ap.add_argument("--corpus", default="musique", choices=sorted(CORPORA))
    ap.add_argument("--base-code", default=None, help="with --scale: a tree whose gear_repro builds first (A/B)")
    ap.add_argument("--workdir", default="/tmp/griever_scale", help="with --scale: cache folder")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if a.scale is not None:
        scale_main(a)
        return
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.data import load_dataset
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.evaluation.metrics import recall_at_k
    from gear_repro.methods.griever import GrieverRetriever
    from gear_repro.retrieval import BM25Retriever, ComposedRetriever, DenseRetriever, HybridRetriever

    ds = load_dataset(a.dataset, limit=a.limit)
    qs = ds.questions
    emb = SentenceEmbedder(EMBEDDERS[a.embedder], show_progress=False, num_threads=a.threads)
    backend = MemoryBackend()
    out: dict = {"dataset": str(a.dataset), "embedder": a.embedder, "unit_vectors": a.unit_vectors,
                 "n_questions": len(qs),
                 "passages": len(ds.passages), "triples": len(ds.triples), "rss_start_mb": round(rss_mb(), 1)}
    t = time.perf_counter()
    coll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], emb)
    coll.bm25(["warm up"], 1)
    coll.vectors()
    out["passage_index_s"] = round(time.perf_counter() - t, 3)
    out["rss_after_passages_mb"] = round(rss_mb(), 1)

    retrievers = {"BM25": BM25Retriever(coll), "Dense": DenseRetriever(coll, emb),
                  "RRFHybrid": HybridRetriever(coll, emb), "Composed": ComposedRetriever(coll, emb)}
    griever = GrieverRetriever(coll, emb, ds.passages, ds.triples, backend, unit_vectors=a.unit_vectors)
    t = time.perf_counter()
    out["griever_build"] = griever.build()
    out["griever_build_s"] = round(time.perf_counter() - t, 3)
    out["rss_after_griever_mb"] = round(rss_mb(), 1)
    retrievers["GRIEVER"] = griever
    if not a.no_ablations:
        for label, kw in ABLATIONS.items():
            g = GrieverRetriever(coll, emb, ds.passages, ds.triples, backend, unit_vectors=a.unit_vectors, **kw)
            t = time.perf_counter()
            g.build()
            out.setdefault("ablation_build_s", {})[label] = round(time.perf_counter() - t, 3)
            retrievers[label] = g
    rows = {}
    for label, r in retrievers.items():
        r.retrieve("warm up query", a.ks[0])
        row: dict = {}
        for k in a.ks:
            emb.forget()
            if isinstance(r, GrieverRetriever):
                r.matcher._cache.clear()
            ms, rec = [], []
            for q in qs:
                t = time.perf_counter()
                ids = r.retrieve(q.question, k).ids
                ms.append(1000 * (time.perf_counter() - t))
                rec.append(recall_at_k(ids, q.gold_ids, k))
            row[f"R@{k}"] = round(100 * float(np.mean(rec)), 1)
            row[f"ms@{k}"] = {"mean": round(float(np.mean(ms)), 1), "std": round(float(np.std(ms)), 1),
                              "p50": round(float(np.percentile(ms, 50)), 1), "p95": round(float(np.percentile(ms, 95)), 1)}
        rows[label] = row
        print(label, json.dumps(row), flush=True)
    out["rows"] = rows
    out["rss_peak_mb"] = round(rss_mb(), 1)
    k0 = a.ks[0]
    hdr = "| retriever | " + " | ".join(f"R@{k}" for k in a.ks) + f" | ms@{k0} p50 | ms@{k0} p95 | ms@{k0} mean±sd |"
    lines = [hdr, "|" + "---|" * (len(a.ks) + 4)]
    for label, row in rows.items():
        m = row[f"ms@{k0}"]
        lines.append(f"| {label} | " + " | ".join(f"{row[f'R@{k}']:.1f}" for k in a.ks)
                     + f" | {m['p50']:.0f} | {m['p95']:.0f} | {m['mean']:.0f}±{m['std']:.0f} |")
    hy, gr = rows["RRFHybrid"], rows["GRIEVER"]
    out["griever_above_hybrid_every_k"] = all(gr[f"R@{k}"] > hy[f"R@{k}"] for k in a.ks)
    table = "\n".join(lines)
    print(table)
    print(f"GRIEVER above RRF hybrid at every k: {out['griever_above_hybrid_every_k']}; GRIEVER index build "
          f"{out['griever_build_s']} s; peak RSS {out['rss_peak_mb']} MB")
    out["markdown"] = table
    path = Path(a.out or REPO / "outputs" / "bench" / f"griever_{a.embedder}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
