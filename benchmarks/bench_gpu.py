"""The CUDA path on one NVIDIA GPU: ``embedder.device=cuda`` with ``embedder.precision`` fp32 / fp16 / bf16 on the
bundled MuSiQue sample (1,890 passages, 17,204 triples, 100 questions), dense search on the CPU as always.

Two steps: ``pack`` here writes one folder (under 64 MiB) that a bare GPU machine without network runs from:
the package, this benchmark, the prepared sample, MiniLM's weights stored in float16 (45 MB; the embedder
computes in ``embedder.precision`` whatever the file's dtype), and the pure-Python packages it needs beyond torch,
transformers and sentence-transformers (omegaconf and its antlr4 runtime, copied from this environment into
``site/``; the antlr4 runtime has no wheel), bm25s, tenacity, json_repair and attrs beside them, and PyStemmer's binary wheels for CPython 3.10-3.13
on x86-64 Linux in ``wheels/`` (downloaded from PyPI by ``pack``; ``run`` unpacks the one matching its Python).
faiss is not needed: the sample is below ``backend.dense.auto_min_vectors``, so dense search is exact numpy.
``run`` there reports, per precision:

  * passages/s and triples/s (the corpus encoder, batch ``--batch-size``, wall clock, the GPU synchronised by the
    copy of the vectors to the host) of a first pass and of a second, warm one, and query encodes/s (one question
    at a time, as retrieval asks);
  * the cosine of each vector with the same text's fp32 vector on the GPU (mean, min), and of the GPU's fp32
    passage vectors with the CPU's (the vectors the recorded numbers come from);
  * R@5/10/15 and p50/p95 latency of the hybrid retriever and of hybrid + NaiveGE with the exact scorer
    (GEAR Alg. 1, l=2, b=10, 100 neighbours, γ=20; base k = the evaluated rank as in Table 2), every NaiveGE pass
    cold (the scorer's path memo and the query vectors emptied before it: the first pass of a question), with
    ``embedder.cuda_graphs`` on ("graphs") and off ("eager"), per ``--path-rows`` (first the scorer's default,
    ``beam.scorer_options.cuda_batch_size`` on CUDA, no option given); the ratio NaiveGE p50 / hybrid
    p50 (target <= 2) and the part of a pass spent in ``encode_fixed``;
  * and with ``beam.scorer_options.triple_pieces`` on ("+pieces": a path's word pieces joined from its triples',
    the default on CUDA) and off (its text tokenised);
  * that part broken down for the first mode and ``--path-rows`` value: building the passes' tensors by
    tokenising (tokenizer threads off, as runs have them, and on) or from the joined pieces, the passes on the
    device with the copy back, the whole call;
  * whether the exact scorer's path vectors and NaiveGE's rankings are bit-identical across batch compositions:
    the same path texts encoded in their order, shuffled and in small groups; 20 questions' rankings run forward
    and backward with a warm memo; with both modes, whether the graphs' vectors and rankings equal the eager
    passes'. If not, the same check runs again in a child process with
    ``torch.use_deterministic_algorithms(True)`` and ``CUBLAS_WORKSPACE_CONFIG=:4096:8``.

    python -m benchmarks.bench_gpu pack --out .gpu                   # here
    cd .gpu && python3 -m benchmarks.bench_gpu run --out gpu.json    # on the GPU machine (offline)

``run --device cpu`` runs the same protocol on a CPU (fp32 only; a check of the script, not a GPU figure).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent.parent
VENDORED = ("omegaconf", "antlr4", "bm25s", "tenacity", "json_repair", "attr")  # pure Python, beyond a torch image
BINARY_WHEELS = ("PyStemmer",)  # C extensions: a wheel per CPython version, unpacked by ``run``
WHEEL_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MODEL_FILES = ("1_Pooling", "config.json", "config_sentence_transformers.json", "modules.json",
               "sentence_bert_config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json",
               "vocab.txt")
KS = (5, 10, 15)
WARM_QUESTIONS = 10  # NaiveGE passes before the timed ones
BUNDLE_LIMIT = 64 * 2**20


def pack(out: Path) -> None:
    """Write the bundle: package, benchmarks, sample, float16 MiniLM, wheels; refuse one over 64 MiB."""
    from safetensors.torch import load_file, save_file

    from gear_repro.embedding.sbert_weights import MINILM, resolve_model

    if out.exists():
        shutil.rmtree(out)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(HERE / "gear_repro", out / "gear_repro", ignore=skip)
    shutil.copytree(HERE / "benchmarks", out / "benchmarks", ignore=skip)
    shutil.copytree(HERE / "data" / "musique_sample", out / "data" / "musique_sample")
    src = Path(resolve_model(MINILM))
    if not src.is_dir():
        raise SystemExit(f"MiniLM has no offline copy here ({src}): `make install-test-models` first")
    model = out / "model"
    model.mkdir()
    for name in MODEL_FILES:
        (shutil.copytree if (src / name).is_dir() else shutil.copy2)(src / name, model / name)
    weights = load_file(str(src / "model.safetensors"))
    save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()},
              str(model / "model.safetensors"))
    for name in VENDORED:
        module = __import__(name)
        shutil.copytree(Path(module.__file__).parent, out / "site" / name, ignore=skip)
    for version in WHEEL_PYTHONS:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                        "--python-version", version, "--platform", "manylinux2014_x86_64", "--platform",
                        "manylinux_2_28_x86_64", "-d", str(out / "wheels"), *BINARY_WHEELS], check=True)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {size / 2**20:.1f} MiB")
    if size > BUNDLE_LIMIT:
        raise SystemExit(f"{out} is {size / 2**20:.1f} MiB, over 64 MiB")


def use_vendored(folder: Path) -> None:
    """The bundle's ``site/`` on ``sys.path`` where the environment lacks its packages, and its binary wheel for
    this CPython unpacked into ``site-cpXY/``."""
    import importlib.util
    import zipfile

    if any(importlib.util.find_spec(name) is None for name in VENDORED):
        sys.path.append(str(folder / "site"))
    if importlib.util.find_spec("Stemmer") is not None:
        return
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    target = folder / f"site-{tag}"
    for wheel in sorted((folder / "wheels").glob(f"*-{tag}-*.whl")):
        with zipfile.ZipFile(wheel) as z:
            z.extractall(target)
    sys.path.append(str(target))


def pct(xs: list[float], p: float) -> float:
    import numpy as np

    return round(float(np.percentile(np.asarray(xs) * 1000.0, p)), 2)


def cosines(a, b) -> dict:
    c = (a * b).sum(axis=1)
    return {"mean": round(float(c.mean()), 6), "min": round(float(c.min()), 6)}


def encode_rates(emb, passages: list[str], triples: list[str], questions: list[str]) -> tuple[dict, dict]:
    """(rates, vectors): passages/s, triples/s of the corpus encoder on a warm process, and of its first pass
    (``*_first_per_s``: on CUDA each new batch shape loads its half-precision kernels once, up to 5x slower on the
    H200 at fp16/bf16), query encodes/s one at a time (wall)."""
    import torch

    out, vecs = {}, {}
    for name, texts in (("passages", passages), ("triples", triples)):
        t = time.perf_counter()
        emb._encode(texts)  # not cached: the timed encode below still encodes
        if torch.cuda.is_available() and emb.device.startswith("cuda"):
            torch.cuda.synchronize()
        out[f"{name}_first_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    emb.encode(questions[:4])
    emb.forget()
    for name, texts in (("passages", passages), ("triples", triples)):
        t = time.perf_counter()
        vecs[name] = emb.encode_corpus(texts, name)
        out[f"{name}_per_s"] = round(len(texts) / (time.perf_counter() - t), 1)
    t = time.perf_counter()
    vecs["questions"] = emb.encode(questions)
    out["queries_per_s"] = round(len(questions) / (time.perf_counter() - t), 1)
    return out, vecs


def expansion_table(emb, ds, pcoll, tcoll, questions, rows: int, pieces: bool, calls: list | None = None,
                    default: bool = False) -> dict:
    """R@k and p50/p95 of hybrid and hybrid + NaiveGE (exact scorer, fixed-shape path batches of ``rows`` rows,
    ``default``: the scorer's own rows for the embedder's device, no option given; cold passes) at k = 5/10/15, their p50 ratio, and of each NaiveGE pass the time inside ``encode_fixed`` (the
    path encodes, their vectors on the host) and the rows x length its passes computed. ``pieces``:
    ``beam.scorer_options.triple_pieces``. ``calls``: gets the texts (and word pieces) of each timed pass's
    ``encode_fixed`` call."""
    import numpy as np

    from gear_repro.core.triple_graph import TripleIndex
    from gear_repro.evaluation.metrics import recall_at_k
    from gear_repro.methods.gear.expansion import NaiveGE
    from gear_repro.retrieval.base import HybridRetriever

    hybrid = HybridRetriever(pcoll, emb)
    options = {"triple_pieces": pieces} | ({} if default else {"batch_size": rows, "cuda_batch_size": rows})
    naive = NaiveGE(TripleIndex(tcoll, ds.triples), emb,
                    beam={"scorer": "exact", "path_cache": False, "scorer_options": options})
    assert naive.scorer.batch_size == rows, (naive.scorer.batch_size, rows)
    encode_fixed, spent, timing = emb.encode_fixed, [0.0], [False]

    def timed(texts, n, given=None):  # returns host arrays: the GPU's work is done when it returns
        if calls is not None and timing[0]:
            calls.append((list(texts), None if given is None else [given(t) for t in texts]))
        t = time.perf_counter()
        try:
            return encode_fixed(texts, n, given)
        finally:
            spent[0] += time.perf_counter() - t

    emb.encode_fixed = timed
    hybrid.retrieve("warm up the model", 5)
    for q in questions[:WARM_QUESTIONS]:  # the common pass shapes' kernels chosen (and, with graphs, captured)
        naive.expand(q.question, hybrid.retrieve(q.question, 15))
    times: dict[str, dict[int, list[float]]] = {m: {k: [] for k in KS} for m in ("hybrid", "naive", "encode")}
    hits: dict[str, dict[int, list[float]]] = {m: {k: [] for k in KS} for m in ("hybrid", "naive")}
    slots: dict[int, list[int]] = {k: [] for k in KS}  # rows x length of a pass's path encodes
    for q in questions:
        for k in KS:
            emb.forget()
            t = time.perf_counter()
            base = hybrid.retrieve(q.question, k)
            times["hybrid"][k].append(time.perf_counter() - t)
            hits["hybrid"][k].append(recall_at_k(base.ids, q.gold_ids, k))
            emb.forget()  # the query vectors and the path memo (the embedder's LRU): a cold pass
            spent[0], before, timing[0] = 0.0, emb.stats["fixed_slots"], True
            t = time.perf_counter()
            out = naive.expand(q.question, hybrid.retrieve(q.question, k))
            times["naive"][k].append(time.perf_counter() - t)
            timing[0] = False
            times["encode"][k].append(spent[0])
            slots[k].append(emb.stats["fixed_slots"] - before)
            hits["naive"][k].append(recall_at_k(out.ranking.ids, q.gold_ids, k))
    del emb.encode_fixed
    table = {}
    for k in KS:
        h50, n50 = pct(times["hybrid"][k], 50), pct(times["naive"][k], 50)
        table[k] = {"hybrid_p50_ms": h50, "hybrid_p95_ms": pct(times["hybrid"][k], 95), "naive_p50_ms": n50,
                    "naive_p95_ms": pct(times["naive"][k], 95), "ratio_p50": round(n50 / h50, 2),
                    "naive_encode_p50_ms": pct(times["encode"][k], 50),
                    "fixed_slots_p50": int(np.median(slots[k])),
                    "hybrid_recall": round(100 * sum(hits["hybrid"][k]) / len(questions), 1),
                    "naive_recall": round(100 * sum(hits["naive"][k]) / len(questions), 1)}
    return table


def encode_breakdown(emb, calls: list, rows: int) -> dict:
    """Where the timed passes' ``encode_fixed`` time goes, p50 ms over their calls (path vectors not memoised):
    building the passes' tensors (``fixed_passes``) by tokenising the texts, with the tokenizer's own threads off
    (as every run has them) and on, and from the word pieces the scorer gave (``triple_pieces``); on CUDA with
    graphs, the passes on the device and the vectors' copy back (``ShapeGraphs.encode`` and ``.cpu()``, every shape
    captured already); the whole ``_encode_shapes`` as the scorer called it."""
    import numpy as np
    import torch

    def p50(thunks) -> float:
        spent = []
        for thunk in thunks:
            t = time.perf_counter()
            thunk()
            spent.append(time.perf_counter() - t)
        return pct(spent, 50)

    out: dict = {"rows": rows, "calls": len(calls), "texts_p50": int(np.median([len(c) for c, _ in calls]))}
    for flag in ("false", "true"):
        os.environ["TOKENIZERS_PARALLELISM"] = flag
        out[f"tokenised_threads_{flag}_ms"] = p50(lambda c=c: emb.fixed_passes(c, rows) for c, _ in calls)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    if all(given is not None for _, given in calls):
        out["from_pieces_ms"] = p50(lambda c=c, g=g: emb.fixed_passes(c, rows, g) for c, g in calls)
    graphs = emb._pass_graphs()
    if graphs is not None:
        prepared = [[(len(part), feats) for part, feats in emb.fixed_passes(c, rows, g)] for c, g in calls]

        def device(passes) -> None:
            with torch.inference_mode(), emb.autocast(cache=False):
                graphs.encode(passes).cpu()

        out["device_and_copy_ms"] = p50(lambda ps=ps: device(ps) for ps in prepared)
        out["passes_p50"] = int(np.median([len(ps) for ps in prepared]))
    out["encode_shapes_ms"] = p50(lambda c=c, g=g: emb._encode_shapes(c, rows, g) for c, g in calls)
    return out


def determinism(emb, ds, pcoll, tcoll, questions, paths: list[str], eager=None) -> dict:
    """Bit-identity of the exact scorer's path vectors across batch compositions and of NaiveGE's rankings across
    question order and memo state; with ``eager`` (the same precision with ``cuda_graphs=false``), of ``emb``'s path
    vectors and rankings with its."""
    import random

    import numpy as np

    from gear_repro.core.triple_graph import TripleIndex
    from gear_repro.methods.gear.expansion import NaiveGE
    from gear_repro.methods.gear.scorers import DEFAULT_CUDA_PATH_ROWS, DEFAULT_PATH_ROWS, on_cuda
    from gear_repro.retrieval.base import HybridRetriever

    rows = DEFAULT_CUDA_PATH_ROWS if on_cuda(emb) else DEFAULT_PATH_ROWS
    emb.forget()
    ordered = emb.encode_fixed(paths, rows)
    order = list(range(len(paths)))
    random.Random(0).shuffle(order)
    emb.forget()
    shuffled = np.empty_like(ordered)
    shuffled[order] = emb.encode_fixed([paths[i] for i in order], rows)
    emb.forget()
    groups = np.concatenate([emb.encode_fixed(paths[a:a + 3], rows) for a in range(0, len(paths), 3)])
    triples = TripleIndex(tcoll, ds.triples)

    def rankings(e, qs) -> dict:
        hybrid = HybridRetriever(pcoll, e)
        naive = NaiveGE(triples, e, beam={"scorer": "exact", "path_cache": False})
        out = {}
        for q in qs:
            r = naive.expand(q.question, hybrid.retrieve(q.question, 10)).ranking
            out[q.id] = (list(r.ids), [float(s) for s in r.scores])
        return out

    emb.forget()
    forward = rankings(emb, questions[:20])
    backward = rankings(emb, questions[:20][::-1])  # warm memo, other order: other batch compositions
    out = {"paths": len(paths), "path_rows": rows,
           "paths_shuffled_identical": bool(np.array_equal(ordered, shuffled)),
           "paths_groups_of_3_identical": bool(np.array_equal(ordered, groups)),
           "paths_max_abs_diff": float(max(np.abs(ordered - shuffled).max(), np.abs(ordered - groups).max())),
           "rankings_identical": forward == backward,
           "rankings_same_ids": all(forward[q][0] == backward[q][0] for q in forward),
           "fixed_graph_passes": emb.stats["fixed_graph_passes"],
           "graph_shapes": emb._graphs.captured if emb._graphs is not None else 0}
    if eager is not None:
        eager.forget()
        plain = eager.encode_fixed(paths, rows)
        out |= {"paths_equal_eager": bool(np.array_equal(ordered, plain)),
                "paths_eager_max_abs_diff": float(np.abs(ordered - plain).max()),
                "rankings_equal_eager": forward == rankings(eager, questions[:20])}
    return out


def run(a: argparse.Namespace) -> dict:
    use_vendored(HERE)
    import torch

    from benchmarks.bench_precision import sample_paths
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.core.triple_graph import triple_docs
    from gear_repro.data import load_dataset
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.methods.gear.scorers import DEFAULT_CUDA_PATH_ROWS, DEFAULT_PATH_ROWS

    if a.deterministic:
        torch.use_deterministic_algorithms(True)
    os.environ["GEAR_CACHE"] = tempfile.mkdtemp(prefix="bench_gpu_cache_")  # nothing read from earlier caches
    model = a.model or str(HERE / "model")
    ds = load_dataset(a.data)
    questions = [q for q in ds.questions if q.gold_ids]
    passages = [p.content for p in ds.passages]
    triples = [t.text for t in ds.triples]
    paths = sample_paths(ds, a.paths)
    cuda = a.device.startswith("cuda")
    default_rows = DEFAULT_CUDA_PATH_ROWS if cuda else DEFAULT_PATH_ROWS
    path_rows = [default_rows if r == "default" else int(r) for r in a.path_rows]
    report: dict = {"device": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
                    "torch": torch.__version__, "cuda": torch.version.cuda, "model": model,
                    "counts": {"passages": len(passages), "triples": len(triples), "questions": len(questions),
                               "paths": len(paths)}, "batch_size": a.batch_size, "default_path_rows": default_rows,
                    "rows": {}}
    if cuda:
        report["bf16_native"] = torch.cuda.is_bf16_supported(including_emulation=False)
    if a.deterministic:
        out = {}
        for prec in a.precisions:
            emb = SentenceEmbedder(model, device=a.device, precision=prec, show_progress=False)
            backend = MemoryBackend()
            pcoll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], emb)
            tcoll = backend.open_collection("triples", triple_docs(ds.triples), emb)
            out[prec] = determinism(emb, ds, pcoll, tcoll, questions, paths)
        return out
    fp32 = None
    for prec in a.precisions:
        t0 = time.perf_counter()
        emb = SentenceEmbedder(model, device=a.device, precision=prec, batch_size=a.batch_size,
                               show_progress=False, cuda_graphs=cuda and "on" in a.graphs)
        rates, vecs = encode_rates(emb, passages, triples, [q.question for q in questions])
        row: dict = {"precision_used": emb.precision_used.value, **rates}
        if fp32 is None:
            fp32 = vecs
        else:
            row.update({f"cos_{n}": cosines(fp32[n], vecs[n]) for n in ("passages", "triples")})
        # "graphs": embedder.cuda_graphs on; "eager": off (a CPU runs eager either way); corpus vectors from the cache.
        # "+pieces": beam.scorer_options.triple_pieces on
        embedders = {"graphs" if emb.cuda_graphs else "eager": emb}
        if cuda and "on" in a.graphs and "off" in a.graphs:
            embedders["eager"] = SentenceEmbedder(model, device=a.device, precision=prec, batch_size=a.batch_size,
                                                  show_progress=False, cuda_graphs=False)
        colls = {}
        for name, e in embedders.items():
            backend = MemoryBackend()
            colls[name] = (backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], e),
                           backend.open_collection("triples", triple_docs(ds.triples), e))
        modes = {f"{name}+pieces" if pieces else name: (name, pieces)
                 for name in embedders for pieces in a.triple_pieces}
        first = next(iter(modes))
        calls: list = []
        row["expansion"] = {mode: {rows: expansion_table(embedders[name], ds, *colls[name], questions[:a.limit], rows,
                                                         pieces, calls if (mode == first and i == 0) else None,
                                                         default=a.path_rows[i] == "default")
                                   for i, rows in enumerate(path_rows)} for mode, (name, pieces) in modes.items()}
        row["encode_breakdown"] = encode_breakdown(embedders[modes[first][0]], calls, path_rows[0])
        row["determinism"] = determinism(emb, ds, *colls[next(iter(embedders))], questions, paths,
                                         eager=embedders.get("eager") if len(embedders) > 1 else None)
        row["embedder"] = emb.describe()
        row["wall_s"] = round(time.perf_counter() - t0, 1)
        report["rows"][prec] = row
        print(prec, json.dumps(row), flush=True)
        if a.out:  # what finished survives a run cut short
            a.out.write_text(json.dumps(report, indent=2))
        del emb, embedders, colls
        if cuda:
            torch.cuda.empty_cache()
    if cuda and a.cpu_check:  # the GPU's fp32 passage vectors against the CPU's, same weights
        cpu = SentenceEmbedder(model, device="cpu", cache=False, show_progress=False)
        t = time.perf_counter()
        report["cos_gpu_fp32_to_cpu_fp32_passages"] = cosines(fp32["passages"], cpu.encode_corpus(passages))
        report["cpu_passages_per_s"] = round(len(passages) / (time.perf_counter() - t), 1)
    differ = [prec for prec, row in report["rows"].items() if not all(
        row["determinism"][key] for key in ("paths_shuffled_identical", "paths_groups_of_3_identical",
                                            "rankings_identical"))]
    if cuda and differ:
        env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
        child = subprocess.run([sys.executable, "-m", "benchmarks.bench_gpu", "run", "--deterministic", "--device",
                                a.device, "--data", a.data, "--paths", str(a.paths), "--model", model,
                                "--precisions", *differ],
                               cwd=HERE, env=env, capture_output=True, text=True)
        report["deterministic_algorithms"] = (json.loads(child.stdout.strip().splitlines()[-1])
                                              if child.returncode == 0 else {"error": child.stderr[-2000:]})
    print_table(report)
    return report


def print_table(report: dict) -> None:
    rows = report["rows"]
    print(f"\n{report['device']}; torch {report['torch']}, CUDA {report['cuda']}; {report['counts']}; "
          f"batch {report['batch_size']}\n")
    print("| precision | passages/s warm (first pass) | triples/s warm (first pass) | queries/s | "
          "cosine to fp32 passages / triples, mean (min) |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        cos = " / ".join(f"{r[f'cos_{n}']['mean']:.6f} ({r[f'cos_{n}']['min']:.6f})" for n in ("passages", "triples")) \
            if "cos_passages" in r else "1 / 1"
        print(f"| {name} ({r['precision_used']}) | {r['passages_per_s']} ({r['passages_first_per_s']}) | "
              f"{r['triples_per_s']} ({r['triples_first_per_s']}) | "
              f"{r['queries_per_s']} | {cos} |")
    print("\n| precision | passes | path rows | k | hybrid p50 / p95 ms | hybrid+NaiveGE (exact, cold) p50 / p95 ms | "
          "of it in encode_fixed, p50 ms | ratio p50 | R@k hybrid / +NaiveGE |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        for mode, by_rows in r["expansion"].items():
            for path_rows, table in by_rows.items():
                for k, e in table.items():
                    print(f"| {name} | {mode} | {path_rows} | {k} | {e['hybrid_p50_ms']} / {e['hybrid_p95_ms']} | "
                          f"{e['naive_p50_ms']} / {e['naive_p95_ms']} | {e['naive_encode_p50_ms']} | "
                          f"{e['ratio_p50']}× | {e['hybrid_recall']} / {e['naive_recall']} |")
    for name, r in rows.items():
        print(f"encode_fixed breakdown {name}: {r['encode_breakdown']}")
        print(f"determinism {name}: {r['determinism']}")
    for key in ("cos_gpu_fp32_to_cpu_fp32_passages", "cpu_passages_per_s", "deterministic_algorithms"):
        if key in report:
            print(f"{key}: {report[key]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="write the bundle folder (here)")
    p.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("run", help="run the benchmark (on the GPU machine, from the bundle folder)")
    r.add_argument("--device", default="cuda")
    r.add_argument("--precisions", nargs="+", default=None, help="default fp32 fp16 bf16 on CUDA, fp32 on a CPU")
    r.add_argument("--data", default=str(HERE / "data" / "musique_sample"))
    r.add_argument("--model", default=None, help="default the bundle's model/ folder")
    r.add_argument("--batch-size", type=int, default=32, help="embedder.batch_size of the corpus encodes")
    r.add_argument("--paths", type=int, default=500, help="path texts of the determinism check")
    r.add_argument("--path-rows", nargs="+", default=["default", 8, 64],
                   help="path batch rows of the expansion table (beam.scorer_options.batch_size and cuda_batch_size); "
                        "'default': the scorer's own for the device, no option given (32 on CUDA, 8 on a CPU); the "
                        "first one's encodes are broken down")
    r.add_argument("--limit", type=int, default=None, help="first N questions of the expansion table")
    r.add_argument("--graphs", nargs="+", choices=("on", "off"), default=["on", "off"],
                   help="embedder.cuda_graphs values of the expansion table on CUDA (a CPU runs eager)")
    r.add_argument("--triple-pieces", nargs="+", choices=("on", "off"), default=None,
                   help="beam.scorer_options.triple_pieces values of the expansion table (default on off on CUDA, "
                        "off on a CPU); the first is broken down")
    r.add_argument("--cpu-check", action=argparse.BooleanOptionalAction, default=True,
                   help="the GPU's fp32 passage vectors against the CPU's")
    r.add_argument("--deterministic", action="store_true", help=argparse.SUPPRESS)
    r.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.out)
        return
    a.precisions = a.precisions or (["fp32", "fp16", "bf16"] if a.device.startswith("cuda") else ["fp32"])
    a.precisions.sort(key=lambda p: p != "fp32")  # fp32 first: the others' cosines are to its vectors
    a.triple_pieces = [v == "on" for v in a.triple_pieces or (["on", "off"] if a.device.startswith("cuda") else
                                                              ["off"])]
    report = run(a)
    if a.deterministic:
        print(json.dumps(report))
    elif a.out:
        a.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
