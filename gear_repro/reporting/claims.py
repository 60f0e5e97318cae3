"""Claims scoreboard: each paper claim the given runs can test -> holds / contradicted / inconclusive at this N.

Claims live in gear_repro/resources/claims.yaml (format documented there and in docs/evidence.md). Runs are
matched to a claim's roles by their resolved config (classes of agent / expansion / retriever, beam.diversity,
qa_reader.mode), never by display labels. Each (claim, dataset, metric) row is a paired comparison of one run
per role on the same question ids (:func:`gear_repro.reporting.evidence.paired`):

- verdict ``holds``: the 95% interval of mean(a - b) lies entirely on the claimed side of 0 and p < α;
  ``contradicted``: entirely on the other side and p < α; ``inconclusive``: otherwise;
  ``no runs``: a role has no run (or no pair agrees on the claim's ``same`` keys);
  ``refused``: the only pairs hold different question sets (rerun on one subset or use --intersect).
- "N needed": :func:`gear_repro.evaluation.stats.questions_needed` from the observed difference and the
  per-question sd of the differences (two-sided α = 0.05, power 0.8).
Intervals are per row; no correction for testing several metrics/claims is applied (stated in claims.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from gear_repro.evaluation.stats import paired_test, questions_needed
from gear_repro.methods.report_contract import config_value
from gear_repro.reporting.evidence import (
    DEFAULT_OPTIONS,
    EvidenceOptions,
    Pairing,
    QuestionSetMismatch,
    align,
    paired_arrays,
    predictions,
    values,
)
from gear_repro.reporting.paper import DEFAULT_PAPER, paper_value
from gear_repro.reporting.runs import RunResult, different_data
from gear_repro.reporting.setting import describe_setting, placement
from gear_repro.utils.errors import GearError

CLAIMS_YAML = Path(__file__).resolve().parent.parent / "resources" / "claims.yaml"
VERDICTS = ("holds", "contradicted", "inconclusive", "refused", "no runs")


# -- the claims file ---------------------------------------------------------------------------------------
def _fill(obj: Any, var: dict[str, str]) -> Any:
    """A copy of ``obj`` with "{name}" placeholders in strings replaced by ``var``'s values."""
    if isinstance(obj, str):
        return obj.format_map(var) if var else obj
    if isinstance(obj, list):
        return [_fill(x, var) for x in obj]
    if isinstance(obj, dict):
        return {k: _fill(v, var) for k, v in obj.items()}
    return obj


