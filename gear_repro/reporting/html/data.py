"""What the HTML explorer shows, as JSON-ready dicts (docs/explorer.md): the overview (the report's tables read back
from the CSV files it wrote, runs' provenance), one index row per question and one detail record per question.

Nothing here names a method: per-method views come from each component's report hooks (``question_detail`` in
``gear_repro/methods/*/``), found by the ``_target_`` of the run's agent, expansion and retriever config nodes.
Gold ranks follow the metrics' rules (gear_repro/evaluation/aggregate.py): the ranking of the pass at k for
matched-k runs, else the final ranking; an errored question finds nothing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gear_repro.pipeline import run_folder as rf
from gear_repro.reporting.evidence import predictions
from gear_repro.reporting.runs import RunResult, UnfinishedRun, different_data
from gear_repro.reporting.tables import ceiling_text, ci_text, flag_mark
from gear_repro.utils.errors import DataError
from gear_repro.utils.hashing import hash_file
from gear_repro.utils.io import iter_jsonl

ERROR_CHARS = 300  # an error message in the question index (the full one is in the question's detail)
KEEP_CALL_KEYS = ("stage", "round", "k", "prompt_tokens", "completion_tokens", "cached", "latency_s", "model",
                  "error", "tokens_source", "prompt", "messages", "reply", "text", "ts")  # ts: the question timeline


def clean(obj: Any) -> Any:
    """JSON-ready copy: NaN/inf -> None, numpy and pandas scalars -> Python, tuples -> lists, keys -> str."""
    if isinstance(obj, Mapping):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):  # numpy scalar
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def unique(ids: Iterable[Any]) -> list[str]:
    return list(dict.fromkeys(str(i) for i in ids))


# -- runs as explorer columns ------------------------------------------------------------------------------------
@dataclass
class Column:
    """One run shown as a method column of its dataset."""

    run: RunResult
    index: int  # position in the report's run list (provenance)
    preds: dict[str, dict] = field(default_factory=dict)
    detail_fns: list[Callable[[dict], list[dict] | None]] = field(default_factory=list)

    @property
    def ks(self) -> list[int]:
        return [int(k) for k in (self.run.config.get("run") or {}).get("ks") or [5, 10, 15]]


def detail_hooks(run: RunResult) -> list[Callable[[dict], list[dict] | None]]:
    """The ``question_detail`` hooks of the run's components (agent, expansion, retriever), each once."""
    from gear_repro.methods import hooks_for

    fns: list[Callable[[dict], list[dict] | None]] = []
    for node in (run.config.get("agent"), run.config.get("expansion"), run.config.get("retriever")):
        hooks = hooks_for(node)
        if hooks is not None and hooks.question_detail is not None and hooks.question_detail not in fns:
            fns.append(hooks.question_detail)
    return fns


def columns_by_dataset(runs: Sequence[RunResult]) -> dict[str, list[Column]]:
    """Runs grouped by dataset (paper name), in report order, with their predictions by question id."""
    out: dict[str, list[Column]] = {}
    for i, run in enumerate(runs):
        col = Column(run, i, {str(p.get("id")): p for p in predictions(run)}, detail_hooks(run))
        out.setdefault(run.dataset, []).append(col)
    return out


def question_order(cols: Sequence[Column]) -> list[str]:
    """Question ids of a dataset: each run's evaluated questions in its order, later runs' new ones appended."""
    return unique(qid for c in cols for qid in c.preds)


# -- the question index ------------------------------------------------------------------------------------------
def gold_ranks(ranking: Sequence[str], gold: Sequence[str]) -> list[int]:
    """1-based rank of each gold passage in ``ranking`` (first occurrence), 0 when absent."""
    pos: dict[str, int] = {}
    for i, pid in enumerate(ranking):
        pos.setdefault(str(pid), i + 1)
    return [pos.get(g, 0) for g in gold]


