#!/usr/bin/env python
"""Peak memory of saving and loading a HippoRAG phrase graph with millions of phrases (``PhraseGraph.save`` /
``.load``), as the graph's names are stored now (UTF-8 bytes with end offsets) and as they were stored before (one
fixed-width unicode array each, which ``load`` still reads).

The graph is synthetic and seeded: ``--phrases`` syllable-string phrases (the 2Wiki-size graph: 4.82M), one of them
``--longest`` characters long (the 2Wiki-size graph's longest phrase: 346, which sets a unicode array's width), as
many passages as ``--passages`` with two phrases each and no edges (edges and weights are saved the same way in
both formats). Each format is saved and then loaded in its own process; the JSON reports each step's seconds and
the process's peak anonymous memory over the step (``RssAnon`` sampled every 20 ms, minus the value before it),
and the file's size.

  python -m benchmarks.bench_phrase_graph_save [--phrases 4820000] [--passages 490454] [--longest 346] [--out F.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def synthetic_graph(n_phrases: int, n_passages: int, longest: int):
    """A seeded graph of ``n_phrases`` distinct sorted phrases, one ``longest`` characters long, and no edges."""
    import scipy.sparse as sp

    from gear_repro.methods.hipporag.phrase_graph import PhraseGraph

    rng = np.random.default_rng(0)
    words = rng.integers(1, 4, n_phrases)
    syl = rng.integers(0, len(SYLLABLES), (n_phrases, 12))
    phrases = {"x" * longest}
    for i in range(n_phrases):  # a distinct serial per phrase keeps them n_phrases apart
        sy = [SYLLABLES[s] for s in syl[i, : 3 * words[i]]]
        phrases.add(" ".join("".join(sy[w * 3:w * 3 + 3]) for w in range(words[i])) + f" {i:x}")
        if len(phrases) == n_phrases:
            break
    names = sorted(phrases)
    cols = rng.integers(0, n_phrases, 2 * n_passages)
    m = sp.csr_matrix((np.ones(2 * n_passages, np.float32), (np.repeat(np.arange(n_passages), 2), cols)),
                      shape=(n_passages, n_phrases))
    return PhraseGraph(phrases=names, passage_ids=[f"p{i}" for i in range(n_passages)],
                       edges=np.zeros((0, 2), np.int64), weights=np.zeros(0), passage_phrase=m)


def measure(fmt: str, n_phrases: int, n_passages: int, longest: int, folder: str) -> dict:
    """In this process: build the graph, then save it in ``fmt`` and load it again, each step's peak measured."""
    from benchmarks.bench_scale import AnonPeak
    from gear_repro.methods.hipporag.phrase_graph import PhraseGraph
    from gear_repro.utils.memory import status_gib
    from tests.helpers.graph_formats import save_unicode

    g = synthetic_graph(n_phrases, n_passages, longest)
    path = Path(folder) / f"graph-{fmt}.npz"
    out: dict = {"format": fmt, "phrases": g.n_phrases, "held_gib": round(status_gib("RssAnon"), 3)}
    for step in ("save", "load"):
        before, probe, t0 = status_gib("RssAnon"), AnonPeak(), time.perf_counter()
        probe.start()
        if step == "save" and fmt == "utf8":
            g.save(path)
        elif step == "save":
            save_unicode(g, path)
        else:
            h = PhraseGraph.load(path)
            assert h.phrases == g.phrases and h.passage_ids == g.passage_ids
        out[f"{step}_s"] = round(time.perf_counter() - t0, 1)
        out[f"{step}_peak_over_gib"] = round(probe.stop() - before, 3)
        if step == "load":
            del h
    out["file_mib"] = round(path.stat().st_size / 2**20, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--phrases", type=int, default=4_820_000)
    ap.add_argument("--passages", type=int, default=490_454)
    ap.add_argument("--longest", type=int, default=346)
    ap.add_argument("--out", default="outputs/bench/phrase_graph_save.json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for fmt in ("utf8", "unicode"):
            code = ("import json; from benchmarks.bench_phrase_graph_save import measure; "
                    f"print(json.dumps(measure({fmt!r}, {a.phrases}, {a.passages}, {a.longest}, {folder!r})))")
            r = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True)
            rows.append(json.loads(r.stdout.splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
