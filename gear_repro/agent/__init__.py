"""Retrieval methods: single-step (base retriever + graph expansion) and the GEAR agent (§5)."""

from gear_repro.agent.base import MethodOutput

__all__ = ["MethodOutput"]
