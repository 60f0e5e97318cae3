"""How the report shows HippoRAG (GEAR Tables 2-3): its row label and its LLM stage (query NER)."""

from __future__ import annotations

from gear_repro.methods.base import ReportHooks, class_path
from gear_repro.methods.hipporag.detail import question_detail
from gear_repro.methods.hipporag.method import HippoRAGMethod

HOOKS = (
    ReportHooks(targets=(class_path(HippoRAGMethod), "gear_repro.methods.hipporag.method.HippoRAGMethod"), names=("hipporag",),
                label=lambda node, parts: "HippoRAG", stages=("ner",), figure4_stages=("ner",),
                question_detail=question_detail),
)
