"""The static HTML results explorer (``gear-repro-report RUNS --out DIR --html``; docs/explorer.md).

``DIR/index.html`` opens from disk (file://) with no server and no network: its script and style are files in
``DIR/explorer/``, the data are JavaScript files loaded by ``<script>`` tags (a browser refuses ``fetch`` of file://
URLs). ``explorer/data.js`` holds the overview, the question index and the plot series; each question's detail
(every method's top-k, own blocks, LLM calls, passage texts) is its own file ``explorer/q/<dataset>/<n>.js``,
loaded when the question is opened, so the page's start-up cost does not grow with the traces.

Everything taken from data is JSON inside those files with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped
(:func:`js_literal`), and the page builds its DOM with ``textContent`` only.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gear_repro.reporting.evidence import EvidenceOptions
from gear_repro.reporting.figures import FIGURE_NOTES, SMALL_N
from gear_repro.reporting.html.data import (
    Corpora,
    claims_table,
    clean,
    columns_by_dataset,
    csv_table,
    data_notes,
    dataset_corpora,
    index_rows,
    paper_tables,
    question_detail,
    question_order,
    run_provenance,
    unfinished_rows,
    unpaired,
)
from gear_repro.reporting.html.plots import plot_data
from gear_repro.reporting.runs import RunResult, UnfinishedRun

ASSETS = Path(__file__).resolve().parent / "assets"
ASSET_FILES = ("app.js", "app.css")
DATA_GLOBAL = "EXPLORER_DATA"  # data.js: window.EXPLORER_DATA = {...}
QUESTION_CALLBACK = "EXPLORER_QUESTION"  # q/<d>/<n>.js: window.EXPLORER_QUESTION("<d>/<n>", {...})
_JS_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
                             "\u2029": "\\u2029"})


def js_literal(obj: Any) -> str:
    """``obj`` as a JavaScript literal safe anywhere in a page: JSON with ``<``, ``>``, ``&`` and the line
    separators U+2028/U+2029 escaped (JSON has those characters only inside strings, where the escapes mean the
    same characters), so a passage holding ``</script>`` can neither end a script nor start markup."""
    return json.dumps(clean(obj), ensure_ascii=False, separators=(",", ":"), allow_nan=False).translate(_JS_ESCAPES)


def generated_at() -> str:
    """The explorer's "generated" stamp: now, or ``SOURCE_DATE_EPOCH`` where it is set (the reproducible-builds
    convention, which matplotlib's figure metadata follows too), so two reports of the same runs are byte-identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    when = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch.isdigit() else datetime.now(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC")


def build_summary(runs: Sequence[RunResult], unfinished: Sequence[UnfinishedRun], report_dir: Path,
                  opts: EvidenceOptions, stem: str = "table") -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(data.js content, {"<d>/<n>": question detail}) for the runs whose report was written to ``report_dir``."""
    corpora = Corpora()
    datasets, plots, details = [], [], {}
    for d, (name, cols) in enumerate(columns_by_dataset(runs).items()):
        qids = question_order(cols)
        ks = sorted({k for c in cols for k in c.ks})
        dc = dataset_corpora(cols, corpora)
        methods = [{"label": c.run.label, "run": c.index, "recall": not c.run.is_qa_bound,
                    "qa": any("answer" in p for p in c.preds.values()), "n": len(c.preds)} for c in cols]
        if dc.mixed:  # which of the dataset's corpora each method read (question files: one passages dict per corpus)
            for m, ci in zip(methods, dc.of_col, strict=True):
                m["corpus"] = ci
        ds = {"name": name, "dir": f"d{d}", "ks": ks, "methods": methods,
              "types": sorted({str(first.get("type") or "") for c in cols for first in c.preds.values()}),
              "questions": index_rows(cols, qids)}
        if (info := dc.info()) is not None:
            ds["corpora"] = info
        if notes := data_notes(cols, dc):
            ds["data_notes"] = notes
        if refused := unpaired(cols):  # pairs compare() refuses: no win/tie/loss, no Δ, the reason shown
            ds["unpaired"] = refused
        datasets.append(ds)
        plots.append({"name": name, **plot_data([c.run for c in cols], opts)})
        for n, qid in enumerate(qids):
            details[f"d{d}/{n}"] = question_detail(cols, qid, dc, max(ks))
    special = {f"{stem}.csv", "claims.csv", "cost.csv"}
    analyses = [csv_table(p) for p in sorted(report_dir.glob("*.csv")) if p.name not in special]
    claims = report_dir / "claims.csv"
    cost = report_dir / "cost.csv"
    failures = report_dir / "failures.md"
    figure_notes = report_dir / FIGURE_NOTES
    summary = {
        "generated": generated_at(),
        "resamples": opts.resamples, "seed": opts.seed, "alpha": opts.alpha,
        "tables": paper_tables(report_dir / f"{stem}.csv", runs), "analyses": analyses,
        "claims": claims_table(claims) if claims.is_file() else None, "cost": csv_table(cost) if cost.is_file() else None,
        "figures": sorted(p.name for p in report_dir.glob("fig*.png")),
        "figure_notes": [ln[2:] for ln in figure_notes.read_text(encoding="utf-8").splitlines() if ln.startswith("- ")]
        if figure_notes.is_file() else [],
        "small_n": SMALL_N,
        "failures": failures.read_text(encoding="utf-8") if failures.is_file() else "",
        "unfinished": unfinished_rows(unfinished), "notes": list(dict.fromkeys(n for r in runs for n in r.notes)),
        "runs": [run_provenance(r) for r in runs], "datasets": datasets, "plots": plots,
    }
    return summary, details


def write_explorer(runs: Sequence[RunResult], unfinished: Sequence[UnfinishedRun], report_dir: str | Path,
                   opts: EvidenceOptions, stem: str = "table") -> list[Path]:
    """Write ``index.html`` and ``explorer/`` into ``report_dir`` (which already holds the report's tables and
    figures); returns the written files."""
    out = Path(report_dir)
    summary, details = build_summary(runs, unfinished, out, opts, stem)
    site = out / "explorer"
    (site / "q").mkdir(parents=True, exist_ok=True)
    written = [out / "index.html"]
    shutil.copyfile(ASSETS / "index.html", out / "index.html")
    for name in ASSET_FILES:
        shutil.copyfile(ASSETS / name, site / name)
        written.append(site / name)
    data = site / "data.js"
    data.write_text(f"window.{DATA_GLOBAL} = {js_literal(summary)};\n", encoding="utf-8")
    written.append(data)
    for key, detail in details.items():
        path = site / "q" / f"{key}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"window.{QUESTION_CALLBACK}({js_literal(key)}, {js_literal(detail)});\n", encoding="utf-8")
        written.append(path)
    return written
