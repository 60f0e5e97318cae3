"""How the report shows GEAR (seed 000): its row labels, LLM stages, Table 9 and Fig. 2 roles
(registered in :func:`gear_repro.methods.report_hooks`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gear_repro.methods.base import ReportHooks, RowParts, class_path
from gear_repro.methods.gear.agent import GearAgent
from gear_repro.methods.gear.detail import agent_detail, expansion_detail
from gear_repro.methods.gear.expansion import NaiveGE, NoExpansion, SyncGE

PAPER_BASE = "hybrid"  # the base retriever of GEAR's own paper rows; any other base is named in the label
STAGES = ("read", "gist", "reason", "rewrite")  # the K.2 reader, gist memory, reasoner, rewriter (§5)


def agent_label(node: Mapping[str, Any], parts: RowParts) -> str:
    """"GEAR" on the paper's base retriever, else "GEAR + <base>" ("GEAR + GRIEVER", GRIEVER Table 4)."""
    if parts.paper_label or parts.retriever != PAPER_BASE:
        return f"GEAR + {parts.base}"
    return "GEAR"


HOOKS = (
    ReportHooks(targets=(class_path(GearAgent), "gear_repro.methods.gear.agent.GearAgent"), names=("gear",),
                label=agent_label, stages=STAGES, figure4_stages=STAGES, rounds_table=True,
                question_detail=agent_detail),
    ReportHooks(targets=(class_path(NoExpansion), "gear_repro.methods.gear.expansion.NoExpansion"), names=("none",)),
    ReportHooks(targets=(class_path(NaiveGE), "gear_repro.methods.gear.expansion.NaiveGE"), names=("naive",),
                expansion_label="NaiveGE", question_detail=expansion_detail),
    ReportHooks(targets=(class_path(SyncGE), "gear_repro.methods.gear.expansion.SyncGE"), names=("sync",),
                expansion_label="SyncGE", figure2_reference=True,
                question_detail=expansion_detail),
)