def load_claims(path: str | Path | None = None) -> list[dict]:
    """The claims of ``path`` (default: the bundled claims.yaml), one entry per ``each`` instance."""
    p = Path(path) if path else CLAIMS_YAML
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise GearError(f"claims file {p}: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("claims") or [], list):
        raise GearError(f"claims file {p}: expected a mapping with a 'claims' list (see {CLAIMS_YAML.name})")
    same = doc.get("same") or ["dataset.name"]
    out = []
    for c in doc.get("claims") or []:
        missing = [k for k in ("id", "text", "direction", "metrics", "a", "b") if k not in c]
        if missing or c["direction"] not in ("greater", "less"):
            raise GearError(f"claims file {p}: claim {c.get('id', '?')} lacks {missing} or has a bad direction")
        for var in c.get("each") or [{}]:
            inst = _fill({k: v for k, v in c.items() if k != "each"}, {k: str(v) for k, v in var.items()})
            if var:
                inst["id"] = f"{c['id']}[{var.get('label') or next(iter(var.values()))}]"
            inst.setdefault("same", same)
            out.append(inst)
    return out


# -- matching runs to roles ----------------------------------------------------------------------------------
def _class_name(target: Any) -> str | None:
    return str(target).rsplit(".", 1)[-1] if target else None


def matches(run: RunResult, selector: dict) -> bool:
    """Does the run's config satisfy every key of the role selector (see claims.yaml)?"""
    if "qa_reader.mode" not in selector and run.is_qa_bound:
        return False
    paper_row = selector.get("paper_row")  # true, or the settings the claim itself varies (the rest: the paper's)
    if paper_row and not (run.is_paper_row_but(paper_row) if isinstance(paper_row, list) else run.is_paper_row):
        return False  # a variant of the method (its label names how)
    if selector.get("paper_qa") and run.qa_notes:  # K.3 read other passages than Table 3's top 5 of the k = 5 pass
        return False
    for key, want in selector.items():
        if key in ("paper_row", "paper_qa"):
            continue
        have = config_value(run.config, key)
        if key.endswith("_target_"):
            have = _class_name(have)
        if key == "qa_reader.mode" and have is None:
            have = "retrieved"
        options = [config_value(run.config, o[1:]) if isinstance(o, str) and o.startswith("=") else o
                   for o in (want if isinstance(want, list) else [want])]  # "=dataset.max_rounds": that setting's value
        if have not in options:
            return False
    return True


# -- one row -----------------------------------------------------------------------------------------------
@dataclass
class ClaimRow:
    claim: str
    text: str
    source: str
    dataset: str
    metric: str
    direction: str
    verdict: str
    diff: float | None = None
    low: float | None = None
    high: float | None = None
    p_value: float | None = None
    n: int | None = None
    sd: float | None = None
    n_needed: float | None = None
    mean_a: float | None = None
    mean_b: float | None = None
    paper_a: float | None = None
    paper_b: float | None = None
    paper_diff: float | None = None
    run_a: str = ""
    run_b: str = ""
    note: str = ""
    tested_on: str = ""  # the data and models of the tested runs (reporting/setting.py describe_setting)
    paper_setting_differs: str = ""  # what differs from the setting of the paper's Δ (empty: the paper's setting)


def decide(diff: float, low: float, high: float, p: float, direction: str, alpha: float) -> str:
    """holds / contradicted / inconclusive for a claim "a > b" (greater) or "a < b" (less)."""
    sign = 1.0 if direction == "greater" else -1.0
    lo, hi = sorted((sign * low, sign * high))
    if p < alpha and lo > 0:
        return "holds"
    if p < alpha and hi < 0:
        return "contradicted"
    return "inconclusive"


def _paper_cells(claim: dict, dataset: str, metric: str, run: RunResult | None = None
                 ) -> tuple[float | None, float | None]:
    """The paper's a and b cells; a within-run claim's ``setting`` may name the tested run's ``{beam_length}`` and
    ``{max_rounds}`` (its own setting's cells, not a fixed one's)."""
    spec = claim.get("paper") or {}
    fill = {} if run is None else {"beam_length": str(config_value(run.config, "beam.length") or 2),
                                   "max_rounds": str(_max_rounds(run))}

    def one(cell: dict | None) -> float | None:
        if not cell:
            return None
        setting = cell.get("setting")
        if setting is not None and "{" in setting:
            if not fill:
                return None
            setting = setting.format_map(fill)
        return paper_value(cell["table"], cell["method"], dataset, cell.get("metric", metric),
                           paper=cell.get("paper", DEFAULT_PAPER), setting=setting)
    return one(spec.get("a")), one(spec.get("b"))


def _paper(claim: dict, dataset: str, metric: str, run: RunResult | None = None) -> dict[str, float | None]:
    pa, pb = _paper_cells(claim, dataset, metric, run)
    return {"paper_a": pa, "paper_b": pb, "paper_diff": None if pa is None or pb is None else round(pa - pb, 2)}


# a claim's `same` key and the settings it stands for: `llm.model` is the served alias, the same for every GGUF file
# the harness serves under it (llm.server.model_path)
_SAME_ALSO = {"llm.model": ("llm.server.model_path",)}


def _same(ra: RunResult, rb: RunResult, keys: Sequence[str]) -> bool:
    """Whether two runs agree on the claim's ``same`` keys that both used (``RunResult.uses``: a BM25 run's
    ``embedder.model`` and an LLM-free run's ``llm.model`` say nothing of its numbers, so they never keep it from
    pairing with a run of another embedder or LLM: else "expansion > its BM25 base" finds no pair when the BM25 run
    kept the default embedder)."""
    keys = [k for key in keys for k in (key, *_SAME_ALSO.get(key, ()))]
    return all(config_value(ra.config, k) == config_value(rb.config, k) for k in keys if ra.uses(k) and rb.uses(k))


def _label(run: RunResult) -> str:
    return f"{run.method} ({Path(run.path).name})"


def _max_rounds(run: RunResult) -> int:
    return int(config_value(run.config, "agent.max_rounds") or config_value(run.config, "dataset.max_rounds") or 1)


def _keys(claim: dict, metric: str, run: RunResult) -> tuple[str, str]:
    """Per-question keys of a and b: the metric itself, or two rounds of one run (within_run: rounds)."""
    if claim.get("within_run") == "rounds":
        k = metric.removeprefix("R@")
        return f"recall@{k}@round{_max_rounds(run)}", f"recall@{k}@round1"
    return metric, metric


def errored(run: RunResult) -> set[str]:
    """Ids of the run's questions that failed (``error`` in predictions.jsonl: scored as misses, their tokens 0)."""
    return {str(p.get("id")) for p in RunResult.split_errored(predictions(run))[1]}


def _pairs(claim: dict, ras: list[RunResult], rbs: list[RunResult]) -> list[tuple[RunResult, RunResult]]:
    if claim.get("within_run"):
        return [(r, r) for r in ras if r in rbs and _max_rounds(r) > 1]
    return [(a, b) for a in ras for b in rbs if a is not b and _same(a, b, claim["same"])]


def evaluate_claim(claim: dict, runs: Sequence[RunResult], opts: EvidenceOptions = DEFAULT_OPTIONS) -> list[ClaimRow]:
    """Rows of one claim: one per dataset × metric the runs can test, or one "no runs" row."""
    base = {"claim": claim["id"], "text": claim["text"], "source": claim.get("source", ""),
            "direction": claim["direction"]}
    ras = [r for r in runs if matches(r, claim["a"])]
    rbs = [r for r in runs if matches(r, claim["b"])]
    datasets = sorted({r.dataset for r in ras + rbs})
    rows: list[ClaimRow] = []
    for metric in claim["metrics"]:
        for ds in datasets or ["–"]:
            row = ClaimRow(**base, dataset=ds, metric=metric, verdict="no runs", **_paper(claim, ds, metric))
            cands = []
            skipped = []
            for a, b in _pairs(claim, [r for r in ras if r.dataset == ds], [r for r in rbs if r.dataset == ds]):
                why = different_data(a, b)
                if why:  # the same question ids over another corpus: never a paired comparison
                    skipped.append(why)
                    continue
                ka, kb = _keys(claim, metric, a)
                va, vb = values(a, ka), values(b, kb)
                if va and vb:
                    shared = len(set(va) & set(vb))
                    near = Path(a.path).parent == Path(b.path).parent  # same sweep first
                    cands.append((set(va) == set(vb), shared, near, str(a.path), str(b.path), a, b, va, vb))
            if not cands:
                missing = [r for r, rs in (("a", ras), ("b", rbs)) if not [x for x in rs if x.dataset == ds]]
                row.note = (f"no run for role {' and '.join(missing)}" if missing
                            else f"the only pairs read {skipped[0]}" if skipped
                            else f"no pair of runs with {metric} values agreeing on {', '.join(claim['same'])}")
                if skipped and not missing:
                    row.verdict = "refused"
                rows.append(row)
                continue
            same_ids, *_, a, b, va, vb = max(cands, key=lambda c: c[:5])
            row.run_a, row.run_b = _label(a), _label(b)
            row.tested_on = describe_setting(a.run_info.get("setting"))
            cell = (claim.get("paper") or {}).get("a")
            if cell and row.paper_diff is not None:  # a claim "as the paper says" on another setting says so
                where = placement(a.run_info.get("setting"), cell.get("paper", DEFAULT_PAPER), cell["table"], ds,
                                  cell=f"{cell.get('setting') or ''} {cell.get('method') or ''}")
                row.paper_setting_differs = "" if where.beside else where.why
            if claim.get("within_run"):  # the paper's cells of this run's own setting
                for key, value in _paper(claim, ds, metric, a).items():
                    setattr(row, key, value)
            notes = []
            if len(cands) > 1:  # say so rather than test one of several silently
                others = sorted({_label(x) for c in cands for x in c[5:7]} - {row.run_a, row.run_b})
                notes.append(f"{len(cands)} pairs of runs qualify; tested the pair sharing the most questions (then "
                             f"the same sweep, then path order); also qualifying: {', '.join(others[:4])}"
                             f"{' ...' if len(others) > 4 else ''}")
            try:
                pairing = align(va, vb, opts.intersect, f"{claim['id']} {ds} {metric}")
            except QuestionSetMismatch as e:
                row.verdict, row.note = "refused", str(e).split(": ", 1)[-1]
                rows.append(row)
                continue
            failed = errored(a) | errored(b)  # a question a run failed on (a dead endpoint) measures neither method
            if failed & set(pairing.ids):
                kept = [q for q in pairing.ids if q not in failed]
                notes.append(f"{len(pairing.ids) - len(kept)} question(s) errored in a or b (scored as misses in the "
                             "tables): left out of this comparison")
                if not kept:
                    row.verdict, row.note = "refused", "; ".join(notes)
                    rows.append(row)
                    continue
                pairing = Pairing(kept, pairing.dropped_a, pairing.dropped_b)
            xa, xb = paired_arrays(va, vb, pairing)
            res = paired_test(xa, xb, opts.resamples, opts.seed, opts.alpha)
            row.verdict = decide(res.diff, res.low, res.high, res.p_value, claim["direction"], opts.alpha)
            row.diff, row.low, row.high, row.p_value = res.diff, res.low, res.high, res.p_value
            row.n, row.sd, row.mean_a, row.mean_b = res.n, res.sd, res.mean_a, res.mean_b
            row.n_needed = questions_needed(res.diff, res.sd, opts.alpha)
            if not same_ids:
                notes.append(f"--intersect: {pairing.dropped_a} questions of a and {pairing.dropped_b} of b left out")
            row.note = "; ".join(notes)
            rows.append(row)
    return rows


def evaluate_claims(runs: Sequence[RunResult], claims: Sequence[dict] | None = None,
                    opts: EvidenceOptions = DEFAULT_OPTIONS) -> list[ClaimRow]:
    return [row for c in (claims if claims is not None else load_claims()) for row in evaluate_claim(c, runs, opts)]


# -- writing -----------------------------------------------------------------------------------------------
def _num(x: float | None, fmt: str = "{:+.1f}") -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else fmt.format(x)


def _n_needed(row: ClaimRow) -> str:
    if row.n_needed is None:
        return "–"
    if math.isinf(row.n_needed):
        return "∞ (no difference)"
    return f"{int(row.n_needed)}" + (" (decided)" if row.verdict in ("holds", "contradicted") else "")


def _no_runs_line(r: ClaimRow) -> tuple[str, str, str]:
    """The table line a "no runs" row is listed on: one per claim, dataset and note (its metrics joined)."""
    return (r.claim, r.dataset, r.note)


def _verdict_counts(rows: Sequence[ClaimRow]) -> str:
    """Lines of the table by verdict, as listed; the "no runs" lines say how many dataset × metric rows they hold."""
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    untested = counts["no runs"]
    counts["no runs"] = len({_no_runs_line(r) for r in rows if r.verdict == "no runs"})
    text = ", ".join(f"{v} {n}" for v, n in counts.items())
    if untested != counts["no runs"]:
        text += f" (holding {untested} dataset × metric rows, one line per claim, dataset and reason)"
    return text


def _table_rows(rows: Sequence[ClaimRow]) -> list[str]:
    """One line per tested row; a claim's "no runs" rows collapse into one line per dataset and note."""
    out: list[str] = []
    done: set[tuple] = set()
    for r in rows:
        if r.verdict == "no runs":
            key = _no_runs_line(r)
            if key in done:
                continue
            done.add(key)
            metrics = ", ".join(x.metric for x in rows if x.verdict == "no runs" and _no_runs_line(x) == key)
            out.append(f"| {r.claim} | {r.dataset} | {metrics} | no runs | – | – | – | – | – | – | {r.note} |")
            continue
        ours = "–" if r.diff is None else f"{r.diff:+.1f} [{r.low:+.1f}, {r.high:+.1f}]"
        ab = "–" if r.mean_a is None else f"{r.mean_a:.1f} / {r.mean_b:.1f}"
        paper = "–" if r.paper_diff is None else f"{r.paper_diff:+.1f} ({r.paper_a:.1f} / {r.paper_b:.1f})" + (
            " other setting" if r.paper_setting_differs else "")
        p = "–" if r.p_value is None else f"{r.p_value:.3g}"
        runs = f"{r.run_a} vs {r.run_b}" if r.run_a else ""
        tested = f"tested on {r.tested_on}" if r.tested_on else ""
        differs = f"the paper's Δ is on another setting ({r.paper_setting_differs})" if r.paper_setting_differs else ""
        note = "; ".join(x for x in (runs, tested, differs, r.note) if x)
        verdict = f"**{r.verdict}**" if r.verdict in ("holds", "contradicted") else r.verdict
        out.append(f"| {r.claim} | {r.dataset} | {r.metric} | {verdict} | {ours} | {r.n or '–'} | {p} | {ab} | "
                   f"{paper} | {_n_needed(r)} | {note} |")
    return out


def claims_markdown(rows: Sequence[ClaimRow], opts: EvidenceOptions = DEFAULT_OPTIONS) -> str:
    lines = [
        "# Claims scoreboard",
        "",
        f"Each row: one paper claim on one dataset and metric, tested on the same questions (paired). "
        f"Δ = a − b, mean over questions with its {100 * (1 - opts.alpha):.0f}% paired-bootstrap interval "
        f"({opts.resamples} resamples, seed {opts.seed}); p = two-sided sign-flip permutation test. "
        f"**holds**: interval on the claimed side of 0 and p < {opts.alpha}; **contradicted**: on the other side and "
        f"p < {opts.alpha}; else **inconclusive**. N needed = ⌈((z₀.₉₇₅ + z₀.₈)·sd/|Δ|)²⌉ questions for a paired "
        "test to decide it with 80% power, from the observed per-question sd of the differences. "
        "Paper Δ: the paper's own a − b (gear_repro/resources/paper_results.csv), marked \"other setting\" where the "
        "tested runs' data, LLM, embedder or triples are not the paper table's (the note says what differs). "
        "No multiple-testing correction. "
        "Rules: docs/evidence.md.",
        "",
        "Lines by verdict: " + _verdict_counts(rows),
        "",
        "| claim | dataset | metric | verdict | ours Δ [95% CI] | N | p | ours a / b | paper Δ (a / b) | N needed | "
        "runs (a vs b) / note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *_table_rows(rows),
        "",
        "Claims:",
        "",
        *dict.fromkeys(f"- `{r.claim}`: {r.text} ({r.source})" for r in rows),
    ]
    return "\n".join(lines) + "\n"


def write_claims(runs: Sequence[RunResult], out_dir: str | Path, opts: EvidenceOptions = DEFAULT_OPTIONS,
                 claims_file: str | Path | None = None) -> list[Path]:
    """Write DIR/claims.md and DIR/claims.csv (every number of every row)."""
    rows = evaluate_claims(runs, load_claims(claims_file), opts)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / "claims.md", out / "claims.csv"
    md.write_text(claims_markdown(rows, opts), encoding="utf-8")
    pd.DataFrame([asdict(r) for r in rows]).to_csv(csv, index=False)
    return [md, csv]
