"""HippoRAG as a single-step method (GEAR Table 2 "HippoRAG", Table 3, Table 7): one retrieval with the
question (query NER -> node linking -> PPR; gear_repro/methods/hipporag/retriever.py).

The PPR ranking does not depend on k, so the method runs once per question (``k_dependent = False``) and
returns the top ``depth`` passages; R@5/10/15 read prefixes of that list. Its NER call is recorded as stage
``ner``, round 1 (Fig. 4 draws single-step methods at n = 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gear_repro.llm.ledger import tags
from gear_repro.methods.base import MethodOutput, Searcher
from gear_repro.types import Question
from gear_repro.utils.settings import Settings, num


@dataclass
class HippoRAGMethodSettings(Settings):
    """``agent=hipporag`` (configs/agent/hipporag.yaml; HippoRAG as GEAR re-ran it, its settings in the ``hipporag``
    group): the schema, :class:`HippoRAGMethod`'s settings and describe()."""

    config_key: ClassVar[str] = "agent"

    _target_: str = "gear_repro.methods.hipporag.method.HippoRAGMethod"
    name: str = "hipporag"
    depth: int = num(100, ge=1)  # passages returned per question (R@k uses the top k)


class HippoRAGMethod:
    """Built by the wiring from configs/agent/hipporag.yaml with the run's HippoRAG retriever (``hipporag`` group).

    Args:
        hipporag: the HippoRAG retriever (:class:`gear_repro.methods.hipporag.retriever.HippoRAG`).
        settings, **given: :class:`HippoRAGMethodSettings` (an instance, or its fields as keywords).
    """

    k_dependent = False
    needs_vectors = False  # collection vectors are the hipporag group's concern (HippoRAG.needs_vectors)
    needs_llm = True  # the query NER (v1); start-up checks the credentials
    answers_questions = False
    max_rounds = None

    def __init__(self, hipporag: Searcher, settings: HippoRAGMethodSettings | None = None, **given: Any):
        self.settings = HippoRAGMethodSettings.of(settings, "HippoRAGMethod", **given)
        self.name = self.settings.name
        self.hipporag = hipporag
        self.depth = self.settings.depth

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: the NER prompt holds no passages."""
        return None

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (the graph's own figures are recorded by the runner from ``hipporag``)."""
        return self.settings.asdict()

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """No run statistics beyond metrics.json's."""
        return {}

    def run(self, question: Question, k: int) -> MethodOutput:
        with tags(round=1):  # HippoRAG's one retrieval is its first (and only) round
            res = self.hipporag.search(question.question, max(k, self.depth))
        return MethodOutput(ranking=res.ranking, trace=res.trace)
