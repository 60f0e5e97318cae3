"""benchmarks/bench_scale.py (issue 11 §3) on a tiny synthetic corpus: sizes, the memory figures, the table."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_bench_scale_tiny_corpus(tmp_path):
    out = tmp_path / "hotpotqa.json"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_scale", "--corpus", "hotpotqa", "--fraction", "0.002", "--queries",
                           "3", "--workdir", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=True, cwd=REPO)
    r = json.loads(out.read_text())
    assert (r["chunks"], r["triples"], r["queries"]) == (21, 244, 3)  # 0.2% of 10,293 chunks / 122k triples
    assert r["entity_degree"]["max"] > r["entity_degree"]["median"] >= 1  # power-law hubs
    # anonymous memory is part of the resident set: its sampled peak cannot exceed the maximum RSS
    assert 0 < r["peak_anon_gib"] <= r["peak_rss_gib"]
    assert set(r["latency"]) == {"bm25", *(f"{s}_{m}" for s in ("dense", "hybrid", "naive") for m in ("exact", "ann"))}
    assert all(v["p95_ms"] >= v["p50_ms"] > 0 for v in r["latency"].values())
    # below auto's threshold the faiss side is auto_index (flat over float16 codes); 21 vectors: every one re-scored
    assert (r["dense_index"], r["dense_faiss"], r["dense_settings"]) == ("flat", "SQfp16", {"index": "flat"})
    assert r["dense_recall_at_100"] == {"mean": 1.0, "min": 1.0} and r["hybrid_top15_same"] == 1.0
    lat = r["latency"]
    assert r["ratios_p50"]["naive_over_hybrid_ann"] == round(lat["naive_ann"]["p50_ms"] / lat["hybrid_ann"]["p50_ms"], 2)
    # the expansion's own timings, per mode: the neighbour choice and the path scores are part of NaiveGE's latency
    assert set(r["naive_parts_ms"]) == {"exact", "ann"}
    for part in r["naive_parts_ms"].values():
        assert {"query_s", "gather_s", "score_s", "search_s"} <= set(part)
        assert 0 < part["gather_s"] + part["score_s"] <= part["search_s"]
    row = [ln for ln in proc.stdout.splitlines() if ln.startswith("| hotpotqa |")]
    assert len(row) == 1 and f"{r['peak_rss_gib']} / {r['peak_anon_gib']}" in row[0]
