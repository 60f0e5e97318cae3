"""Paper-layout tables: rows = methods, columns = dataset × metric, ours beside the paper's and Δ.

Written as CSV (long form, every number), Markdown and LaTeX (wide form, the paper's layout).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gear_repro.reporting.paper import paper_value
from gear_repro.reporting.runs import RunResult

METRIC_KEYS = {"R@5": "recall@5", "R@10": "recall@10", "R@15": "recall@15", "EM": "em", "F1": "f1"}
DATASET_ORDER = ["MuSiQue", "2Wiki", "HotpotQA"]


def long_table(runs: Sequence[RunResult], metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per (run, metric): ours, the paper's value for the same table/method/dataset, delta."""
    rows = []
    for r in runs:
        names = metrics or [m for m, key in METRIC_KEYS.items() if key in r.metrics]
        if r.is_qa_bound:
            names = [m for m in names if m in ("EM", "F1")]  # QA bounds: their retrieval is not evaluated
        for m in names:
            key = METRIC_KEYS[m]
            if key not in r.metrics:
                continue
            ours = float(r.metrics[key])
            table = r.table_for(m)
            setting = r.report.get("setting") if table == r.table_for("R@5") else None
            paper = paper_value(table, r.method, r.dataset, m, paper=r.paper, setting=setting)
            rows.append({
                "table": table, "method": r.method, "dataset": r.dataset, "metric": m, "ours": round(ours, 2),
                "paper": paper, "delta": None if paper is None else round(ours - paper, 2),
                "n_questions": r.metrics.get("n_scored", r.metrics.get("n_questions")),
                "n_errors": int(r.metrics.get("n_errors") or 0),  # scored as misses (issue 9 §2)
                "dataset_name": r.config.get("dataset", {}).get("name"), "run_dir": str(r.path),
            })
    return pd.DataFrame(rows)


def _cell(row: pd.Series) -> str:
    if row["paper"] is None or pd.isna(row["paper"]):
        return f"{row['ours']:.1f}"
    return f"{row['ours']:.1f} ({row['paper']:.1f}, {row['delta']:+.1f})"


def wide_table(long: pd.DataFrame) -> pd.DataFrame:
    """Paper layout: method rows in first-seen order, (dataset, metric) columns; cell "ours (paper, Δ)"."""
    if long.empty:
        return pd.DataFrame()
    df = long.copy()
    # several runs with one label (e.g. a beam-length sweep): name each row by its run dir
    dup = df.duplicated(["method", "dataset", "metric"], keep=False)
    df.loc[dup, "method"] = df.loc[dup].apply(lambda r: f"{r['method']} [{Path(r['run_dir']).name}]", axis=1)
    df = df.drop_duplicates(["method", "dataset", "metric"], keep="last")
    df["cell"] = df.apply(_cell, axis=1)
    methods = list(dict.fromkeys(df["method"]))
    datasets = sorted(df["dataset"].unique(), key=lambda d: (DATASET_ORDER.index(d) if d in DATASET_ORDER else 99, d))
    order = list(METRIC_KEYS)
    cols = [(d, m) for d in datasets for m in [*order, "errors"]
            if m == "errors" or ((df.dataset == d) & (df.metric == m)).any()]
    both = df
    if "n_errors" in df.columns:  # "errors" column per dataset: failed questions, scored as misses
        errs = df.drop_duplicates(["method", "dataset"]).assign(metric="errors")
        both = pd.concat([df, errs.assign(cell=errs["n_errors"].astype(int).astype(str))])
    wide = both.pivot(index="method", columns=["dataset", "metric"], values="cell").reindex(index=methods)
    cols = [c for c in cols if c in wide.columns]
    return wide.reindex(columns=pd.MultiIndex.from_tuples(cols)).fillna("–")


def write_tables(long: pd.DataFrame, out_dir: str | Path, stem: str = "table") -> dict[str, Path]:
    """Write <stem>.csv (long), <stem>.md and <stem>.tex (wide, one block per paper table)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "md": out / f"{stem}.md", "tex": out / f"{stem}.tex"}
    long.to_csv(paths["csv"], index=False)
    md_parts, tex_parts = [], []
    for table, sub in long.groupby("table", sort=False):
        wide = wide_table(sub)
        flat = wide.copy()
        flat.columns = [f"{d} {m}" for d, m in wide.columns]
        n = sorted({int(x) for x in sub["n_questions"].dropna()})
        md_parts.append(f"### {table} (ours; in brackets: paper, Δ) — questions per run: {n}\n\n"
                        + flat.to_markdown() + "\n")
        tex_parts.append(f"% {table}: ours (paper, delta)\n" + wide.to_latex(multicolumn=True, escape=True))
    paths["md"].write_text("\n".join(md_parts), encoding="utf-8")
    paths["tex"].write_text("\n".join(tex_parts), encoding="utf-8")
    return paths
