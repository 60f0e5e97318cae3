"""benchmarks/bench_scale.py on a tiny synthetic corpus: sizes, the memory figures, the table."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from tests.helpers.requirements import missing

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


def _degrees(triples) -> np.ndarray:
    from gear_repro.core.triple_graph import normalize_entity

    deg = Counter(e for t in triples for e in {normalize_entity(t.subject), normalize_entity(t.object)})
    return np.asarray(sorted(deg.values(), reverse=True))


def test_sample_hubs_match_the_bundled_sample_at_its_size():
    """``--hubs sample`` at the sample's own size has its entity statistics (the sample: 0.944 entities per triple,
    largest 226 triples = 1.31%, 67.7% of entities in one triple); the power-law generator has far heavier hubs."""
    from benchmarks.bench_scale import generate

    frac = 17_204 / 1_520_000
    _, sample = generate("musique", frac, 0, "sample")
    d = _degrees(sample)
    assert len(sample) == 17_204 and 0.92 <= d.size / len(sample) <= 0.96
    assert 0.010 <= d[0] / len(sample) <= 0.016 and 0.64 <= (d == 1).mean() <= 0.71
    _, power = generate("musique", frac, 0, "power")
    p = _degrees(power)
    assert p.size / len(power) < 0.5 and p[0] / len(power) > 0.1


def test_sample_hubs_scale_with_the_corpus():
    """Corpus-wide entities keep their share: at 10% of MuSiQue size (14,879 chunks) the largest has ~226 x 14,879 /
    1,890 = 1,779 triples; question-local ones keep sample-sized degrees; names are one per entity."""
    from benchmarks.bench_scale import generate

    passages, triples = generate("musique", 0.1, 0, "sample")
    d = _degrees(triples)
    assert len(passages) == 14_879 and len(triples) == 152_000
    assert 1_700 <= d[0] <= 1_800 and 0.9 <= d.size / len(triples) <= 0.96
    assert int(np.median(d)) == 1


def test_profile_is_rebuilt_from_the_raw_sample(shared_data):
    from benchmarks.bench_scale import PROFILE, entity_profile

    raw = shared_data / "musique_sample" / "musique_train_100.json"
    if not raw.exists():
        missing(f"{raw} not found")
    assert entity_profile(raw, REPO / "data" / "musique_sample") == json.loads(PROFILE.read_text())
