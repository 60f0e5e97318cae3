"""T²RAG's declaration (gear_repro/registry.py), by path: reading it imports none of T²RAG's code."""

from __future__ import annotations

from typing import Any

from gear_repro.utils.component import Component, PlannedCall, PromptSample

_HERE = "gear_repro.methods.t2rag"


def t2rag_plan(cfg: Any) -> list[PlannedCall]:
    """A question's calls at most (Alg. 1, method.py ``run``): the decomposition (and the code's simple retry when it
    fails, ``agent.decompose_retry=simple``), one resolve per iteration to ``agent.max_iterations`` (each over
    ``agent.k`` passages with ``agent.with_passages``; propositions stand in as the sample's triples) and the answer
    (``agent.answer``)."""
    from omegaconf import OmegaConf

    from gear_repro.methods.t2rag.settings import PROMPTS

    def agent(key: str, default: Any) -> Any:
        value = OmegaConf.select(cfg, f"agent.{key}", default=default)
        return getattr(value, "value", value)

    code = agent("prompt_text", "code") == "code"
    decompose, resolve = PROMPTS["code" if code else "paper"]
    with_passages = bool(agent("with_passages", True))
    cut = int(agent("example_propositions_chars", 0) or 0)
    none = "" if code else "None"

    def query(s: PromptSample) -> dict[str, Any]:
        return {"query": s.question}

    def resolving(s: PromptSample) -> dict[str, Any]:
        props = "\n".join(f"- {' '.join(t)}" for t in s.triples) or none
        texts = "\n".join(f"- {p.content}" for p in s.passages) or none
        clues = "\n".join(f"Clue {i + 1}: {t[0]} | {t[1]} | ?" for i, t in enumerate(s.triples))
        sets = ({"traceable": clues, "fuzzy": "", "resolved_section": ""} if code
                else {"searchable": clues or none, "fuzzy": none, "resolved": none})
        return {"example_propositions": props[:cut] if cut else props, "query": s.question, "propositions": props,
                "passages_section": f"Context Passages:\n{texts}\n\n" if with_passages else "", **sets}

    def answering(s: PromptSample) -> dict[str, Any]:
        return {"query": s.question, "clues": "\n".join(f"Clue {i + 1}: {' | '.join(t)}" for i, t in enumerate(s.triples))}

    return [PlannedCall(decompose, 1, 0, query),
            PlannedCall("t2rag_decompose_simple", int(agent("decompose_retry", "none") == "simple"), 0, query),
            PlannedCall(resolve, int(agent("max_iterations", 3)), int(agent("k", 5)) if with_passages else 0,
                        resolving),
            PlannedCall("t2rag_answer", int(bool(agent("answer", True))), 0, answering)]


COMPONENTS = (
    Component("agent", "t2rag_schema", f"{_HERE}.settings.T2RAGAgentSettings", f"{_HERE}.method.T2RAGAgent",
              report=f"{_HERE}.report:HOOKS", llm_plan=t2rag_plan),
)
