"""HippoRAG as a single-step method (GEAR Table 2 "HippoRAG", Table 3, Table 7): one retrieval with the
question (query NER -> node linking -> PPR; gear_repro/methods/hipporag/retriever.py).

The PPR ranking does not depend on k, so the method runs once per question (``k_dependent = False``) and
returns the top ``depth`` passages; R@5/10/15 read prefixes of that list. Its NER call is recorded as stage
``ner``, round 1 (Fig. 4 draws single-step methods at n = 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gear_repro.llm.ledger import tags
from gear_repro.methods.base import MethodOutput, Searcher
from gear_repro.types import Question


class HippoRAGMethod:
    """Built by the wiring from configs/agent/hipporag.yaml with the run's HippoRAG retriever (``hipporag`` group).

    Args:
        hipporag: the HippoRAG retriever (:class:`gear_repro.methods.hipporag.retriever.HippoRAG`).
        depth: passages returned per question (100; R@k uses the top k).
    """

    k_dependent = False
    needs_vectors = False  # collection vectors are the hipporag group's concern (HippoRAG.needs_vectors)
    needs_llm = True  # the query NER (v1); start-up checks the credentials
    answers_questions = False
    max_rounds = None

    def __init__(self, hipporag: Searcher, name: str = "hipporag", depth: int = 100):
        self.name = name
        self.hipporag = hipporag
        self.depth = int(depth)

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: the NER prompt holds no passages."""
        return None

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (the graph's own figures are recorded by the runner from ``hipporag``)."""
        return {"name": self.name, "depth": self.depth}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """No run statistics beyond metrics.json's."""
        return {}

    def run(self, question: Question, k: int) -> MethodOutput:
        with tags(round=1):  # HippoRAG's one retrieval is its first (and only) round
            res = self.hipporag.search(question.question, max(k, self.depth))
        return MethodOutput(ranking=res.ranking, trace=res.trace)
