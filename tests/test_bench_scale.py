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
    assert set(r["latency"]) == {"bm25", "dense", "hybrid", "naive"}
    assert all(v["p95_ms"] >= v["p50_ms"] > 0 for v in r["latency"].values())
    row = [ln for ln in proc.stdout.splitlines() if ln.startswith("| hotpotqa |")]
    assert len(row) == 1 and f"{r['peak_rss_gib']} / {r['peak_anon_gib']}" in row[0]