def index_cell(pred: dict, gold: Sequence[str]) -> dict[str, Any]:
    """A method's entry in a question's index row: gold ranks per saved pass, EM/F1, error, answer."""
    if pred.get("error"):
        ranks: dict[str, list[int]] = {"final": [0] * len(gold)}
    else:
        rankings = pred.get("rankings") or {}
        ranks = {"final": gold_ranks(rankings.get("final", []), gold)}
        for k, ids in rankings.items():
            if k != "final" and (r := gold_ranks(ids, gold)) != ranks["final"]:
                ranks[str(k)] = r
    cell: dict[str, Any] = {"g": ranks}
    if "answer" in pred or pred.get("em") is not None:
        cell.update(em=pred.get("em"), f1=pred.get("f1"), a=pred.get("answer"))
    if pred.get("error"):
        cell["err"] = str(pred["error"])[:ERROR_CHARS]
    return cell


def first_pred(cols: Sequence[Column], qid: str) -> dict:
    return next(c.preds[qid] for c in cols if qid in c.preds)


def index_rows(cols: Sequence[Column], qids: Sequence[str]) -> list[dict[str, Any]]:
    """One row per question: id, text, hop type, answers, gold count and one cell per method (None: not run).
    A method's ranks are of its own gold ids (a run on another corpus or questions file has its own; its cell then
    carries its gold count ``ng`` when that differs from the row's)."""
    rows = []
    for qid in qids:
        p = first_pred(cols, qid)
        gold = unique(p.get("gold_ids") or [])
        cells = []
        for c in cols:
            if qid not in c.preds:
                cells.append(None)
                continue
            own = unique(c.preds[qid].get("gold_ids") or [])
            cells.append(index_cell(c.preds[qid], own) | ({"ng": len(own)} if len(own) != len(gold) else {}))
        rows.append({"id": qid, "q": p.get("question", ""), "type": p.get("type") or "", "ans": list(p.get("answers") or []),
                     "ng": len(gold), "m": cells})
    return rows


