"""Encoder precision on this CPU: ``embedder.precision`` fp32 against bf16 (``torch.autocast`` with
the linear weights converted and packed once at load and mpnet's attention fused: gear_repro/embedding/bf16.py) in
one process, on the bundled MuSiQue sample. With --variants, other bf16 executions as further rows:
``bf16-autocast`` (the fp32 model under autocast alone, the earlier implementation), ``bf16-eager``
(packed linears, mpnet's attention eager: sessions 9-13) and ``bf16-all`` (the whole model converted to bf16,
packed linears, no autocast: residual stream, layer norms and pooling in bf16).

Per precision, one thread, after a warm-up, per CPU second of the process (``time.process_time``):
  * passages/s and triples/s: the first N passages (or, with --spread, N spread over the sample) and M triples
    ("s p o"), batch 32, as the corpus encoder runs them; paths/s: P two-triple path texts (a triple and a neighbour sharing an entity, as
    the exact scorer builds them) through ``encode_fixed`` (fixed-shape batches of ``DEFAULT_PATH_ROWS`` rows) and one at a time
    (``encode_alone``, the pre-issue-25 path encoding);
  * cosine of each bf16 vector with the fp32 vector of the same text (mean and minimum) for passages, triples,
    paths;
  * with --recall: all passages and triples encoded in that precision (so the rates and cosines cover the whole
    sample), then R@5/10/15 over every question of SBERT, hybrid and hybrid + NaiveGE (exact scorer, the paper's
    beam; not with --no-expansion, where --triples may be given), base k = the evaluated rank (Table 2); for bf16
    twice: questions by the fp32 twin (``embedder.query_precision=fp32``, the default) and in bf16 (``same``),
    over the same bf16 corpus, triple and path vectors (the path store is on, so the second pass encodes only its
    questions). Vectors go to a fresh $GEAR_CACHE under --work, so nothing is read from earlier caches;
  * with --rounds N: N more passes over the passages per row, alternated (the rows in order in even rounds, in
    reverse in odd ones), without caches: the median passages/s of each and its ratio to fp32's median;
  * with --openvino: rows ``openvino-fp32`` and ``openvino-bf16`` (``embedder.backend=openvino``, its CPU plugin's
    inference precision f32 / bf16; needs `make install-encoders`), compared with torch fp32 like the others
    (recall for ``openvino-bf16`` too).

    python -m benchmarks.bench_precision --embedder minilm --recall --out precision_minilm.json
    python -m benchmarks.bench_precision --embedder /path/to/all-mpnet-base-v2 --passages 200 --triples 1000
    python -m benchmarks.bench_precision --embedder minilm --variants --passages 300 --triples 1000
    python -m benchmarks.bench_precision --embedder mpnet --spread --passages 96 --triples 1000 --paths 300
    python -m benchmarks.bench_precision --embedder mpnet --recall --no-expansion --triples 1000 --paths 300
    python -m benchmarks.bench_precision --embedder minilm --openvino --recall --rounds 5

A CPU without native bf16 cannot run this comparison (embedder.precision=bf16 is refused there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

from gear_repro.backends.base import IndexDoc  # noqa: E402
from gear_repro.backends.memory import MemoryBackend  # noqa: E402
from gear_repro.core.triple_graph import TripleIndex, triple_docs  # noqa: E402
from gear_repro.data import load_dataset  # noqa: E402
from gear_repro.embedding import SentenceEmbedder  # noqa: E402
from gear_repro.embedding.precision import native_bf16  # noqa: E402
from gear_repro.embedding.sbert_weights import MINILM, MPNET, resolve_model  # noqa: E402
from gear_repro.evaluation.metrics import recall_at_k  # noqa: E402
from gear_repro.methods.gear.expansion import NaiveGE  # noqa: E402
from gear_repro.methods.gear.scorers import DEFAULT_PATH_ROWS  # noqa: E402
from gear_repro.retrieval.base import DenseRetriever, HybridRetriever  # noqa: E402

PRECISIONS = ("fp32", "bf16")
AUTOCAST, EAGER, ALL_BF16 = "bf16-autocast", "bf16-eager", "bf16-all"
OPENVINO = {"openvino-fp32": "fp32", "openvino-bf16": "bf16"}  # row -> embedder.precision with backend=openvino


class AutocastEmbedder(SentenceEmbedder):
    """The fp32 model run under ``torch.autocast(cpu, bfloat16)`` alone (the earlier
    ``embedder.precision=bf16``), under a cache key of its own."""

    def __init__(self, model: str, **kw) -> None:
        super().__init__(model, precision="fp32", **kw)
        self.model_id += "-autocast"

    def _encode(self, texts, progress: bool = False) -> np.ndarray:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            raw = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=False,
                                    convert_to_tensor=True, show_progress_bar=False)
        self.stats["encoded"] += len(texts)
        return self._unit(raw)

    def _encode_shapes(self, texts: list[str], rows: int) -> np.ndarray:
        import torch

        with torch.autocast("cpu", dtype=torch.bfloat16):
            return super()._encode_shapes(texts, rows)


class EagerBf16Embedder(SentenceEmbedder):
    """``embedder.precision=bf16`` as in sessions 9-13: packed linear layers, mpnet's attention eager (scores, bias
    and softmax as transformers computes them) under autocast, under a cache key of its own."""

    def __init__(self, model: str, **kw) -> None:
        super().__init__(model, precision="bf16", **kw)
        self.model_id += "-eager"
        self._fuse_mpnet = False  # the embedder's own load, without the fusion


class AllBf16Embedder(SentenceEmbedder):
    """The bf16 embedder's model (packed linears) with every other parameter converted to bf16 as well, run
    without autocast, under a cache key of its own."""

    def __init__(self, model: str, **kw) -> None:
        super().__init__(model, precision="bf16", **kw)
        self.model_id += "-all"

    @property
    def model(self):
        import torch

        if self._model is None:
            SentenceEmbedder.model.fget(self).to(torch.bfloat16)
        return self._model

    def autocast(self):
        return nullcontext()


def pick(items: list, n: int | None, spread: bool) -> list:
    """The first ``n`` items, or with ``spread`` ``n`` items evenly spaced over all of them (all when ``n`` is None)."""
    if n is None or n >= len(items):
        return list(items)
    return [items[i] for i in np.linspace(0, len(items) - 1, n).astype(int)] if spread else list(items[:n])


def timed(f, texts: list[str]) -> tuple[float, np.ndarray]:
    """(texts per CPU second, vectors) of ``f(texts)``."""
    t = time.process_time()
    vecs = f(texts)
    return len(texts) / (time.process_time() - t), vecs


def sample_paths(ds, n: int) -> list[str]:
    """``n`` two-triple path texts: each triple (corpus order, every k-th) with its first neighbour."""
    index = TripleIndex(None, ds.triples)
    out: list[str] = []
    step = max(1, len(ds.triples) // (2 * n))
    for row in range(0, len(ds.triples), step):
        nb = index.neighbour_rows(row)
        if len(nb):
            out.append(f"{index.text(index.ids[row])} {index.text(index.ids[int(nb[0])])}")
        if len(out) == n:
            break
    return out


def recall(ds, emb: SentenceEmbedder, ks: list[int], expansion: bool = True) -> dict:
    """R@k (0-100) of SBERT, hybrid and (with ``expansion``) hybrid + NaiveGE (exact scorer) over every question,
    matched k."""
    backend = MemoryBackend()
    pcoll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], emb)
    retrievers = {"sbert": DenseRetriever(pcoll, emb), "hybrid": HybridRetriever(pcoll, emb)}
    naive = None
    if expansion:
        tcoll = backend.open_collection("triples", triple_docs(ds.triples), emb)
        naive = NaiveGE(TripleIndex(tcoll, ds.triples), emb, beam={"scorer": "exact", "path_cache": True})
    methods = [*retrievers, *(["hybrid+naive"] if naive else [])]
    hits: dict[str, dict[int, list[float]]] = {m: {k: [] for k in ks} for m in methods}
    for q in (q for q in ds.questions if q.gold_ids):
        for k in ks:
            for name, r in retrievers.items():
                ranking = r.retrieve(q.question, k)
                hits[name][k].append(recall_at_k(ranking.ids, q.gold_ids, k))
            if naive is not None:
                out = naive.expand(q.question, retrievers["hybrid"].retrieve(q.question, k))
                hits["hybrid+naive"][k].append(recall_at_k(out.ranking.ids, q.gold_ids, k))
    return {m: {k: round(100 * float(np.mean(v)), 2) for k, v in per.items()} for m, per in hits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", default="minilm", help="minilm | mpnet | a local sentence-transformers folder")
    ap.add_argument("--data", default=str(REPO / "data" / "musique_sample"))
    ap.add_argument("--passages", type=int, default=None, help="first N passages (default all)")
    ap.add_argument("--triples", type=int, default=None, help="first M triples (default all)")
    ap.add_argument("--paths", type=int, default=500, help="path texts for paths/s and their cosine")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--recall", action="store_true", help="R@k of SBERT, hybrid, NaiveGE (needs all passages/triples)")
    ap.add_argument("--no-expansion", action="store_true",
                    help="with --recall: SBERT and hybrid only (NaiveGE's exact scorer is the slow part with mpnet)")
    ap.add_argument("--variants", action="store_true", help=f"rows {AUTOCAST}, {EAGER}, {ALL_BF16} (no recall)")
    ap.add_argument("--spread", action="store_true",
                    help="--passages/--triples spread evenly over the sample (long passages included), not the first")
    ap.add_argument("--rounds", type=int, default=0,
                    help="then N alternated rounds of fp32 and bf16 passage encoding (order flipped every round, no "
                         "caches): passages/s medians and their ratio, less sensitive to the machine's drift")
    ap.add_argument("--openvino", action="store_true", help="rows openvino-fp32 and openvino-bf16 (recall for the latter)")
    ap.add_argument("--work", default=None, help="directory of the fresh $GEAR_CACHE (default a temporary one)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    ok, why = native_bf16("cpu")
    if not ok:
        raise SystemExit(f"this CPU has no native bf16 ({why}): nothing to compare")
    # the offline copy is looked up under the user's $GEAR_CACHE before vectors are sent to a fresh one
    model = resolve_model({"minilm": MINILM, "mpnet": MPNET}.get(a.embedder, a.embedder))
    os.environ["GEAR_CACHE"] = a.work or tempfile.mkdtemp(prefix="bench_precision_")
    ds = load_dataset(a.data)
    if a.recall and (a.passages or (a.triples and not a.no_expansion)):
        raise SystemExit("--recall encodes every passage and (for NaiveGE) every triple: drop --passages/--triples")
    ptexts = [p.content for p in pick(ds.passages, a.passages, a.spread)]
    ttexts = [t.text for t in pick(ds.triples, a.triples, a.spread)]
    paths = sample_paths(ds, a.paths)
    report: dict = {"embedder": model, "cpu": platform.processor() or platform.machine(), "bf16": why,
                    "threads": a.threads, "clock": "process CPU", "load_avg_start": os.getloadavg(),
                    "counts": {"passages": len(ptexts), "triples": len(ttexts), "paths": len(paths)}, "spread": a.spread,
                    "path_rows": DEFAULT_PATH_ROWS, "rows": {}}
    vecs: dict[str, dict[str, np.ndarray]] = {}
    embs: dict[str, SentenceEmbedder] = {}
    with_recall = (*PRECISIONS, "openvino-bf16")
    for prec in PRECISIONS + ((AUTOCAST, EAGER, ALL_BF16) if a.variants else ()) + (tuple(OPENVINO) if a.openvino else ()):
        kw = {"num_threads": a.threads, "show_progress": False}
        cls = {AUTOCAST: AutocastEmbedder, EAGER: EagerBf16Embedder, ALL_BF16: AllBf16Embedder}.get(prec)
        emb = embs[prec] = (cls(model, **kw) if cls else
                            SentenceEmbedder(model, precision=OPENVINO[prec], backend="openvino", **kw) if prec in OPENVINO
                            else SentenceEmbedder(model, precision=prec, **kw))
        emb.encode_fixed(paths[:DEFAULT_PATH_ROWS], DEFAULT_PATH_ROWS)  # warm-up: weights, allocator, kernels
        emb._encode(ptexts[:8])
        row: dict = {}
        row["passages_per_s"], pv = timed(lambda ts, e=emb: e.encode_corpus(ts, "passages"), ptexts)
        row["triples_per_s"], tv = timed(lambda ts, e=emb: e.encode_corpus(ts, "triples"), ttexts)
        row["paths_per_s"], xv = timed(lambda ts, e=emb: e.encode_fixed(ts, DEFAULT_PATH_ROWS), paths)
        emb.forget()
        row["paths_alone_per_s"], _ = timed(emb.encode_alone, paths)
        vecs[prec] = {"passages": pv, "triples": tv, "paths": xv}
        if a.recall and prec in with_recall:
            emb.forget()
            t = time.perf_counter()
            row["recall"] = recall(ds, emb, [5, 10, 15], expansion=not a.no_expansion)
            row["recall_wall_s"] = round(time.perf_counter() - t, 1)
            if emb.queries is not emb:  # the same bf16 vectors (disk caches), questions in bf16 too
                same = SentenceEmbedder(model, precision=OPENVINO.get(prec, prec), query_precision="same",
                                        backend=emb.backend, **kw)
                row["recall_bf16_queries"] = recall(ds, same, [5, 10, 15], expansion=not a.no_expansion)
        report["rows"][prec] = row
        print(prec, json.dumps(row), flush=True)
    for prec in vecs.keys() - {"fp32"}:
        for kind in ("passages", "triples", "paths"):
            cos = (vecs["fp32"][kind] * vecs[prec][kind]).sum(axis=1)
            report["rows"][prec][f"cos_{kind}"] = {"mean": float(cos.mean()), "min": float(cos.min())}
    if a.rounds:
        report["rounds"] = alternated_rates(embs, ptexts, a.rounds)
        print("rounds", json.dumps(report["rounds"]), flush=True)
    report["load_avg_end"] = os.getloadavg()
    print_table(report)
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=2))


def alternated_rates(embs: dict[str, SentenceEmbedder], texts: list[str], rounds: int) -> dict:
    """Passages/s of every row over ``rounds`` rounds, alternating the order (``_encode``: batch 32 as the corpus
    encoder, no cache); per row the rates and their median, and each median's ratio to fp32's."""
    names = list(embs)
    rates: dict[str, list[float]] = {p: [] for p in names}
    for r in range(rounds):
        for prec in (names if r % 2 == 0 else names[::-1]):
            rates[prec].append(round(timed(embs[prec]._encode, texts)[0], 2))
    med = {p: float(np.median(v)) for p, v in rates.items()}
    return {"passages_per_s": rates, "median": med,
            "ratio": {p: round(m / med["fp32"], 3) for p, m in med.items() if p != "fp32"}}


def print_table(report: dict) -> None:
    f32 = report["rows"]["fp32"]
    print(f"\n{report['embedder']}; {report['counts']}; {report['threads']} thread(s), per CPU second; "
          f"bf16: {report['bf16']}; load {report['load_avg_start']} -> {report['load_avg_end']}\n")
    print("| precision | passages/s | triples/s | paths/s (batches of "
          f"{report['path_rows']}) | paths/s (one at a time) | cosine to fp32 passages / triples / paths, mean (min) |")
    print("|---|---|---|---|---|---|")
    for name, r in report["rows"].items():
        cos = " / ".join(f"{r[f'cos_{k}']['mean']:.6f} ({r[f'cos_{k}']['min']:.6f})" for k in ("passages", "triples", "paths")) \
            if name != "fp32" else "1 / 1 / 1"
        cells = [f"{r[k]:.1f}" + ("" if name == "fp32" else f" ({r[k] / f32[k]:.2f}×)")
                 for k in ("passages_per_s", "triples_per_s", "paths_per_s", "paths_alone_per_s")]
        print(f"| {name} | " + " | ".join(cells) + f" | {cos} |")
    if "rounds" in report:
        r = report["rounds"]
        print(f"\npassages/s over {len(r['passages_per_s']['fp32'])} alternated rounds, medians: fp32 "
              f"{r['median']['fp32']:.1f}, " + ", ".join(f"{p} {r['median'][p]:.1f} ({x:.2f}×)" for p, x in r["ratio"].items())
              + f"; rounds {r['passages_per_s']}")
    if "recall" in f32:
        sides = [(name, key, label) for name, row in report["rows"].items() if name != "fp32"
                 for key, label in (("recall", "fp32 queries"), ("recall_bf16_queries", "bf16 queries")) if key in row]
        print("\n| method | fp32 R@5 / R@10 / R@15 | " + " | ".join(
            f"{name}, {label}: R@5 / R@10 / R@15 (− fp32)" for name, _, label in sides) + " |")
        print("|---|---|" + "---|" * len(sides))
        for m in f32["recall"]:
            a = f32["recall"][m]
            rows = report["rows"]
            cells = [" / ".join(f"{rows[n][key][m][k]:.1f} ({rows[n][key][m][k] - a[k]:+.2f})" for k in a)
                     for n, key, _ in sides]
            print(f"| {m} | " + " / ".join(f"{a[k]:.1f}" for k in a) + " | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
