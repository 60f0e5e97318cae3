"""How the HTML explorer shows one HippoRAG record (``gear-repro-report --html``; docs/explorer.md): the query's
named entities, each linked to its phrase node with the cosine (v1), or the top facts and seed phrases (v2), the
fallback when no entity was found, and the NER reply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gear_repro.methods.report_contract import detail_table, text_cell


def search_detail(trace: Mapping[str, Any], title: str = "HippoRAG") -> list[dict] | None:
    """One HippoRAG search (its retriever's trace): linking and PPR inputs; None for another shape of trace."""
    if not isinstance(trace, Mapping) or not ({"entities", "seeds"} & set(trace)):
        return None
    blocks = []
    if "entities" in trace:
        linked = {str(e): (phrase, sim) for e, phrase, sim in trace.get("linked", [])}
        rows = [[e, *linked.get(str(e), ("(not linked)", None))] for e in trace.get("entities", [])]
        blocks.append(detail_table(f"{title}: query entities linked to phrase nodes (v1)",
                                   ["query entity (NER)", "linked phrase node", "cosine"], rows or [["(none)", "", None]]))
    if "seeds" in trace:
        blocks.append(detail_table(f"{title}: seed phrases of the PPR (v2)", ["phrase", "reset weight"],
                                   [list(x) for x in trace.get("seeds", [])]))
        blocks.append(detail_table(f"{title}: top facts (v2)", ["triple", "score"], [list(x) for x in trace.get("facts", [])]))
    info = [["fallback (no entity linked)", trace.get("fallback") or "no"],
            ["timings (ms)", ", ".join(f"{k} {trace[k]}" for k in ("ner_ms", "link_ms", "ppr_ms", "total_ms") if k in trace)]]
    ner = trace.get("ner") or {}
    if ner:
        flag = " (did not parse)" if ner.get("failed") else (" (repaired)" if ner.get("repaired") else "")
        info.append([f"NER reply{flag}", text_cell(ner.get("reply"))])
    blocks.append(detail_table(f"{title}: search", ["", ""], info))
    return blocks


def question_detail(record: Mapping[str, Any]) -> list[dict] | None:
    """A HippoRAG (single-step) record: its one search."""
    trace = record.get("trace")
    return search_detail(trace) if isinstance(trace, Mapping) else None
