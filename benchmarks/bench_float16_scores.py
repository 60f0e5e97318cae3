#!/usr/bin/env python
"""Time of one query's scores over a float16 matrix (``backend.dense_dtype=float16``: exact search, HippoRAG 2's
fact and passage scores; ``gear_repro.utils.arrays.matrix_scores``), by the size of the blocks of rows converted to
float32 at a time, against numpy's mixed product, which first copies the whole matrix to float32.

The matrix is seeded random float16, ``--rows`` x ``--dim`` (2Wiki's 4,978,286 triples at MiniLM's 384 by default;
3.6 GiB); each way is timed ``--repeats`` times in turn in one process, and the JSON reports each way's best and
median seconds, its ratio to the default block's median, and whether its scores equal the default's bit for bit.

  python -m benchmarks.bench_float16_scores [--rows 4978286] [--dim 384] [--repeats 5] [--out F.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from gear_repro.utils.arrays import matrix_scores

BLOCKS = (2048, 4096, 16384, 65536)
DEFAULT = 16384


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4_978_286)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--mixed", action="store_true", help="also numpy's mixed product (a float32 copy of the matrix)")
    ap.add_argument("--out", type=Path, default=Path("outputs/bench/float16_scores.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    matrix = np.empty((args.rows, args.dim), np.float16)
    for a in range(0, args.rows, 1 << 18):  # filled in parts: no float32 copy of the whole matrix
        matrix[a:a + (1 << 18)] = rng.standard_normal((min(1 << 18, args.rows - a), args.dim), np.float32)
    q = rng.standard_normal(args.dim).astype(np.float32)
    ways = {f"blocks of {b:,} rows": (lambda b=b: matrix_scores(matrix, q, b)) for b in BLOCKS}
    if args.mixed:
        ways["numpy mixed product"] = lambda: matrix @ q
    times: dict[str, list[float]] = {w: [] for w in ways}
    scores = {}
    for _ in range(args.repeats):  # interleaved: each way sees the same machine load
        for w, f in ways.items():
            t = time.perf_counter()
            scores[w] = f()
            times[w].append(time.perf_counter() - t)
    ref_name = f"blocks of {DEFAULT:,} rows"
    ref = statistics.median(times[ref_name])
    rows = [{"way": w, "best_s": round(min(t), 3), "median_s": round(statistics.median(t), 3),
             "ratio_to_default": round(statistics.median(t) / ref, 2),
             "same_scores": bool(np.array_equal(scores[w], scores[ref_name]))} for w, t in times.items()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": args.rows, "dim": args.dim, "repeats": args.repeats, "ways": rows},
                                   indent=1))
    print("| way | best s | median s | median / default's | same scores |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['way']} | {r['best_s']} | {r['median_s']} | {r['ratio_to_default']} | {r['same_scores']} |")


if __name__ == "__main__":
    main()
