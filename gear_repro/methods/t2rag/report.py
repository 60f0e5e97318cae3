"""How the report shows T²RAG (seed 002): its row label, LLM stages, loop statistics (``t2rag_stats``) and the
walk-through of one record (registered in :func:`gear_repro.methods.report_hooks`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from functools import cache
from statistics import mean
from typing import Any

from omegaconf import OmegaConf

from gear_repro.methods.report_contract import (
    PaperValue,
    ReportHooks,
    RowParts,
    format_triple_list,
    node_setting,
    with_notes,
)
from gear_repro.methods.t2rag.detail import question_detail
from gear_repro.methods.t2rag.method import loop_counts, t2rag_trace
from gear_repro.methods.t2rag.settings import READING_KEYS
from gear_repro.utils.paths import config_dir

READING_PRESETS = {"code": ("t2rag",), "paper": ("t2rag", "t2rag_paper")}  # configs/agent/ files, merged in order


@cache
def reading_values(reading: str) -> dict[str, Any]:
    """The paper-vs-code keys as the preset of ``reading`` sets them (``configs/agent/t2rag.yaml`` for ``code``, with
    ``t2rag_paper.yaml`` over it for ``paper``): the presets are the one place these values are declared."""
    node = OmegaConf.merge(*(OmegaConf.load(config_dir() / "agent" / f"{name}.yaml")
                             for name in READING_PRESETS.get(reading, READING_PRESETS["code"])))
    return {key: node[key] for key in READING_KEYS}


def _reading_value(key: str) -> Any:
    """The paper row's value of a reading key: the value the preset of the run's ``agent.reading`` gives it (a run
    recorded before the presets gave every key holds null there, its reading's value: no note)."""
    return lambda config: reading_values(str(node_setting(config.get("agent") or {}, "reading", "code")))[key]


# the settings of T²RAG's paper row beyond N and the passages (its Table 2 ablations, named by the label): k = 5 per
# iteration (§5.2, main.py:99-100), the reference code's reading (the default, DESIGN.md; docs/readings.md) and each
# of its behaviours, its answer parse, the default fuzzy match and stall stop, and the proposition pool per query
T2RAG_SETTINGS = (
    PaperValue("agent.k", "k = {value}", 5),
    PaperValue("agent.candidate_depth", "{value} candidates per query", 200),
    PaperValue("agent.reading", "reading: {value}", "code"),
    *(PaperValue(f"agent.{key}", f"{key} {{value}}", of_config=_reading_value(key)) for key in READING_KEYS),
    PaperValue("agent.answer_parse", "{value} answer parse", "code"),
    PaperValue("agent.fuzzy_match", "fuzzy match: {value}", "placeholder"),
    PaperValue("agent.stall_stop", "no stall stop", True),
)


def agent_label(config: Mapping[str, Any], parts: RowParts) -> str:
    """"T2RAG" (paper_results.csv: N = 3 iterations with passages in the resolve prompt, §5.2), its Table 2 ablations
    by what they set ("T2RAG - single round": N = 1; "T2RAG - w/o chunk": no passages), another N named,
    "(K.3 reader)" when its passages go to the K.3 reader instead of its own answer, and the paper settings the run
    differs in (``T2RAG_SETTINGS``: "T2RAG (k = 10)": such a run never sits beside the paper's cell)."""
    node = config.get("agent") or {}
    parts_ = []
    n = int(node_setting(node, "max_iterations", PAPER_ITERATIONS))
    if n == 1:
        parts_.append("single round")
    elif n != PAPER_ITERATIONS:
        parts_.append(f"{n} rounds")
    if node_setting(node, "with_passages", True) is False:
        parts_.append("w/o chunk")
    label = "T2RAG" + (f" - {', '.join(parts_)}" if parts_ else "")
    label = f"{label} (K.3 reader)" if node_setting(node, "answer", True) is False else label
    return with_notes(label, parts.notes)


PAPER_ITERATIONS = 3  # T²RAG §5.2: at most N = 3 iterations

T2RAG_COUNTERS = ("decompose_ok", "decompose_repaired", "decompose_failed", "decompose_retry_ok",
                  "decompose_retry_failed", "query_failed", "resolve_ok", "resolve_repaired", "resolve_failed",
                  "resolve_skipped", "reclassified", "resolved_with_placeholder", "fuzzy_filled", "fuzzy_bound", "new_fuzzy", "dropped_fuzzy")


def summary_row(predictions: list[dict]) -> dict[str, Any] | None:
    """One T²RAG run: iterations, stops, LLM calls/tokens per question, reply-format counters and EM/F1 of
    the questions whose triplets were all resolved vs not (T²RAG paper, Figure 3). None without T²RAG records."""
    preds = [p for p in predictions if t2rag_trace(p) is not None]
    if not preds:
        return None
    traces = [p["trace"]["t2rag"] for p in preds]
    counters: Counter[str] = Counter()
    for t in traces:
        counters.update(t.get("counters", {}))
    iterations, stops = loop_counts(traces)
    calls = [c for p in preds for c in p.get("llm_calls", []) or []]
    row: dict[str, Any] = {
        "n_questions": len(preds),
        "iterations_mean": round(mean(t.get("iterations", 0) for t in traces), 3),
        "iterations_hist": dict(sorted(iterations.items())),
        "stop_all_resolved": stops.get("all_resolved", 0), "stop_max_iterations": stops.get("max_iterations", 0),
        "stop_no_triplets": stops.get("no_triplets", 0), "stop_stalled": stops.get("stalled", 0),
        "llm_calls_per_q": round(len(calls) / len(preds), 3),
        "prompt_tokens_per_q": round(sum(int(c.get("prompt_tokens") or 0) for c in calls) / len(preds), 1),
        "completion_tokens_per_q": round(sum(int(c.get("completion_tokens") or 0) for c in calls) / len(preds), 1),
        **{k: counters.get(k, 0) for k in T2RAG_COUNTERS},
    }
    for status in ("all_resolved", "unresolved"):
        sel = [p for p, t in zip(preds, traces, strict=True)
               if (t.get("stop") == "all_resolved") == (status == "all_resolved") and "em" in p]
        row[f"n_{status}"] = len(sel)
        row[f"em_{status}"] = round(100 * mean(p["em"] for p in sel), 1) if sel else None
        row[f"f1_{status}"] = round(100 * mean(p["f1"] for p in sel), 1) if sel else None
    return row


def trace_lines(pred: dict, plist: Any, recall_line: Any) -> list[str] | None:
    """The T²RAG walk-through: decomposition, then per iteration the queries, retrieved propositions and
    passages, the reply's clues and the triplet sets after the update (Alg. 1), then the answer. None for a record
    without T²RAG's trace."""
    t2 = (pred.get("trace") or {}).get("t2rag") if isinstance(pred.get("trace"), dict) else None
    if t2 is None:
        return None
    def sets(state: dict) -> list[str]:
        return [f"   {name} ({len(state.get(name, []))}):\n" + format_triple_list(state.get(name, []))
                for name in ("resolved", "searchable", "fuzzy")]

    dec = t2.get("decomposition", {})
    lines = [f"\n== Decomposition ({dec.get('status')}) =="] + sets(dec.get("state", {}))
    for r in pred.get("rounds", []):
        n = r.get("round")
        props = [f"{p['text']} [{p.get('score')}]" for p in r.get("propositions", [])]
        lines += [f"\n== Iteration {n} ==", f"1. Queries: {r.get('queries')}",
                  f"2. Propositions ({len(props)}): " + ("; ".join(props[:12]) or "(none)")
                  + (f" ... {len(props) - 12} more" if len(props) > 12 else ""),
                  f"   Passages: {plist(r.get('passages', []))}",
                  f"3. Resolve reply ({r.get('status')}): resolved {r.get('new_resolved')}, "
                  f"searchable {r.get('new_searchable')}", "4. Sets after the update:"] + sets(r.get("state", {}))
        lines.append(f"   ranking had T2RAG stopped here: {recall_line(r.get('ranking', []))}")
    final = (pred.get("rankings") or {}).get("final", [])
    lines += ["\n== Result ==", f"  stop: {t2.get('stop')}   iterations: {t2.get('iterations')}   "
              f"counters: {t2.get('counters')}", "  answer context:", format_triple_list(t2.get("answer_context", [])),
              f"  ranking: {plist(final, 15)}", f"  recall: {recall_line(final)}"]
    if "answer" in pred:
        lines.append(f"  answer ({pred.get('qa_mode')}): {pred.get('answer')!r}   EM {pred.get('em')}  "
                     f"F1 {pred.get('f1') if pred.get('f1') is None else round(pred['f1'], 3)}")
    return lines


STAGES = ("decompose", "decompose_retry", "resolve", "answer")
HOOKS = ReportHooks(names=("t2rag",), label=agent_label, stages=STAGES, paper_settings=T2RAG_SETTINGS,
                    uses_retriever=lambda config: False,
                    summaries=(("t2rag_stats", "T²RAG loop statistics (EM/F1 by final resolution status: T²RAG Figure 3)",
                                summary_row),),
                    trace_lines=trace_lines, question_detail=question_detail,
                    reply_failures=("decompose_failed", "decompose_retry_failed", "resolve_failed"))
