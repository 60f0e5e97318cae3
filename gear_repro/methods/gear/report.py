"""How the report shows GEAR (seed 000): its row labels, LLM stages, Table 9 and Fig. 2 roles, its loop statistics
(``agent_stats``) and the Table 6 walk-through of one record (named by its declarations, methods/gear/spec.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from statistics import mean
from typing import Any

from gear_repro.methods.gear.detail import agent_detail, expansion_detail
from gear_repro.methods.report_contract import (
    PAPER_MAX_ROUNDS,
    PaperValue,
    ReportHooks,
    RowParts,
    format_triple_list,
    result_lines,
    rounds_note,
    with_notes,
)

PAPER_EXPANSION = "SyncGE"  # GEAR's graph expansion (§5: SyncGE inside the agent)
PAPER_BASE = "hybrid"  # the base retriever of GEAR's own paper rows; any other base is named in the label
# Alg. 1's settings of the paper's rows (App. B.2, §6.2; Table 9 varies the length under its own preset)
BEAM_SETTINGS = (
    PaperValue("beam.length", "beam length {value}", 2),
    PaperValue("beam.width", "beam width {value}", 10),
    PaperValue("beam.diversity", "no diversity", True),
    PaperValue("beam.gamma", "gamma {value}", 20),
    PaperValue("beam.neighbours", lambda n: f"{n or 'all'} neighbours", 100, null=0),  # null/0 = every neighbour
    PaperValue("beam.scorer", "{value} scorer", "exact"),
    # the readings of Alg. 1 (docs/readings.md, docs/graph_expansion.md): a switch names its row
    PaperValue("beam.exists", "exists rule: {value}", "previous_step"),  # Alg. 1 line 11
    PaperValue("beam.dead_ends", "dead ends: {value}", "fallback"),
    PaperValue("beam.neighbour_selection", "neighbours by {value}", "relevance"),
)
EXPANSION_SETTINGS = (  # Eq. 3 (NaiveGE and SyncGE): RRF constant (DESIGN.md) and list order (the pseudocode's)
    PaperValue("expansion.k_rrf", "Eq. 3 k_rrf {value}", 60),
    PaperValue("expansion.fusion_order", "{value} fusion", "base_first"),
)
SYNC_SETTINGS = (  # SyncGE's reader (K.2 prompts, every proximal triple linked, the base list when none parse)
    PaperValue("expansion.prompt", "{value} reader prompt", "reader"),
    PaperValue("expansion.memory_prompt", "{value} memory prompt", "reader_gist"),
    PaperValue("expansion.max_proximal", "at most {value} proximal triples", "all", null="all"),
    PaperValue("expansion.on_no_proximal", "no proximal triples: {value}", "base"),
)
GEAR_SETTINGS = (  # §5: passageLink (Eq. 8-10), the dataset's rounds (§6.3), App. B.2, the pseudocode (gear.py)
    PaperValue("agent.passage_link", "no passageLink", True),
    PaperValue("agent.max_rounds", rounds_note, per_dataset=PAPER_MAX_ROUNDS),
    PaperValue("agent.base_k", "base k {value}", 10),
    PaperValue("agent.query_for_base", "base query: {value}", "rewritten"),
    PaperValue("agent.query_for_beam", "beam query: {value}", "original"),
    PaperValue("agent.reader_memory", "reader without memory", True),
    PaperValue("agent.read_with", "reads the {value} question", "original"),
    PaperValue("agent.gist_docs", "gist of the {value} list", "expanded"),
    PaperValue("agent.gist_first_round", "round-1 gist: {value}", "read"),
    PaperValue("agent.gist_k", "gist of the top {value}", "all", null="all"),  # null = the whole list (gear.py:52)
    PaperValue("agent.gist_empty", "empty gist list: {value}", "skip"),
    PaperValue("agent.k_rrf", "k_rrf {value}", 60),
    # Eq. 5 and the pseudocode's extend (gear.py:11) keep repeats; docs/readings.md "memory de-duplication"
    PaperValue("agent.dedupe_memory", "memory de-duplicated", False),
    # Eq. 10's h_base^k: the run's base k (null = base_k)
    PaperValue("agent.passage_link_k", "passageLink k {value}", of_config=lambda c: (c.get("agent") or {}).get("base_k")),
)
STAGES = ("read", "gist", "reason", "rewrite")  # the K.2 reader, gist memory, reasoner, rewriter (§5)


def agent_label(config: Mapping[str, Any], parts: RowParts) -> str:
    """"GEAR" on the paper's base retriever with SyncGE (§5), else "GEAR + <base>" ("GEAR + GRIEVER", GRIEVER Table 4);
    an ablation or variant says what differs from the paper's GEAR (another expansion, then ``parts.notes`` of
    BEAM_SETTINGS and GEAR_SETTINGS): "GEAR (NaiveGE)", "GEAR (no expansion)", "GEAR (beam length 4)",
    "GEAR (2 rounds)"."""
    label = f"GEAR + {parts.base}" if parts.paper_label or parts.retriever != PAPER_BASE else "GEAR"
    differs = []
    if config.get("expansion") and parts.expansion != PAPER_EXPANSION:  # (a config naming no expansion: the default)
        differs.append(parts.expansion or "no expansion")
    return with_notes(label, [*differs, *parts.notes])


def summary_row(predictions: list[dict]) -> dict[str, Any] | None:
    """One GEAR run: questions, mean rounds, stops by reason, reasoner/rewriter/gist calls and unparsed replies
    (§5; the trace's ``counters``). None without GEAR records."""
    preds = [p for p in predictions if isinstance(p.get("trace"), dict) and p["trace"].get("agent")]
    if not preds:
        return None
    counters: Counter[str] = Counter()
    stops: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for p in preds:
        counters.update({k: v for k, v in p["trace"].get("counters", {}).items() if isinstance(v, int)})
        stops[p["trace"].get("stop", "?")] += 1
        for r in p.get("rounds", []):
            calls["reason"] += r.get("reason") is not None
            calls["rewrite"] += r.get("rewrite") is not None
            calls["gist"] += bool((r.get("gist_read") or {}).get("prompt"))
    return {
        "n_questions": len(preds), "rounds_mean": round(mean(len(p.get("rounds", [])) for p in preds), 3),
        "stop_answerable": stops.get("answerable", 0), "stop_max_rounds": stops.get("max_rounds", 0),
        "reason_calls": calls["reason"], "reason_unparsed": counters.get("reason_unparsed", 0),
        "rewrite_calls": calls["rewrite"], "rewrite_fallback": counters.get("rewrite_fallback", 0),
        "rewrite_repeated": counters.get("rewrite_repeated", 0),
        "rewrite_not_question": counters.get("rewrite_not_question", 0),
        "gist_calls": calls["gist"], "gist_parse_failed": counters.get("gist_parse_failed", 0),
        "read_parse_failed": counters.get("expansion.parse_failed", 0),
        "no_proximal_triples": counters.get("expansion.no_proximal_triples", 0),
        "memory_duplicates": counters.get("memory_duplicates", 0),
    }


def trace_lines(pred: dict, plist: Any, recall_line: Any) -> list[str] | None:
    """The Table 6 walk-through of a GEAR record: per round the query, base retrieval, reader triples, tripleLink,
    expansion, gist memory, reasoner and rewriter (§5), then the result. None for a record without GEAR rounds."""
    rounds = pred.get("rounds") or []
    if not rounds or "fused" not in rounds[0]:
        return None
    lines: list[str] = []
    for r in rounds:
        n = r.get("round")
        lines += [f"\n== Round {n} ==", f"1. Query q({n}): {r.get('query')}",
                  f"2. Base retrieval: {plist(r.get('base', []))}",
                  "3. Reader -> proximal triples:", format_triple_list(r.get("proximal", []))]
        linked = [x.get("triple_text") or "(no link)" for x in r.get("linked", [])]
        lines += ["   tripleLink -> " + ("; ".join(linked[:8]) if linked else "(none)"),
                  f"4. Graph expansion: {len(r.get('expanded', []))} passages; C_q({n}): {plist(r.get('fused', []), 5)}",
                  f"5. Gist memory G({n}) (+{len(r.get('gist_new', []))} new):", format_triple_list(r.get("memory", []))]
        rs = r.get("reason")
        if rs is None:
            lines.append("6. Reasoner: (not called)")
        else:
            flag = "" if rs.get("parsed", True) else "  [reply did not parse; raw kept]"
            lines.append(f"6. Reasoner: answerable={rs.get('answerable')}  {rs.get('reason', '')!s}{flag}")
        rw = r.get("rewrite")
        if rw is not None:
            flag = "  [did not parse: fell back to q]" if rw.get("fallback") else ""
            lines.append(f"7. Rewriter -> next query: {rw.get('query')}{flag}")
        lines.append(f"   ranking had GEAR stopped here: {recall_line(r.get('ranking', []))}")
    return lines + result_lines(pred, plist, recall_line)


AGENT_HOOKS = ReportHooks(names=("gear",), label=agent_label, stages=STAGES, figure4_stages=STAGES, rounds_table=True,
                          paper_settings=GEAR_SETTINGS,
                          summaries=(("agent_stats", "GEAR loop statistics", summary_row),), trace_lines=trace_lines,
                          question_detail=agent_detail,
                          reply_failures=("gist_parse_failed", "reason_unparsed", "rewrite_fallback",
                                          "rewrite_not_question", "expansion.parse_failed"))
NO_EXPANSION_HOOKS = ReportHooks(names=("none",))
NAIVE_HOOKS = ReportHooks(names=("naive",), expansion_label="NaiveGE", question_detail=expansion_detail,
                          paper_settings=(*BEAM_SETTINGS, *EXPANSION_SETTINGS))
SYNC_HOOKS = ReportHooks(names=("sync",), expansion_label="SyncGE", figure2_reference=True,
                         paper_settings=(*BEAM_SETTINGS, *EXPANSION_SETTINGS, *SYNC_SETTINGS),
                         question_detail=expansion_detail, reply_failures=("parse_failed",))
