"""The paper's analyses beyond the main tables, from finished run dirs (predictions.jsonl + config).

- :func:`density_table` — Table 12: R@15 by gold-passage triple density ρ (mean number of triples per gold
  passage of a question; bins ρ<9, 9≤ρ<11, 11≤ρ<13, 13≤ρ), from the dataset's triples file.
- :func:`rounds_table` — Table 9: R@5/10/15 after n = 1..N rounds, read off the per-round rankings
  (stopping at n is the same as running with max_rounds = n: the round-n list does not depend on the
  rewrite), per beam length; explicit max_rounds runs are used as they are.
- :func:`tokens_table` — LLM calls and tokens per question that did not error, per stage (Figure 4's quantities).
- :func:`method_tables` — each method's own statistics tables (its report hooks' ``summaries``: a method's loop
  statistics, stops, unparsed replies; e.g. EM/F1 by final resolution status, the T²RAG paper's Figure 3).
- :func:`format_trace` — the Table 6 walk-through of one question (``gear-repro-report RUN --trace QID``): the
  method's own (its report hooks' ``trace_lines``), else each round's recall and the result.
- :func:`write_analyses` — all of the above that apply to the given runs, as CSV + Markdown.

Recall cells of Tables 12 and 9 carry a 95% bootstrap interval over the questions of the cell and N
(``ci_low``/``ci_high``/``n``; gear_repro/reporting/evidence.py); errored questions count as 0.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from statistics import mean
from typing import Any

import pandas as pd

from gear_repro.evaluation.aggregate import calls_at_k, run_k
from gear_repro.evaluation.metrics import recall_at_k
from gear_repro.evaluation.per_question import question_values
from gear_repro.evaluation.stats import Interval
from gear_repro.methods.report_contract import result_lines
from gear_repro.pipeline import run_folder as rf
from gear_repro.reporting.evidence import EvidenceOptions, values_interval
from gear_repro.reporting.paper import DEFAULT_PAPER, paper_value
from gear_repro.reporting.runs import RunResult, load_predictions, read_config, read_predictions
from gear_repro.reporting.setting import placement
from gear_repro.reporting.tables import ci_text
from gear_repro.utils.io import iter_jsonl

DENSITY_BINS: list[tuple[str, float, float]] = [
    ("rho<9", -math.inf, 9.0), ("9<=rho<11", 9.0, 11.0), ("11<=rho<13", 11.0, 13.0), ("13<=rho", 13.0, math.inf),
]
def llm_stages() -> tuple[str, ...]:
    """Display order of LLM stages: each method's own (its report hooks), then the K.3 QA reader's."""
    from gear_repro.methods import report_hooks
    from gear_repro.qa.reader import QA_STAGE

    return tuple(dict.fromkeys([s for h in report_hooks() for s in h.stages] + [QA_STAGE]))


# -- inputs ------------------------------------------------------------------------------------------------
def scored(preds: Sequence[dict]) -> list[dict]:
    """Questions with gold passages; an errored one stays in (a miss, as in metrics.json)."""
    return [p for p in preds if p.get("gold_ids")]


def _ci_cols(ci: Interval | None) -> dict:
    return {"ci_low": None if ci is None else round(ci.low, 2), "ci_high": None if ci is None else round(ci.high, 2),
            "n": 0 if ci is None else ci.n}


@lru_cache(maxsize=8)
def _triples_per_passage(path: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for _, rec in iter_jsonl(Path(path)):
        counts[str(rec["passage_id"])] += 1
    return dict(counts)


def triples_file(run: RunResult) -> Path | None:
    d = run.config.get("dataset", {})
    if not d.get("path") or not d.get("triples_file"):
        return None
    p = Path(d["path"]) / d["triples_file"]
    return p if p.exists() else None


def triple_density(gold_ids: Sequence[str], per_passage: dict[str, int]) -> float:
    """ρ_t of a question: mean number of triples over its gold passages (0 for a passage without triples)."""
    return mean(per_passage.get(g, 0) for g in gold_ids) if gold_ids else float("nan")


def density_bin(rho: float) -> str:
    for label, lo, hi in DENSITY_BINS:
        if lo <= rho < hi:
            return label
    return DENSITY_BINS[-1][0]


# -- Table 12 -------------------------------------------------------------------------------------------------
def density_table(runs: Sequence[RunResult], k: int = 15, opts: EvidenceOptions | None = None) -> pd.DataFrame:
    """Table 12 rows: per run and ρ bin, mean R@k (0-100) with its interval, questions in the bin, paper, Δ."""
    opts = opts or EvidenceOptions()
    rows = []
    for run in runs:
        tf = triples_file(run)
        preds = scored(load_predictions(run))
        if tf is None or not preds or run.is_qa_bound or not run.evaluates(k):
            continue
        per_passage = _triples_per_passage(str(tf))
        where = placement(run.run_info.get("setting"), DEFAULT_PAPER, "Table 12", run.dataset)
        recall = question_values(preds, f"recall@{k}")
        bins: dict[str, dict[str, float]] = defaultdict(dict)
        for p in preds:
            rho = triple_density(p["gold_ids"], per_passage)
            bins[density_bin(rho)][str(p["id"])] = recall[str(p["id"])]
        for label, _, _ in DENSITY_BINS:
            vals = bins.get(label, {})
            metric = f"R@{k} {label}"
            cell = paper_value("Table 12", run.method_label, run.dataset, metric)
            paper = cell if where.beside else None  # like for like (reporting/setting.py)
            ci = values_interval(vals, opts)
            ours = round(ci.mean, 2) if ci else None
            rows.append({"table": "Table 12", "method": run.label, "dataset": run.dataset, "metric": metric,
                         "ours": ours, **_ci_cols(ci), "paper": paper,
                         "delta": None if paper is None or ours is None else round(ours - paper, 2),
                         "paper_other_setting": None if where.beside else cell,
                         "setting_differs": None if where.beside or cell is None else where.why,
                         "n_in_bin": len(vals), "n_questions": len(preds), "run_dir": str(run.path)})
    return pd.DataFrame(rows)


# -- Table 9 --------------------------------------------------------------------------------------------------
def _cfg(run: RunResult, *keys: str, default: Any = None) -> Any:
    node: Any = run.config
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


def rounds_table(runs: Sequence[RunResult], ks: Sequence[int] = (5, 10, 15),
                 opts: EvidenceOptions | None = None) -> pd.DataFrame:
    """Table 9 cells: runs of a method whose report hooks claim Table 9 (``rounds_table``) by beam length and
    n = 1..max_rounds, R@k after n rounds (with CI)."""
    from gear_repro.methods import agent_hooks

    opts = opts or EvidenceOptions()
    cells: dict[tuple, dict] = {}
    for run in runs:
        hooks = agent_hooks(run.config.get("agent"))
        if hooks is None or not hooks.rounds_table:
            continue
        preds = scored(load_predictions(run))
        if not preds:
            continue
        length = _cfg(run, "beam", "length", default=2)
        n_max = int(_cfg(run, "agent", "max_rounds") or _cfg(run, "dataset", "max_rounds", default=4))
        for n in range(1, n_max + 1):
            derived = n < n_max
            key = (run.label, run.method_label, run.dataset, length, n)
            if key in cells and derived and not cells[key]["derived"]:
                continue  # an explicit max_rounds=n run wins over a derived column
            vals = {k: values_interval(question_values(preds, f"recall@{k}@round{n}"), opts)
                    for k in ks if run.evaluates(k)}
            cells[key] = {"derived": derived, "vals": vals, "n_questions": len(preds), "run_dir": str(run.path),
                          "where": placement(run.run_info.get("setting"), DEFAULT_PAPER, "Table 9", run.dataset)}
    rows = []
    for (label, method, dataset, length, n), c in sorted(cells.items(), key=lambda kv: (kv[0][2], kv[0][3], kv[0][4])):
        setting = f"beam length {length}, max iterations {n}"
        for k, ci in c["vals"].items():
            cell = paper_value("Table 9", method, dataset, f"R@{k}", setting=setting)
            where = c["where"]
            paper = cell if where.beside else None  # like for like (reporting/setting.py)
            rows.append({"table": "Table 9", "method": label, "dataset": dataset, "beam_length": length,
                         "max_rounds": n, "metric": f"R@{k}", "ours": round(ci.mean, 2), **_ci_cols(ci),
                         "paper": paper, "delta": None if paper is None else round(ci.mean - paper, 2),
                         "paper_other_setting": None if where.beside else cell,
                         "setting_differs": None if where.beside or cell is None else where.why,
                         "derived_from_rounds": c["derived"],
                         "n_questions": c["n_questions"], "run_dir": c["run_dir"]})
    return pd.DataFrame(rows)


# -- tokens and each method's own statistics ---------------------------------------------------------------
def tokens_table(runs: Sequence[RunResult]) -> pd.DataFrame:
    """Per run and stage: calls, prompt/completion tokens per question that did not error (``n_errored`` left out,
    as in the cost table: an errored question's missing calls are no saving), cached share; for a matched-k run,
    what one run at its largest k costs (column ``k``), not the sum of its k passes (Fig. 4)."""
    rows = []
    for run in runs:
        preds, failed = RunResult.split_errored(load_predictions(run))
        if not preds:
            continue
        k = run_k(preds)
        agg: dict[str, Counter] = defaultdict(Counter)
        for p in preds:
            for c in calls_at_k(p.get("llm_calls", []) or [], k):
                a = agg[c.get("stage") or "?"]
                a["calls"] += 1
                a["prompt"] += int(c.get("prompt_tokens") or 0)
                a["completion"] += int(c.get("completion_tokens") or 0)
                a["cached"] += int(bool(c.get("cached")))
        n = len(preds)
        order = llm_stages()
        for stage in sorted(agg, key=lambda s: (order.index(s) if s in order else 99, s)):
            a = agg[stage]
            rows.append({"method": run.label, "dataset": run.dataset, "stage": stage, "k": k,
                         "calls_per_q": round(a["calls"] / n, 3), "prompt_per_q": round(a["prompt"] / n, 1),
                         "completion_per_q": round(a["completion"] / n, 1), "cached_calls": a["cached"],
                         "n_questions": n, "n_errored": len(failed), "run_dir": str(run.path)})
    return pd.DataFrame(rows)


def method_tables(runs: Sequence[RunResult]) -> list[tuple[str, str, pd.DataFrame]]:
    """Each method's own statistics tables (its report hooks' ``summaries``): (file stem, title, one row per run of
    the method, labelled as the run's rows in the other tables)."""
    from gear_repro.methods import agent_hooks, report_hooks

    out = []
    for hooks in report_hooks():
        for stem, title, row_of in hooks.summaries:
            rows = []
            for run in runs:
                if agent_hooks(run.config.get("agent")) is not hooks:
                    continue
                row = row_of(load_predictions(run))
                if row is not None:
                    rows.append({"method": run.label, "dataset": run.dataset, **row, "run_dir": str(run.path)})
            out.append((stem, title, pd.DataFrame(rows)))
    return out


# -- Table 6 walk-through ------------------------------------------------------------------------------------
def format_trace(pred: dict, titles: dict[str, str] | None = None, ks: Sequence[int] = (5, 10, 15)) -> str:
    """Table 6-style walk-through of one prediction record: the method's own (the first report hooks whose
    ``trace_lines`` recognise the record), else each round's recall and the result."""
    from gear_repro.methods import report_hooks

    titles = titles or {}
    gold = pred.get("gold_ids") or []

    def recall_line(ids: Sequence[str]) -> str:
        if not gold:
            return "n/a (no gold)"
        return ", ".join(f"R@{k} {100 * recall_at_k(ids, gold, k):.0f}" for k in ks)

    def plist(ids: Sequence[str], n: int = 10) -> str:
        return ", ".join(f"P{i + 1} {titles.get(p, p)}{' *' if p in gold else ''}" for i, p in enumerate(ids[:n]))

    lines = [f"Question {pred.get('id')}: {pred.get('question')}",
             f"  answers: {pred.get('answers')}   type: {pred.get('type')}",
             f"  gold: {', '.join(titles.get(g, g) for g in gold)}   (* = gold passage)"]
    if pred.get("error"):  # a failed question: its walk-through is empty and its recall 0 (scored as a miss), say why
        lines.append(f"  FAILED (scored as a miss; re-running the same command retries it): {pred['error']}")
    for hooks in report_hooks():
        own = hooks.trace_lines(pred, plist, recall_line) if hooks.trace_lines else None
        if own is not None:
            return "\n".join(lines + own)
    for r in pred.get("rounds", []):
        lines += [f"\n== Round {r.get('round')} ==",
                  f"   ranking had the method stopped here: {recall_line(r.get('ranking', []))}"]
    return "\n".join(lines + result_lines(pred, plist, recall_line))


def passage_titles(run: RunResult) -> dict[str, str]:
    d = run.config.get("dataset", {})
    path = Path(d.get("path", "")) / "corpus.jsonl"
    if not path.exists():
        return {}
    return {str(rec["id"]): rec.get("title", "") for _, rec in iter_jsonl(path)}


def runs_with_predictions(paths: Sequence[str | Path]) -> list[RunResult]:
    """Every folder under ``paths`` with a predictions.jsonl, finished or not (for ``--trace``)."""
    out = []
    for root in map(Path, paths):
        for pf in sorted(root.rglob(rf.PREDICTIONS)) if root.is_dir() else []:
            cfile = pf.parent / rf.CONFIG
            cfg = read_config(cfile) if cfile.exists() else {}
            out.append(RunResult(pf.parent, cfg, rf.read_json_file(pf.parent, rf.METRICS)))
    return out


def trace_report(runs: Sequence[RunResult], qid: str) -> str:
    """Walk-throughs of question ``qid`` in every run that has it."""
    parts = []
    for run in runs:
        preds = read_predictions(Path(run.path) / rf.PREDICTIONS, run.notes)  # every record, finished or not
        hit = next((p for p in preds if str(p.get("id")) == qid), None)
        if hit is not None:
            parts.append(f"### {run.method} — {run.dataset} ({run.path})\n" + format_trace(hit, passage_titles(run)))
    return "\n\n".join(parts)


# -- writing ---------------------------------------------------------------------------------------------------
def _write(df: pd.DataFrame, out: Path, stem: str, title: str) -> list[Path]:
    if df.empty:
        return []
    csv, md = out / f"{stem}.csv", out / f"{stem}.md"
    df.to_csv(csv, index=False)
    show = df.drop(columns=[c for c in ("run_dir",) if c in df.columns])
    md.write_text(f"### {title}\n\n{show.to_markdown(index=False)}\n", encoding="utf-8")
    return [csv, md]


def density_wide(long: pd.DataFrame) -> pd.DataFrame:
    """Table 12 layout: method rows, ρ-bin columns, cell "ours [CI] n=N (paper, Δ)"."""
    def cell(r: pd.Series) -> str:
        if r["ours"] is None or pd.isna(r["ours"]):
            return "– n=0"
        s = ci_text(r["ours"], r["ci_low"], r["ci_high"], r["n"])
        if r["paper"] is not None and not pd.isna(r["paper"]):
            s += f" ({r['paper']:.1f}, {r['delta']:+.1f})"
        return s
    df = long.copy()  # "method" holds RunResult.label: one row per run
    df["cell"] = df.apply(cell, axis=1)
    wide = df.pivot(index=["dataset", "method"], columns="metric", values="cell")
    return wide.reindex(columns=[c for c in dict.fromkeys(long["metric"]) if c in wide.columns])


def write_analyses(runs: Sequence[RunResult], out_dir: str | Path, opts: EvidenceOptions | None = None) -> list[Path]:
    """Write Table 12 (density), Table 9 (rounds × beam length), tokens per stage and each method's statistics."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    dens = density_table(runs, opts=opts)
    paths += _write(dens, out, "table12_density", "Table 12: R@15 by gold-passage triple density ρ")
    if not dens.empty:
        wide = density_wide(dens)
        p = out / "table12_density_wide.md"
        p.write_text("### Table 12: R@15 [95% bootstrap CI] n=questions in bin (paper, Δ)\n\n" + wide.to_markdown() + "\n",
                     encoding="utf-8")
        paths.append(p)
    paths += _write(rounds_table(runs, opts=opts), out, "table9_rounds",
                    "Table 9: R@k by beam length and maximum rounds")
    paths += _write(tokens_table(runs), out, "tokens_by_stage",
                    "LLM calls and tokens per question, by stage (n_questions: questions that did not error; "
                    "n_errored: left out, as in the cost table)")
    for stem, title, table in method_tables(runs):
        paths += _write(table, out, stem, title)
    return paths
