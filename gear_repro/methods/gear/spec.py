"""GEAR's declarations (gear_repro/registry.py): the agent (§5), the graph expansions (§4) and the beam search's
settings (Alg. 1), by path: reading them imports none of GEAR's code."""

from __future__ import annotations

from typing import Any

from gear_repro.utils.component import Component, PlannedCall, PromptSample

_HERE = "gear_repro.methods.gear"


def gear_plan(cfg: Any) -> list[PlannedCall]:
    """A question's calls at most (every round to ``agent.max_rounds``; the agent stops earlier when its reasoner
    says the facts suffice): SyncGE's reads of the base passages, the gist-memory reads, the reasoner, and the
    rewriter between rounds."""
    agent = cfg.agent  # a composed config: every setting present, its default from GearAgentSettings
    rounds, base_k, gist_k = int(agent.max_rounds), int(agent.base_k), agent.gist_k
    reads = rounds if str(cfg.expansion.name) == "sync" else 0

    def read(s: PromptSample) -> dict[str, Any]:
        return {"docs": s.passages, "query": s.question}

    def read_gist(s: PromptSample) -> dict[str, Any]:
        return {"docs": s.passages, "query": s.question, "triples": s.triples}

    def reason(s: PromptSample) -> dict[str, Any]:
        return {"query": s.question, "triples": s.triples}

    def rewrite(s: PromptSample) -> dict[str, Any]:
        return {"query": s.question, "triples": s.triples, "reason": "The facts do not say."}

    return [PlannedCall("reader", reads, base_k, read), PlannedCall("reader_gist", rounds, int(gist_k or 2 * base_k),
                                                                    read_gist),
            PlannedCall("reason", rounds, 0, reason), PlannedCall("rewrite", rounds - 1, 0, rewrite)]


def sync_plan(cfg: Any) -> list[PlannedCall]:
    """SyncGE's K.2 reads in a single-step run (GEAR's agent counts its own, :func:`gear_plan`): one read of the base
    passages a pass, a pass per k of ``run.ks`` with ``run.matched_k`` (the base k matched to the evaluated rank),
    else one at ``run.fixed_k`` (null: the largest k)."""
    ks = [int(k) for k in cfg.run.ks]
    passes = ks if cfg.run.matched_k else [int(cfg.run.fixed_k or max(ks))]
    return [PlannedCall("reader", 1, k, lambda s: {"docs": s.passages, "query": s.question}) for k in passes]


def check_beam(node: Any) -> None:
    """The beam's scorer and its options, at start-up (a misspelt scorer option fails before any question)."""
    from gear_repro.methods.gear.beam_search import BeamConfig
    from gear_repro.methods.gear.scorers import scorer_options

    beam = BeamConfig.from_any(node)
    scorer_options(beam.scorer, beam.scorer_options)


def _expansion(schema: str, cls: str, hooks: str, llm_plan: Any = None) -> Component:
    """An expansion: built with what its constructor names (the triple index, the embedder, the ``beam`` settings;
    SyncGE also the triple retriever, the LLM and the passages)."""
    return Component("expansion", schema, f"{_HERE}.expansion.{cls}Settings", f"{_HERE}.expansion.{cls}",
                     recursive=True, report=f"{_HERE}.report:{hooks}", llm_plan=llm_plan)


COMPONENTS = (
    Component("agent", "gear_schema", f"{_HERE}.agent.GearAgentSettings", f"{_HERE}.agent.GearAgent",
              report=f"{_HERE}.report:AGENT_HOOKS", llm_plan=gear_plan),
    _expansion("none_schema", "NoExpansion", "NO_EXPANSION_HOOKS"),
    _expansion("naive_schema", "NaiveGE", "NAIVE_HOOKS"),
    _expansion("sync_schema", "SyncGE", "SYNC_HOOKS", sync_plan),
    Component("beam", "beam_schema", f"{_HERE}.beam_search.BeamConfig", preflight=check_beam),
)
