"""Load time and size of the HTML results explorer (``gear-repro-report --html``; docs/explorer.md).

Two reports, both from runs made with the test doubles (scripted LLM, hashing embedder: no model), so the numbers
measure the explorer, not a model:

- ``sample``: the nine method presets of tests/test_golden_rankings.py (BM25, SBERT, Hybrid + NaiveGE,
  BM25 + SyncGE, GEAR, HippoRAG, IRCoT, HippoRAG w/ IRCoT, T²RAG) on the whole bundled MuSiQue sample (100 questions,
  1,890 passages, qa=true);
- ``sweep``: a synthetic 500-question × 10-method sweep made from those runs: every question five times under new ids
  (copies 2-5 with each saved ranking shuffled by a seeded permutation, so recall varies), and GEAR twice (the second
  labelled "GEAR (copy)"), i.e. 5,000 records whose traces are real traces.

Measured with Debian's headless Chromium (Selenium; ``make install-browser``), each page load a fresh navigation:
- ``ready_ms``: navigation start to the page's ready marker (``window.EXPLORER_READY_MS``: data.js parsed, the view
  built), and ``painted_ms`` to the first frame after it (``EXPLORER_PAINTED_MS``: laid out and painted), for the
  overview and for the question list (rows built: up to 200), median of ``--repeats`` fresh loads;
- ``wins_ms_overview``: navigation start to the overview's win/tie/loss matrix drawn (``EXPLORER_WINS_MS``; it is
  drawn right after the first paint), median of ``--repeats``;
- ``open_question_ms``: hash change to one question's view rendered (its detail file loaded by a script tag), median
  over 10 questions; ``filter_ms``: applying the "A finds a gold passage that B misses" filter (re-filter, re-sort,
  re-render), median of 10;
- sizes: index.html + explorer/ in total, data.js, the question files (count, mean, max);
- ``report_s``: wall time of ``gear-repro-report`` with ``--html`` and without (the explorer's own cost is the
  difference; both draw the figures, --html implies --figures).

    flock /work/runs/cpu.lock python -m benchmarks.bench_explorer --work /tmp/bench_explorer --out results.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # tests.helpers (the doubles) when run as a script

SYNTHETIC_COPIES = 5  # 100 sample questions × 5 = 500
SEED = 0


def sample_runs(work: Path) -> Path:
    """The nine presets on the whole sample (made once; reused when ``work`` already holds them)."""
    from tests.helpers.explorer_runs import make_runs
    from tests.test_golden_rankings import METHODS

    runs = work / "sample" / "runs"
    if all((runs / m / "metrics.json").exists() for m in METHODS):
        return runs
    return make_runs(work / "sample", n_passages=10**6, n_questions=100, hostile=False, fail_question=None,
                     methods=METHODS)


def _shuffled(ids: list[str], rng: random.Random) -> list[str]:
    out = list(ids)
    rng.shuffle(out)
    return out


def synthetic_sweep(sample: Path, dest: Path) -> Path:
    """500 questions × 10 methods from the sample runs (see the module doc)."""
    import yaml

    if dest.exists():
        shutil.rmtree(dest)
    sources = sorted(p.parent for p in sample.rglob("metrics.json"))
    plan = [(src, src.name, None) for src in sources] + [(sample / "gear", "gear_copy", "GEAR (copy)")]
    for src, name, label in plan:
        out = dest / name
        out.mkdir(parents=True)
        rng = random.Random(f"{SEED}-{name}")
        records = [json.loads(x) for x in (src / "predictions.jsonl").read_text(encoding="utf-8").split("\n") if x.strip()]
        ids = []
        with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
            for copy in range(SYNTHETIC_COPIES):
                for rec in records:
                    r = dict(rec, id=f"{rec['id']}#{copy}" if copy else rec["id"])
                    if copy:
                        r["rankings"] = {k: _shuffled(v, rng) for k, v in rec["rankings"].items()}
                    ids.append(r["id"])
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
        config = yaml.safe_load((src / "config.yaml").read_text(encoding="utf-8"))
        config["dataset"]["limit"] = None
        if label:
            config["report"]["method"] = label
        (out / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        metrics = json.loads((src / "metrics.json").read_text(encoding="utf-8"))
        metrics.update(question_ids=ids, n_questions=len(ids), n_scored=len(ids))
        (out / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
        shutil.copy(src / "run.json", out / "run.json")
    return dest


def report(runs: Path, out: Path, html: bool) -> float:
    """Seconds of ``gear-repro-report`` (a subprocess: a cold start, as a user runs it)."""
    import subprocess

    t = time.perf_counter()
    args = [sys.executable, "-m", "gear_repro.cli.report", str(runs), "--out", str(out), "--figures"]
    subprocess.run(args + (["--html"] if html else []), check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - t


def sizes(out: Path) -> dict:
    site = [out / "index.html", *(p for p in (out / "explorer").rglob("*") if p.is_file())]
    qfiles = sorted(p.stat().st_size for p in (out / "explorer" / "q").rglob("*.js"))
    return {"total_bytes": sum(p.stat().st_size for p in site), "files": len(site),
            "data_js_bytes": (out / "explorer" / "data.js").stat().st_size, "question_files": len(qfiles),
            "question_file_mean_bytes": round(statistics.mean(qfiles)), "question_file_max_bytes": qfiles[-1]}


def browser_times(out: Path, repeats: int) -> dict:
    from tests.helpers.browser import start_chromium, wait_for

    d = start_chromium()
    url = (out / "index.html").as_uri()
    res: dict = {}
    try:
        for view in ("overview", "questions"):
            ready, painted, wins = [], [], []
            for _ in range(repeats):
                d.get("about:blank")
                d.get(f"{url}#{view}")
                ready.append(wait_for(d, "return window.EXPLORER_READY_MS"))
                painted.append(wait_for(d, "return window.EXPLORER_PAINTED_MS"))
                if view == "overview":  # the win/tie/loss matrix, drawn after the first paint (-1: a page without it)
                    wins.append(wait_for(d, "return window.EXPLORER_WINS_MS || (!document.getElementById('wtl-metric-0') && -1)"))
            if wins and min(wins) > 0:
                res["wins_ms_overview"] = round(statistics.median(wins), 1)
            res[f"ready_ms_{view}"] = round(statistics.median(ready), 1)
            res[f"painted_ms_{view}"] = round(statistics.median(painted), 1)
            res[f"painted_ms_{view}_all"] = [round(t, 1) for t in painted]
        n_q = d.execute_script("return window.EXPLORER_DATA.datasets[0].questions.length")
        opens = []
        for i in range(0, n_q, max(1, n_q // 10))[:10]:
            opens.append(d.execute_async_script("""const done = arguments[arguments.length - 1], key = 'd0/' + arguments[0];
                const t0 = performance.now(); location.hash = '#q?ds=0&i=' + arguments[0] + '&a=0&b=1';
                (function poll() { if (document.getElementById('view-q').dataset.loaded === key) done(performance.now() - t0);
                  else setTimeout(poll, 1); })();""", i))
        res["open_question_ms"] = round(statistics.median(opens), 1)
        d.get(f"{url}#questions")
        wait_for(d, "return window.EXPLORER_READY_MS")
        n_m = d.execute_script("return window.EXPLORER_DATA.datasets[0].methods.length")
        filters = []
        for j in range(10):  # method pairs (j, j+1): one change of A and one of B, each a full re-render
            filters.append(d.execute_script("""const a = document.getElementById('f-a'), b = document.getElementById('f-b');
                const t0 = performance.now(); a.value = String(arguments[0]); a.dispatchEvent(new Event('change'));
                b.value = String(arguments[1]); b.dispatchEvent(new Event('change'));
                return performance.now() - t0;""", j % n_m, (j + 1) % n_m))
        res["filter_ms"] = round(statistics.median(filters), 1)
        res["browser"] = d.capabilities.get("browserVersion")
    finally:
        d.quit()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default="/tmp/bench_explorer", help="scratch folder (runs and reports)")
    ap.add_argument("--repeats", type=int, default=5, help="page loads per view (median reported)")
    ap.add_argument("--out", default=None, help="JSON file of the results (default: print only)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(args.work)
    sample = sample_runs(work)
    sweep = synthetic_sweep(sample, work / "sweep" / "runs")
    results = {}
    for name, runs in (("sample", sample), ("sweep", sweep)):
        plain = report(runs, work / name / "report_plain", html=False)
        html = report(runs, work / name / "report", html=True)
        results[name] = {"report_s": {"html": round(html, 2), "without_html": round(plain, 2)},
                         **sizes(work / name / "report"), **browser_times(work / name / "report", args.repeats)}
        print(name, json.dumps(results[name]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