# -- one question's detail ---------------------------------------------------------------------------------------
def passage_ids_in(obj: Any) -> Iterable[str]:
    """Every passage id a detail block refers to (``passages_cell``)."""
    if isinstance(obj, dict):
        if obj.get("t") == "passages":
            yield from (str(i) for i in obj.get("ids", []))
            return
        for v in obj.values():
            yield from passage_ids_in(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from passage_ids_in(v)


def method_detail(col: Column, pred: dict, depth: int, common_gold: Sequence[str] = ()) -> dict[str, Any]:
    """What the question view shows of one method: top-``depth`` per saved pass, gold ranks in the final list,
    the answer, the method's own blocks (its hooks), the LLM calls and the timings; its own gold ids (``gold``)
    when they differ from the question's ``common_gold``."""
    gold = unique(pred.get("gold_ids") or [])
    rankings = {k: [str(i) for i in v[:depth]] for k, v in (pred.get("rankings") or {}).items()}
    final = (pred.get("rankings") or {}).get("final", [])
    sections: list[dict] = []
    for fn in col.detail_fns:
        sections += fn(pred) or []
    calls = [{k: c[k] for k in KEEP_CALL_KEYS if k in c} for c in pred.get("llm_calls") or []]
    out = {"rankings": rankings, "gold_rank": dict(zip(gold, gold_ranks(final, gold), strict=True)),
           "depth_saved": len(final), "sections": sections, "llm_calls": calls, "timings": pred.get("timings") or {},
           "error": pred.get("error")}
    steps = [r.get("timings") for r in pred.get("rounds") or [] if isinstance(r, dict)]
    if any(steps):  # a multi-step method's per-round step timings (the question timeline)
        out["step_timings"] = [s or {} for s in steps]
    if gold != list(common_gold):
        out["gold"] = gold
    for key in ("answer", "em", "f1", "qa_mode", "qa_raw", "qa_passages", "qa_dropped"):
        if key in pred:
            out[key] = pred[key]
    return out


@dataclass
class CorpusText:
    """One run's corpus as the explorer shows it: ``key`` tells corpora apart (run.json ``data_hashes.corpus``, else
    the file's hash, else its path), ``texts`` is (title, text) by id, {} with a ``note`` when unavailable."""

    key: str
    path: str
    texts: dict[str, tuple[str, str]]
    note: str | None = None


def run_cwd(run: RunResult) -> Path | None:
    """The directory the run was started in: run.json ``cwd`` (the runner records it), else Hydra's
    ``.hydra/hydra.yaml`` ``hydra.runtime.cwd``; None when neither says."""
    path = Path(run.path)
    try:
        cwd = rf.read_run_info(path).get("cwd")
        if not cwd and (path / rf.HYDRA_DIR / "hydra.yaml").is_file():
            from omegaconf import OmegaConf

            cwd = OmegaConf.select(OmegaConf.load(path / rf.HYDRA_DIR / "hydra.yaml"), "hydra.runtime.cwd")
    except Exception:  # an unreadable record only loses this hint
        return None
    return Path(str(cwd)) if cwd else None


def dataset_dirs(run: RunResult) -> list[Path]:
    """Where the run's ``dataset.path`` may be: as is when absolute; a relative one (the runner reads it against the
    directory it was started in, ``hydra.job.chdir=false``) against :func:`run_cwd`, the report's cwd and the run
    dir's parent."""
    raw = Path(str((run.config.get("dataset") or {}).get("path", "")))
    if raw.is_absolute():
        return [raw]
    bases = [b for b in (run_cwd(run), Path.cwd(), Path(run.path).parent) if b is not None]
    return list(dict.fromkeys(Path(os.path.normpath(b / raw)) for b in bases))


# what reading a corpus file can meet: a file that cannot be opened or read (OSError), a line that is not UTF-8 or
# not a JSON object (iter_jsonl's DataError), a record without an id (KeyError)
CORPUS_READ_ERRORS = (OSError, DataError, KeyError)


class Corpora:
    """Each run's corpus (:class:`CorpusText`), found where the run read it and shown only when its file still has the
    hash the run recorded (run.json ``data_hashes.corpus``, ``utils.hashing.hash_file`` as the dataset loader does);
    each file hashed and read once, only when asked. A corpus it cannot read (:data:`CORPUS_READ_ERRORS`) gets a
    note instead of failing the report."""

    def __init__(self) -> None:
        self._texts: dict[Path, dict[str, tuple[str, str]]] = {}
        self._hashes: dict[Path, str] = {}

    def _hash(self, path: Path) -> str:
        if path not in self._hashes:
            self._hashes[path] = hash_file(path)
        return self._hashes[path]

    def _read(self, path: Path) -> dict[str, tuple[str, str]]:
        if path not in self._texts:
            self._texts[path] = {str(r["id"]): (str(r.get("title", "")), str(r.get("text", "")))
                                 for _, r in iter_jsonl(path)}
        return self._texts[path]

    def of(self, run: RunResult) -> CorpusText:
        expected = run.data.get("corpus")
        tried = [d / "corpus.jsonl" for d in dataset_dirs(run)]
        changed: list[tuple[Path, str]] = []
        for path in tried:
            try:
                if not path.is_file():
                    continue
                got = self._hash(path)
                if expected is None or got == expected:
                    return CorpusText(expected or got, str(path), self._read(path))
                changed.append((path, got))
            except CORPUS_READ_ERRORS as e:  # unreadable or not JSON Lines: ids only, never a failed report
                return CorpusText(expected or f"path:{path}", str(path), {},
                                  f"passage texts unavailable: {path} could not be read ({type(e).__name__}: {e})")
        if changed:
            path, got = changed[0]
            note = (f"passage texts unavailable: corpus changed since the run ({path} has hash {got}, the run read "
                    f"{expected})")
            return CorpusText(str(expected), str(path), {}, note)
        where = " or ".join(str(p) for p in tried)
        return CorpusText(expected or f"path:{tried[0]}", str(tried[0]), {},
                          f"passage texts unavailable: corpus not found at {where}")


@dataclass
class DatasetCorpora:
    """The distinct corpora of one dataset column's runs (``corpora``) and which one each column read (``of_col``)."""

    corpora: list[CorpusText]
    of_col: list[int]
    labels: list[list[str]]  # run labels per corpus

    @property
    def mixed(self) -> bool:
        return len(self.corpora) > 1

    def info(self) -> list[dict[str, Any]] | None:
        """data.js ``corpora`` of the dataset (path, hash, methods, note), only when the page needs it: several
        corpora, or one whose texts are not shown."""
        if not self.mixed and self.corpora[0].note is None:
            return None
        return [{"path": c.path, "hash": c.key, "methods": labels, "note": c.note}
                for c, labels in zip(self.corpora, self.labels, strict=True)]


def dataset_corpora(cols: Sequence[Column], corpora: Corpora) -> DatasetCorpora:
    """Group a dataset's columns by corpus (runs whose corpus has one hash share it; the first with texts shown)."""
    found: list[CorpusText] = []
    of_col: list[int] = []
    labels: list[list[str]] = []
    for c in cols:
        ct = corpora.of(c.run)
        i = next((j for j, x in enumerate(found) if x.key == ct.key), None)
        if i is None:
            i = len(found)
            found.append(ct)
            labels.append([])
        elif found[i].note is not None and ct.note is None:
            found[i] = ct
        of_col.append(i)
        labels[i].append(c.run.label)
    return DatasetCorpora(found, of_col, labels)


def unpaired(cols: Sequence[Column]) -> dict[str, str]:
    """``{"i/j": why}`` for each pair of a dataset's methods (i < j, their column positions) that ``compare()`` and the
    claims would not pair (another corpus, other questions or other gold: ``different_data``): the explorer shows no
    win/tie/loss or per-question Δ for them, and says why."""
    return {f"{i}/{j}": f"not paired: {cols[i].run.label} and {cols[j].run.label} read {why}"
            for i in range(len(cols)) for j in range(i + 1, len(cols))
            if (why := different_data(cols[i].run, cols[j].run))}


def data_notes(cols: Sequence[Column], dc: DatasetCorpora) -> list[str]:
    """What the question view warns of in a dataset column: runs on other corpus/question files than the first
    (the console's ``check_same_data`` note), several corpora, corpus texts not shown."""
    name = cols[0].run.dataset
    ref = cols[0].run
    notes = [f"{c.run.label}: tabled under {name} beside {ref.label} but run on {why}"
             for c in cols[1:] if (why := different_data(ref, c.run))]
    if dc.mixed:
        notes.append(f"The runs of {name} read {len(dc.corpora)} different corpora ("
                     + "; ".join(f"corpus {i + 1}: {', '.join(lab)}" for i, lab in enumerate(dc.labels))
                     + "): each method's top k, gold marks and gold ranks use its own corpus and gold ids; its passages "
                     "are not comparable with another corpus's question by question.")
    for i, c in enumerate(dc.corpora):
        if c.note:
            notes.append(f"{', '.join(dc.labels[i])}: {c.note}")
    return notes


def question_detail(cols: Sequence[Column], qid: str, dc: DatasetCorpora, depth: int) -> dict[str, Any]:
    """The detail record of one question: its text and gold (the first run's), every method's view (with its own
    gold ids when they differ) and the passages they show: ``passages`` is {id: [title, text]}, or one such dict
    per corpus of ``dc`` when the column's runs read several (docs/explorer.md)."""
    p = first_pred(cols, qid)
    gold = unique(p.get("gold_ids") or [])
    methods = [method_detail(c, c.preds[qid], depth, gold) if qid in c.preds else None for c in cols]
    gold_corpus = dc.of_col[next(j for j, c in enumerate(cols) if qid in c.preds)]
    by_corpus: list[dict[str, list[str]]] = []
    for ci, corpus in enumerate(dc.corpora):
        mine = [m for j, m in enumerate(methods) if m and dc.of_col[j] == ci]
        own_gold = [g for m in mine for g in m.get("gold", [])]
        listed = [i for m in mine for ids in (*m["rankings"].values(), m.get("qa_passages") or []) for i in ids]
        wanted = unique([*(gold if ci == gold_corpus else []), *own_gold, *listed, *passage_ids_in(mine)])
        by_corpus.append({pid: list(corpus.texts[pid]) for pid in wanted if pid in corpus.texts})
    return clean({"id": qid, "question": p.get("question", ""), "type": p.get("type") or "",
                  "answers": list(p.get("answers") or []), "gold": gold, "methods": methods,
                  "passages": by_corpus if dc.mixed else by_corpus[0]})


# -- the overview ------------------------------------------------------------------------------------------------
def setting_note(run: RunResult) -> str | None:
    """Why this run's numbers are not on its paper table's setting (the corpus, questions, LLM, embedder or triples
    that differ: reporting/setting.py), or that its questions are a subset of the table's; None on the setting."""
    from gear_repro.reporting.setting import placement

    paper, table, setting = run.paper_ref("R@5")
    where = placement(run.run_info.get("setting"), paper, table, run.dataset,
                      cell=f"{setting or ''} {run.method_label_for('R@5')}")
    if not where.beside:
        return f"not {paper} {table}'s setting: {where.why}"
    return f"{where.subset} of {paper} {table}'s question set" if where.subset else None


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) and x else None


