"""Encoder back-ends on this CPU: torch fp32 (sentence-transformers) against ONNX Runtime fp32,
ONNX Runtime dynamic int8 and OpenVINO (gear_repro/embedding/runtimes.py), on the bundled MuSiQue sample.

Per back-end: passages/s (first N sample passages, title + text) and triples/s (first M triples, "s p o"),
one thread, batch 32, after a warm-up, per CPU second of the process (time.process_time); cosine of each vector with torch fp32's vector for the same text
(mean and minimum); with --recall, dense-retrieval R@5/10/15 over all questions (all passages encoded by
that back-end; torch's passage matrix comes from the embedding cache).

    python -m benchmarks.bench_encoders --embedder minilm --recall --out encoders_minilm.json
    python -m benchmarks.bench_encoders --embedder mpnet --passages 100 --triples 500
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

from gear_repro.backends.memory import top_k_dense  # noqa: E402
from gear_repro.data import load_dataset  # noqa: E402
from gear_repro.embedding import SentenceEmbedder  # noqa: E402
from gear_repro.embedding.runtimes import BACKENDS  # noqa: E402
from gear_repro.embedding.sbert_weights import MINILM, MPNET  # noqa: E402
from gear_repro.evaluation.metrics import recall_at_k  # noqa: E402


def rate(emb: SentenceEmbedder, texts: list[str]) -> tuple[float, np.ndarray]:
    emb._encode(texts[:4])  # warm-up (graph compilation, allocator)
    t = time.process_time()  # CPU time, one thread: the rate of an idle core on a shared machine
    vecs = emb._encode(texts)
    return len(texts) / (time.process_time() - t), vecs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedder", choices=["mpnet", "minilm"], default="minilm")
    ap.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS)
    ap.add_argument("--passages", type=int, default=200)
    ap.add_argument("--triples", type=int, default=1000)
    ap.add_argument("--recall", action="store_true", help="dense R@k on the sample (encodes all passages)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    ds = load_dataset(REPO / "data" / "musique_sample")
    model = MPNET if a.embedder == "mpnet" else MINILM
    ptexts = [p.content for p in ds.passages[: a.passages]]
    ttexts = [t.text for t in (ds.triples or [])[: a.triples]]
    qs = [q for q in ds.questions if q.gold_ids]
    rows, ref = {}, {}
    for b in a.backends:
        emb = SentenceEmbedder(model, backend=b, num_threads=1, show_progress=False)
        p_rate, pv = rate(emb, ptexts)
        t_rate, tv = rate(emb, ttexts)
        if b == "torch":
            ref = {"p": pv, "t": tv}
        row = {"passages_per_s": round(p_rate, 1), "triples_per_s": round(t_rate, 1)}
        if ref:
            cos = np.concatenate([(pv * ref["p"]).sum(1), (tv * ref["t"]).sum(1)])
            row.update(cos_mean=round(float(cos.mean()), 5), cos_min=round(float(cos.min()), 5))
        if a.recall:
            mat = emb.encode_corpus([p.content for p in ds.passages], desc="passages")
            qv = emb.encode([q.question for q in qs])
            hits = top_k_dense(mat, qv, 15)
            for k in (5, 10, 15):
                row[f"R@{k}"] = round(100 * float(np.mean([recall_at_k([ds.passages[i].id for i in idx[:k]], q.gold_ids, k)
                                                           for (idx, _), q in zip(hits, qs, strict=True)])), 1)
        rows[b] = row
        print(b, row, flush=True)
    cols = ["passages_per_s", "triples_per_s", "cos_mean", "cos_min"] + (["R@5", "R@10", "R@15"] if a.recall else [])
    print(f"\n{model}, 1 thread, batch 32, per CPU second, {len(ptexts)} passages / {len(ttexts)} triples; load {os.getloadavg()}")
    print("| back-end | " + " | ".join(cols) + " |\n|" + "---|" * (len(cols) + 1))
    for b, r in rows.items():
        print(f"| {b} | " + " | ".join(str(r.get(c, "—")) for c in cols) + " |")
    if a.out:
        Path(a.out).write_text(json.dumps({"embedder": model, "rows": rows, "load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
