"""Paper-layout tables: rows = methods, columns = dataset × metric, ours beside the paper's and Δ.

Written as CSV (long form, every number), Markdown and LaTeX (wide form, the paper's layout).
Every value carries its 95% percentile-bootstrap interval over questions and N (docs/evidence.md): the CSV
has ``ci_low``/``ci_high``/``n`` beside ``ours``; a wide cell reads "ours [low, high] n=N (paper, Δ)".
With predictions.jsonl present, ``ours`` is the mean of the per-question values (errored questions count
as 0; gear_repro/evaluation/per_question.py); without it, metrics.json's value and no interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from gear_repro.evaluation.stats import Interval
from gear_repro.reporting.evidence import (
    DEFAULT_OPTIONS,
    EvidenceOptions,
    interval,
    metric_key,
    metric_order,
    run_metrics,
)
from gear_repro.reporting.paper import DEFAULT_PAPER, paper_flag, paper_settings, paper_value
from gear_repro.reporting.runs import RunResult
from gear_repro.reporting.setting import gold_differs, placement, tables_on
from gear_repro.utils.errors import GearError

DATASET_ORDER = ["MuSiQue", "2Wiki", "HotpotQA"]


def long_table(runs: Sequence[RunResult], metrics: Sequence[str] | None = None,
               opts: EvidenceOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """One row per (run, metric, paper table): ours with its interval and N, the paper's value for the same cell
    (beside ours with a Δ only on the table's setting: reporting/setting.py), in the run's own paper table
    (report.paper / report.table) and in every table of another paper measured on the run's data (a retrieval table
    of the paper that published the run's 2Wiki set, for a run on it) that has a number for the row."""
    rows = []
    for r in runs:
        names = metrics or run_metrics(r)  # every evaluated R@k (run.ks), then EM/F1
        if r.is_qa_bound:
            names = [m for m in names if m in ("EM", "F1")]  # QA bounds: their retrieval is not evaluated
        known = ((r.run_info.get("setting") or {}).get("known") or {}).get("names") or ()
        for m in names:
            key = metric_key(m)
            if key not in r.metrics:
                continue
            ci = interval(r, m, opts)
            ours = ci.mean if ci is not None else float(r.metrics[key])
            ref_paper, ref_table, setting = r.paper_ref(m)
            paper = paper_value(ref_table, r.method_label_for(m), r.dataset, m, paper=ref_paper, setting=setting)
            if paper is None and not setting:
                _note_ambiguous(r, ref_paper, ref_table, r.method_label_for(m), m)
            rows.append(_row(r, m, ours, ci, ref_paper, ref_table, setting, paper))
            for other_paper, other_table in tables_on(known, r.dataset):
                if other_paper in (r.paper, ref_paper):  # the run's own paper: its table is the preset's choice
                    continue
                value = paper_value(other_table, r.method_label_for(m), r.dataset, m, paper=other_paper)
                if value is not None:
                    rows.append(_row(r, m, ours, ci, other_paper, other_table, None, value,
                                     extra=f"{other_paper} {other_table}"))
    return pd.DataFrame(rows)


def _row(r: RunResult, m: str, ours: float, ci: Interval | None, ref_paper: str, ref_table: str,
         setting: str | None, paper: float | None, extra: str | None = None) -> dict:
    """One cell of the long table: the run's ``m`` under ``ref_paper``'s ``ref_table``, with the paper's number
    beside it (and Δ) only where the run is on that table's setting, else apart with what differs; ``extra``: the
    table ("<paper> Table 2") of a row added for another paper's table measured on the run's data."""
    table = r.table_for(m)
    method, label = r.label_for(m)
    where = placement(r.run_info.get("setting"), ref_paper, ref_table, r.dataset,
                      cell=f"{setting or ''} {r.method_label_for(m)}")
    own = (ref_paper, ref_table) == (r.paper, table)
    source = "" if paper is None or own else f"{ref_paper} {ref_table}" + (f" ({setting})" if setting else "")
    flag = None if paper is None else paper_flag(ref_table, r.method_label_for(m), r.dataset, m, ref_paper, setting)
    return {
        "table": table if extra is None else extra, "block": block_name(ref_paper, ref_table),
        "method": method, "label": label, "dataset": r.dataset, "metric": m, "ours": round(ours, 2),
        "ci_low": None if ci is None else round(ci.low, 2), "ci_high": None if ci is None else round(ci.high, 2),
        "n": None if ci is None else ci.n,
        "paper": paper if where.beside else None,
        "delta": None if paper is None or not where.beside else round(ours - paper, 2),
        "paper_other_setting": None if where.beside else paper,
        "setting_differs": None if where.beside or paper is None else where.why,
        "subset": where.subset if paper is not None else None,
        "setting_unchecked": "; ".join(where.unchecked) if where.beside and paper is not None and where.unchecked
        else None,
        "recall_ceiling": r.recall_ceiling if m.startswith("R@") else None,
        "gold_note": gold_differs(r.run_info.get("setting")) if m.startswith("R@") else None,
        "paper_source": source,
        # a printed number the paper contradicts (paper_flags.csv): its mark beside it, the reason in a footnote
        "paper_flag": None if flag is None else flag.mark, "paper_flag_reason": None if flag is None else flag.reason,
        "n_questions": r.metrics.get("n_scored", r.metrics.get("n_questions")),
        "n_errors": int(r.metrics.get("n_errors") or 0),  # scored as misses
        "dataset_name": r.config.get("dataset", {}).get("name"), "run_dir": str(r.path),
    }


def _note_ambiguous(run: RunResult, paper: str, table: str, method: str, metric: str) -> None:
    """Say why a cell the paper gives under several settings has no paper number beside it (:func:`paper_value`)."""
    settings = paper_settings(table, method, run.dataset, metric, paper)
    if len(settings) < 2:
        return
    key = "report.qa_setting" if metric in ("EM", "F1") and run.report.get("qa_paper") else "report.setting"
    note = (f"{run.path}: {paper} {table} gives {method} on {run.dataset} under several settings "
            f"({'; '.join(settings)}) and the run names none ({key}): no paper number beside it")
    if note not in run.notes:
        run.notes.append(note)


def block_name(paper: str, table: str) -> str:
    """The report block of a paper's table: "Table 2" for the default paper (GEAR), else "<paper> Table 2", so two
    papers' tables of one number never share a block."""
    return table if paper == DEFAULT_PAPER or table.startswith(f"{paper} ") else f"{paper} {table}"


def ci_text(ours: float, low: float | None, high: float | None, n: int | None) -> str:
    """ "45.2 [38.1, 52.3] n=100"; without per-question values (predictions.jsonl gone) "45.2 [no CI] n=100"."""
    n_txt = "?" if n is None or pd.isna(n) else str(int(n))
    if low is None or pd.isna(low):
        return f"{ours:.1f} [no CI] n={n_txt}"
    return f"{ours:.1f} [{low:.1f}, {high:.1f}] n={n_txt}"


def flag_mark(row: pd.Series | dict) -> str:
    """The mark of a flagged paper number (``paper_flag``), "" for an unflagged one."""
    mark = row.get("paper_flag")
    return mark if isinstance(mark, str) else ""


def ceiling_text(row: pd.Series | dict) -> str:
    """`` ≤87.3`` after a recall cell whose run's recall ceiling is below 100 (gold passages missing from the
    corpus), "" otherwise: table.md's and the explorer's cells alike."""
    ceiling = row.get("recall_ceiling")
    if ceiling is not None and not pd.isna(ceiling) and ceiling < 100:
        return f" ≤{ceiling:.1f}"
    return ""


def _cell(row: pd.Series) -> str:
    n = row.get("n")
    ours = ci_text(row["ours"], row.get("ci_low"), row.get("ci_high"), row["n_questions"] if pd.isna(n) else n)
    ours += ceiling_text(row)
    if row["paper"] is None or pd.isna(row["paper"]):
        other = row.get("paper_other_setting")
        if other is None or pd.isna(other):
            return ours
        return f"{ours} {{paper, other setting: {other:.1f}{flag_mark(row)}}}"  # no Δ: not the paper's setting
    subset = row.get("subset")
    on = "" if subset is None or pd.isna(subset) else f"; {subset}"
    return f"{ours} ({row['paper']:.1f}{flag_mark(row)}, {row['delta']:+.1f}{on})"


def wide_table(long: pd.DataFrame) -> pd.DataFrame:
    """Paper layout: rows by run label in first-seen order (runs sharing a method label are told apart by the
    settings that differ, ``RunResult.label``), (dataset, metric) columns; cell "ours [CI] n=N (paper, Δ)"."""
    if long.empty:
        return pd.DataFrame()
    df = long.copy()
    df["method"] = df["label"] if "label" in df.columns else df["method"]
    if df.duplicated(["method", "dataset", "metric"]).any():  # RunResult.label is unique per dataset
        raise GearError("two runs share a row label and a dataset: " + ", ".join(
            df[df.duplicated(["method", "dataset", "metric"], keep=False)]["run_dir"].drop_duplicates()))
    df["cell"] = df.apply(_cell, axis=1)
    methods = list(dict.fromkeys(df["method"]))
    datasets = sorted(df["dataset"].unique(), key=lambda d: (DATASET_ORDER.index(d) if d in DATASET_ORDER else 99, d))
    order = metric_order(df["metric"])
    cols = [(d, m) for d in datasets for m in [*order, "errors"]
            if m == "errors" or ((df.dataset == d) & (df.metric == m)).any()]
    both = df
    if "n_errors" in df.columns:  # "errors" column per dataset: failed questions, scored as misses
        errs = df.drop_duplicates(["method", "dataset"]).assign(metric="errors")
        both = pd.concat([df, errs.assign(cell=errs["n_errors"].astype(int).astype(str))])
    wide = both.pivot(index="method", columns=["dataset", "metric"], values="cell").reindex(index=methods)
    cols = [c for c in cols if c in wide.columns]
    return wide.reindex(columns=pd.MultiIndex.from_tuples(cols)).fillna("–")


def sources_note(long: pd.DataFrame) -> str:
    """Footnotes: the paper table of rows whose bracketed numbers come from another paper, what differs from the
    paper's setting where its number stands apart ("{paper, other setting: ...}"), and why a marked paper number
    (paper_flags.csv) is suspect."""
    notes = []
    if "paper_source" in long.columns:
        src = long[long["paper_source"].fillna("") != ""].drop_duplicates(["method", "paper_source"])
        notes += [f"Paper numbers of {r.method}: {r.paper_source}." for r in src.itertuples()]
    if "recall_ceiling" in long.columns:
        capped = long[long["recall_ceiling"].fillna(100) < 100].drop_duplicates(["label", "dataset"])
        notes += [f"{r.label} on {r.dataset}: ≤{r.recall_ceiling:.1f} is the recall ceiling, gold passages of some "
                  "questions are not in the corpus (counted as misses, as the reference evaluations do)"
                  + (f": {r.gold_note}." if isinstance(getattr(r, "gold_note", None), str) else ".")
                  for r in capped.itertuples()]
    if "setting_differs" in long.columns:
        other = long[long["setting_differs"].fillna("") != ""].drop_duplicates(["label", "dataset", "setting_differs"])
        notes += [f"{r.label} on {r.dataset}: the paper's number is on another setting ({r.setting_differs}), "
                  "so no Δ." for r in other.itertuples()]
    if "paper_flag" in long.columns:
        flagged = long[long["paper_flag"].notna()].drop_duplicates(["method", "dataset", "metric", "paper_flag"])
        notes += [f"{r.paper_flag} {r.method} on {r.dataset}, {r.metric}: the paper's number, shown as printed, is "
                  f"{r.paper_flag_reason}." for r in flagged.itertuples()]
    if "setting_unchecked" in long.columns:
        loose = long[long["setting_unchecked"].fillna("") != ""].drop_duplicates(["label", "dataset", "setting_unchecked"])
        notes += [f"{r.label} on {r.dataset}: beside the paper's number, but not fully checked: {r.setting_unchecked}."
                  for r in loose.itertuples()]
    return "\n".join(f"- {n}" for n in notes)


# characters of the cells and labels that pdflatex's default input encoding does not set ("Unicode character ≤
# (U+2264) not set up for use with LaTeX"), written as LaTeX; Latin-1 letters (é, ü) it sets as they are
_TEX = {"≤": r"$\leq$", "≥": r"$\geq$", "–": "--", "—": "---", "−": "$-$", "±": r"$\pm$", "×": r"$\times$",
        "÷": r"$\div$", "²": "$^{2}$", "³": "$^{3}$", "¹": "$^{1}$", "…": r"\ldots{}", "·": r"$\cdot$",
        "∞": r"$\infty$", "≈": r"$\approx$", "→": r"$\rightarrow$", "‘": "`", "’": "'", "“": "``", "”": "''",
        "†": r"\textdagger{}", "‡": r"\textdaggerdbl{}",
        "Δ": r"$\Delta$", "δ": r"$\delta$", "γ": r"$\gamma$", "ρ": r"$\rho$", "α": r"$\alpha$", "β": r"$\beta$",
        "λ": r"$\lambda$", "μ": r"$\mu$", "µ": r"$\mu$", "σ": r"$\sigma$", "τ": r"$\tau$", "θ": r"$\theta$",
        "\u00a0": "~"}


def tex_text(text: str) -> str:
    """``text`` (LaTeX already escaped) with every character pdflatex cannot read as it is written as LaTeX:
    :data:`_TEX`, else the character's ASCII letters (NFKD, accents dropped), else ``?``."""
    import unicodedata

    out = []
    for ch in text:
        if ch.isascii() or ("\u00c0" <= ch <= "\u00ff" and ch not in "×÷"):
            out.append(ch)
        elif ch in _TEX:
            out.append(_TEX[ch])
        else:
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(plain or "?")
    return "".join(out)


def write_tables(long: pd.DataFrame, out_dir: str | Path, stem: str = "table") -> dict[str, Path]:
    """Write <stem>.csv (long), <stem>.md and <stem>.tex (wide, one block per paper table)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "md": out / f"{stem}.md", "tex": out / f"{stem}.tex"}
    long.to_csv(paths["csv"], index=False)
    md_parts, tex_parts = [], []
    if long.empty:  # no run with a metric (e.g. only failed runs): say so rather than fail
        md_parts.append("No run with a metric to tabulate.\n")
    for table, sub in (long.groupby("block", sort=False) if not long.empty else ()):
        wide = wide_table(sub)
        flat = wide.copy()
        flat.columns = [f"{d} {m}" for d, m in wide.columns]
        n = sorted({int(x) for x in sub["n"].dropna()} or {int(x) for x in sub["n_questions"].dropna()})  # cells' N
        notes = sources_note(sub)
        md_parts.append(f"### {table}: ours [95% bootstrap CI] n=questions (paper, Δ on the paper's setting) — "
                        f"questions per run: {n}\n\n" + flat.to_markdown() + "\n" + (f"\n{notes}\n" if notes else ""))
        tex_parts.append(tex_text(f"% {table}: ours [95% bootstrap CI] n=questions (paper, delta)\n"
                                  + wide.to_latex(multicolumn=True, escape=True)))
    paths["md"].write_text("\n".join(md_parts), encoding="utf-8")
    paths["tex"].write_text("\n".join(tex_parts), encoding="utf-8")
    return paths
