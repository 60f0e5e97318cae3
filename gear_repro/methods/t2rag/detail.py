"""How the HTML explorer shows one T²RAG record (``gear-repro-report --html``; docs/explorer.md): the question's
decomposition into triplets, then per iteration the queries, retrieved propositions and passages, the resolve reply
and the triplet sets (resolved / searchable / fuzzy) after the update (seed 002, Alg. 1), then the answer context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gear_repro.methods.report_contract import (
    detail_table,
    passages_cell,
    recall_text,
    text_cell,
    triples_cell,
)

SETS = ("resolved", "searchable", "fuzzy")


def _sets(state: Mapping[str, Any]) -> list[Any]:
    """The three triplet sets of a state, stacked: "resolved (2)" then its triplets, and so on."""
    out: list[Any] = []
    for name in SETS:
        items = state.get(name, []) or []
        out += [f"{name} ({len(items)})", triples_cell(items)]
    return out


def question_detail(record: Mapping[str, Any]) -> list[dict] | None:
    """A T²RAG record; None for a record without T²RAG's trace."""
    t2 = (record.get("trace") or {}).get("t2rag") if isinstance(record.get("trace"), dict) else None
    if not isinstance(t2, dict):
        return None
    gold = record.get("gold_ids") or []
    dec = t2.get("decomposition") or {}
    blocks = [detail_table("T²RAG decomposition", ["status", "reply", "triplet sets"],
                           [[dec.get("status"), text_cell(dec.get("raw")), _sets(dec.get("state") or {})]])]
    rows = []
    for r in record.get("rounds") or []:
        props = [f"{p.get('text')} [{p.get('score')}] ← {', '.join(p.get('passage_ids', []))}"
                 for p in r.get("propositions", [])]
        rows.append([r.get("round"), "\n".join(map(str, r.get("queries", []))), "\n".join(props) or "(none)",
                     passages_cell(r.get("passages", [])), [str(r.get("status")), text_cell(r.get("reply"))],
                     triples_cell(r.get("new_resolved", []) or []), triples_cell(r.get("new_searchable", []) or []),
                     _sets(r.get("state") or {}), recall_text(r.get("ranking", []), gold)])
    blocks.append(detail_table(
        "T²RAG iterations: triplet states", ["n", "queries", "propositions [score] ← passages", "passages",
                                              "resolve reply", "newly resolved", "newly searchable",
                                              "sets after the update", "recall had it stopped here"], rows,
        note=f"stop: {t2.get('stop')}; iterations: {t2.get('iterations')}; counters: {t2.get('counters')}"))
    blocks.append(detail_table("T²RAG answer context", ["triplets given to the answer step"],
                               [[triples_cell(t2.get("answer_context", []) or [])]]))
    return blocks
