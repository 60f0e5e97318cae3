"""GRIEVER's declaration (gear_repro/registry.py): a base retriever (``retriever=griever``), built with the
collection it ranks, the embedder, the dataset's passages and triples and the backend (by constructor argument
name); by path: reading it imports none of GRIEVER's code."""

from __future__ import annotations

from gear_repro.utils.component import Component

_HERE = "gear_repro.methods.griever"

COMPONENTS = (
    Component("retriever", "griever_schema", f"{_HERE}.retriever.GrieverRetrieverSettings",
              f"{_HERE}.GrieverRetriever", aliases=(f"{_HERE}.retriever.GrieverRetriever",), recursive=True,
              report=f"{_HERE}.report:HOOKS"),
)
