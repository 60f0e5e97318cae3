"""How the report shows GRIEVER (seed 001) as a base retriever: its row label."""

from __future__ import annotations

from gear_repro.methods.report_contract import BM25_SETTINGS, ReportHooks

PAPER_NAMES = {"griever": "GRIEVER", "griever_k5": "GRIEVER"}  # config names whose runs are the paper's GRIEVER rows


def retriever_label(name: str) -> str:
    """"GRIEVER" for the paper's configurations; an ablation keeps its config name unless report.labels names it."""
    return PAPER_NAMES.get(name, name)


# GRIEVER ranks passages and units with the backend's BM25 (store.py, elasticsearch.py): its settings are those of
# the BM25 of the paper's rows, as for the base retrievers (methods/single.py BASE_RETRIEVER_HOOKS)
HOOKS = ReportHooks(names=tuple(PAPER_NAMES), label=retriever_label, paper_settings=BM25_SETTINGS)
