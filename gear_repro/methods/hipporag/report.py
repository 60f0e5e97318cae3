"""How the report shows HippoRAG (GEAR Tables 2-3): its row label, its LLM stage (query NER) and its query NER
statistics (``hipporag_stats``)."""

from __future__ import annotations

from typing import Any

from gear_repro.evaluation.aggregate import agent_stats
from gear_repro.methods.hipporag.detail import question_detail
from gear_repro.methods.report_contract import (
    HIPPORAG_SETTINGS,
    ReportHooks,
    hipporag_label,
    hipporag_uses_retriever,
    with_notes,
)

NER_COUNTERS = ("hipporag_searches", "hipporag_ner_failed", "hipporag_ner_repaired", "hipporag_no_entity")


def summary_row(predictions: list[dict]) -> dict[str, Any] | None:
    """One HippoRAG run: searches, query-NER replies that did not parse or were repaired, searches that fell back
    (no entity: ``hipporag.no_entity_fallback``), and the rates. None without HippoRAG searches."""
    stats = agent_stats(predictions)
    if not stats.get("hipporag_searches"):
        return None
    return {**{k: stats.get(k, 0) for k in NER_COUNTERS},
            "ner_failed_rate": round(stats["hipporag_ner_failed_rate"], 4),
            "no_entity_rate": round(stats["hipporag_no_entity_rate"], 4)}


HOOKS = ReportHooks(names=("hipporag",), label=lambda config, parts: with_notes(hipporag_label(config), parts.notes),
                    stages=("ner",), figure4_stages=("ner",), paper_settings=HIPPORAG_SETTINGS,
                    uses_retriever=hipporag_uses_retriever,
                    summaries=(("hipporag_stats", "HippoRAG query NER", summary_row),), question_detail=question_detail,
                    reply_failures=("hipporag_ner_failed",))