def _num(x: Any) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) or pd.isna(x) else float(x)


def paper_tables(table_csv: Path, runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The report's paper-layout tables read back from ``table.csv``: rows by run label, (dataset, metric) columns,
    each cell with its numbers, its text as table.md prints it, and the sample note of its run."""
    if not table_csv.is_file():
        return []
    from gear_repro.reporting.evidence import metric_order
    from gear_repro.reporting.tables import DATASET_ORDER

    long = pd.read_csv(table_csv, dtype={"paper_source": str})
    out = []
    for table, sub in long.groupby("block", sort=False):
        datasets = sorted(sub["dataset"].unique(), key=lambda d: (DATASET_ORDER.index(d) if d in DATASET_ORDER else 99, d))
        cols = [(d, m) for d in datasets for m in metric_order(sub["metric"])
                if ((sub.dataset == d) & (sub.metric == m)).any()]
        labels = list(dict.fromkeys(sub["label"]))
        rows = []
        for label in labels:
            cells = []
            for d, m in cols:
                hit = sub[(sub.label == label) & (sub.dataset == d) & (sub.metric == m)]
                if hit.empty:
                    cells.append(None)
                    continue
                r = hit.iloc[0]
                ours, low, high, n = _num(r["ours"]), _num(r["ci_low"]), _num(r["ci_high"]), _num(r["n"])
                paper, delta = _num(r["paper"]), _num(r["delta"])
                other = _num(r.get("paper_other_setting"))  # the paper's number on another setting: no Δ, no colour
                differs, subset = _text(r.get("setting_differs")), _text(r.get("subset"))
                mark = flag_mark(r)  # a printed number the paper contradicts (paper_flags.csv)
                paper_text = (f"({paper:.1f}{mark}, {delta:+.1f})" if paper is not None
                              else f"{{paper, other setting: {other:.1f}{mark}}}" if other is not None else None)
                cells.append({"ours": ours, "lo": low, "hi": high, "n": n, "paper": paper if paper is not None else other,
                              "delta": delta, "paper_text": paper_text,
                              "text": ci_text(ours, low, high, int(n) if n is not None else _num(r["n_questions"]))
                              + ceiling_text(r),
                              "source": r.get("paper_source") if isinstance(r.get("paper_source"), str) else "",
                              "flag": _text(r.get("paper_flag_reason")),
                              "errors": int(_num(r.get("n_errors")) or 0),
                              "sample": (f"not the paper's setting: {differs}" if differs
                                         else f"{subset} of the paper's question set" if subset and paper is not None
                                         else None)})
            rows.append({"label": label, "cells": cells})
        out.append({"title": str(table), "columns": [{"dataset": d, "metric": m} for d, m in cols], "rows": rows})
    return out


def csv_table(path: Path) -> dict[str, Any]:
    """A report CSV as a generic table, titled by the first heading of its Markdown sibling."""
    df = pd.read_csv(path)
    md = path.with_suffix(".md")
    title = path.stem
    if md.is_file():
        heads = [ln.lstrip("#").strip() for ln in md.read_text(encoding="utf-8").splitlines() if ln.startswith("#")]
        title = heads[0] if heads else title
    df = df.drop(columns=[c for c in ("run_dir",) if c in df.columns])
    return clean({"title": title, "file": path.name, "columns": list(df.columns),
                  "rows": df.astype(object).where(df.notna(), None).values.tolist()})


def claims_table(path: Path) -> dict[str, Any]:
    """The claims scoreboard (claims.csv) in claims.md's columns; rows with a verdict first, "no runs" rows last."""
    df = pd.read_csv(path)

    def f(x: Any, fmt: str) -> str:
        return "–" if x is None or pd.isna(x) else fmt.format(x)

    rows = []
    for r in df.itertuples():
        rows.append([r.claim, r.text, r.dataset, r.metric, r.verdict,
                     "–" if pd.isna(r.diff) else f"{r.diff:+.1f} [{r.low:+.1f}, {r.high:+.1f}]", f(r.n, "{:.0f}"),
                     f(r.p_value, "{:.3g}"), "–" if pd.isna(r.mean_a) else f"{r.mean_a:.1f} / {r.mean_b:.1f}",
                     "–" if pd.isna(r.paper_diff) else f"{r.paper_diff:+.1f} ({r.paper_a:.1f} / {r.paper_b:.1f})",
                     f(r.n_needed, "{:.0f}"),
                     "; ".join(str(x) for x in (f"{r.run_a} vs {r.run_b}" if isinstance(r.run_a, str) else "", r.note)
                               if isinstance(x, str) and x)])
    rows.sort(key=lambda r: r[4] == "no runs")
    return {"title": "Claims scoreboard (paired tests on the same questions; docs/evidence.md)", "file": path.name,
            "columns": ["claim", "text", "dataset", "metric", "verdict", "ours Δ [95% CI]", "N", "p", "ours a / b",
                        "paper Δ (a / b)", "N needed", "runs (a vs b) / note"], "rows": rows}


def run_provenance(run: RunResult) -> dict[str, Any]:
    """What the overview says of one run: where it is, what produced it (commit, data/index hashes, subset,
    packages, config) and what went wrong (errored questions, notes)."""
    path = Path(run.path)
    info = run.run_info
    env = info.get("environment") or {}
    preds = predictions(run)
    errors = [[str(p.get("id")), str(p.get("error"))[:ERROR_CHARS]] for p in preds if p.get("error")]
    subset = {k: v for k, v in (info.get("subset") or {}).items() if k != "ids"}
    scored = run.metrics.get("question_ids")
    if scored is not None and subset.get("size") not in (None, len(scored)):  # run.json is of the last (re)start
        subset["scored"] = (f"{len(scored)} (metrics.json: the last finished attempt; a resume to {subset['size']} "
                            "did not finish)")
    config = (path / rf.CONFIG).read_text(encoding="utf-8") if (path / rf.CONFIG).is_file() else ""
    return clean({"label": run.label, "dataset": run.dataset, "run_dir": str(path), "commit": env.get("git_commit"),
                  "fingerprint": info.get("fingerprint"), "data_hashes": info.get("data_hashes") or {},
                  "index_hashes": info.get("index_hashes") or {}, "subset": subset, "packages": env.get("packages") or {},
                  "host": env.get("host"), "timings": info.get("timings") or {}, "config": config,
                  "n_questions": run.metrics.get("n_questions"), "n_errors": int(run.metrics.get("n_errors") or 0),
                  "errors": errors[:50], "notes": list(run.notes), "sample": setting_note(run)})


def unfinished_rows(unfinished: Sequence[UnfinishedRun]) -> list[dict[str, Any]]:
    return [{"method": u.method, "run_dir": str(u.path), "finished": u.finished, "error": u.error} for u in unfinished]
