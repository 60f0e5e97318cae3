"""benchmarks/bench_gpu.py: the bundle a bare GPU machine runs from (under 64 MiB, MiniLM in float16, omegaconf
vendored), and its protocol end to end on the CPU from inside the bundle, on a slice of the MuSiQue sample."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.requirements import missing

REPO = Path(__file__).resolve().parent.parent


def small_sample(out: Path, questions: int = 2, passages: int = 40) -> Path:
    """The first ``questions`` sample questions with their gold passages, the first ``passages`` passages, and
    the triples of those passages."""
    src = REPO / "data" / "musique_sample"
    qs = [json.loads(line) for line in (src / "questions.jsonl").read_text().splitlines()][:questions]
    keep = {g for q in qs for g in q["gold_ids"]} | {str(i) for i in range(passages)}
    out.mkdir()
    (out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    for name, key in (("corpus.jsonl", "id"), ("triples.jsonl", "passage_id")):
        lines = [ln for ln in (src / name).read_text().splitlines() if json.loads(ln)[key] in keep]
        (out / name).write_text("\n".join(lines) + "\n")
    return out


@pytest.mark.slow
def test_the_bundle_runs_the_protocol_from_its_own_folder(tmp_path) -> None:
    from gear_repro.embedding.sbert_weights import MINILM, resolve_model

    if resolve_model(MINILM) == MINILM:
        missing("MiniLM not installed offline (make install-test-models)")
    bundle = tmp_path / "bundle"
    subprocess.run([sys.executable, "-m", "benchmarks.bench_gpu", "pack", "--out", str(bundle)], cwd=REPO,
                   check=True, capture_output=True)
    size = sum(f.stat().st_size for f in bundle.rglob("*") if f.is_file())
    assert size < 64 * 2**20
    assert 40e6 < (bundle / "model" / "model.safetensors").stat().st_size < 50e6  # float16: half of 90.9 MB
    assert (bundle / "site" / "omegaconf" / "__init__.py").is_file()
    assert (bundle / "data" / "musique_sample" / "corpus.jsonl").is_file()
    data = small_sample(tmp_path / "data")
    out = tmp_path / "cpu.json"
    run = subprocess.run([sys.executable, "-m", "benchmarks.bench_gpu", "run", "--device", "cpu", "--data",
                          str(data), "--paths", "12", "--path-rows", "8", "--out", str(out)],
                         cwd=bundle, capture_output=True, text=True)  # the bundle's own package and model
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["model"] == str(bundle / "model") and report["counts"]["questions"] == 2
    row = report["rows"]["fp32"]
    assert row["precision_used"] == "fp32" and row["passages_per_s"] > 0
    table = row["expansion"]["8"]
    assert set(table) == {"5", "10", "15"}
    assert all(0 <= e["naive_recall"] <= 100 and e["naive_p50_ms"] > 0 for e in table.values())
    det = row["determinism"]
    assert det["paths"] == 12 and det["paths_shuffled_identical"] and det["paths_groups_of_3_identical"]
    assert det["rankings_identical"]
