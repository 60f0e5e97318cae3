"""Base classes of a user's own component: subclass one, name it by ``_target_`` in a config (or pass an object to
:meth:`gear_repro.api.Pipeline.from_config`), and the wiring (:mod:`gear_repro.pipeline.wiring`) finds it by this
base class and builds it like the harness's own: the config node's settings as keyword arguments, and every
dependency its constructor names (:data:`DEPENDENCIES`) handed over as an object.

The contracts are the harness's own (:class:`gear_repro.retrieval.base.Retriever`,
:class:`gear_repro.methods.base.Method`, :class:`gear_repro.methods.base.Expansion`); these classes only give their
defaults, so a subclass writes ``run`` / ``retrieve`` / ``expand`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Any

from gear_repro.methods.base import ExpansionOutput, MethodOutput
from gear_repro.types import Question, Ranking, check_k
from gear_repro.utils.errors import ComponentError, DataError

__all__ = ["DEPENDENCIES", "BaseExpansion", "BaseMethod", "BaseRetriever", "CheckedRetriever", "check_ranking"]

# constructor argument name -> what the wiring hands over (pipeline/wiring.py:_dependency)
DEPENDENCIES: Mapping[str, str] = {
    "collection": "the collection a retriever searches (passages C, or triples T for a triple retriever)",
    "retriever": "the run's passage retriever (`retriever` group)",
    "triple_retriever": "the run's triple retriever",
    "expansion": "the run's graph expansion (`expansion` group)",
    "llm": "the run's LLM client (`llm` group)",
    "embedder": "the run's embedder (`embedder` group)",
    "backend": "the index engine (`backend` group)",
    "passages": "the corpus: list[Passage]",
    "triples": "the triples: list[Triple] (None without triples)",
    "passage_by_id": "{passage id: Passage}",
    "passage_collection": "the indexed passages (a Collection)",
    "triple_collection": "the indexed triples (a Collection)",
    "triple_index": "the triple graph (core/triple_graph.py)",
    "question_ids": "the run's question ids, in order",
    "hipporag": "the run's HippoRAG retriever (`hipporag` group; a Searcher)",
    "beam": "the `beam` group's settings (GEAR's triple beam search, Alg. 1)",
}


class BaseRetriever:
    """h_base^k over one collection: write :meth:`retrieve` (best first). ``needs_vectors = True`` when it searches
    embeddings (the collection then holds them); ``k_dependent = True`` when its top k is not the top k of a
    longer list."""

    name = "custom"
    k_dependent = False
    needs_vectors = False

    def retrieve(self, query: str, k: int) -> Ranking:
        raise NotImplementedError(f"{type(self).__name__}.retrieve")

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        k = check_k(k)
        return [self.retrieve(q, k) for q in queries]


class BaseExpansion:
    """Graph expansion of a base list: write :meth:`expand` (return ``ExpansionOutput(ranking, trace)``)."""

    name = "custom"
    k_dependent = False
    needs_llm = False
    needs_vectors = False

    def expand(self, query: str, base: Ranking, *, read_query: str | None = None,
               memory: Sequence[Sequence[str]] = ()) -> ExpansionOutput:
        raise NotImplementedError(f"{type(self).__name__}.expand")

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """No prompt to check against ``llm.context_window``."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "class": f"{type(self).__module__}.{type(self).__qualname__}"}


class BaseMethod:
    """A retrieval method: write :meth:`run` (return ``MethodOutput(ranking, rounds, trace)``). Set
    ``needs_llm = True`` when a question calls the LLM (its credentials are checked at start-up),
    ``answers_questions = True`` when outputs carry their own answer (scored as EM/F1)."""

    name = "custom"
    k_dependent = False
    needs_llm = False
    needs_vectors = False
    answers_questions = False
    max_rounds: int | None = None

    def run(self, question: Question, k: int) -> MethodOutput:
        raise NotImplementedError(f"{type(self).__name__}.run")

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """No prompt to check against ``llm.context_window``."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "class": f"{type(self).__module__}.{type(self).__qualname__}"}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {}


def _class_name(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def check_ranking(ranking: Ranking, known: Container[str], owner: object, what: str) -> Ranking:
    """``ranking`` when each of its ids is a string of ``known`` (the ids of the ``what`` ranked: "passages",
    "triples"). An id of another type (``6`` for the corpus's ``"6"``) is a ComponentError naming ``owner``'s class
    (the run stops: every question would miss the same way, scored R@k 0.0); a string id not in ``known`` a
    DataError naming it (the question fails: it is not counted as a miss, which would hide another corpus or id
    format)."""
    bad = next((i for i in ranking.ids if not isinstance(i, str) or i not in known), None)
    if bad is None:
        return ranking
    if not isinstance(bad, str):
        same = f" ('{bad}' is the id of one of its {what})" if str(bad) in known else ""
        raise ComponentError(f"{_class_name(owner)} ranked the id {bad!r} of type {type(bad).__name__}{same}: ids "
                             f"are the strings of the {what} it ranks; return str ids as the corpus has them")
    unknown = sum(1 for i in ranking.ids if i not in known)
    raise DataError(f"{_class_name(owner)} ranked {unknown} id(s) that are none of the run's {what} (first: {bad!r}): "
                    "another corpus or id format? (the question fails rather than counting them as misses)")


class CheckedRetriever:
    """A retriever of the user's whose rankings are checked against the ids of what it ranks (:func:`check_ranking`);
    everything else is the wrapped retriever's (``inner``: its attributes, and its class for ``isinstance``, so a
    method of the user's sees its own retriever)."""

    def __init__(self, inner: Any, known: Container[str], what: str) -> None:
        self.inner, self.known, self.what = inner, known, what

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self.inner)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def k_dependent(self) -> bool:
        return self.inner.k_dependent

    @property
    def needs_vectors(self) -> bool:
        return self.inner.needs_vectors

    def retrieve(self, query: str, k: int) -> Ranking:
        return check_ranking(self.inner.retrieve(query, k), self.known, self.inner, self.what)

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        return [check_ranking(r, self.known, self.inner, self.what) for r in self.inner.retrieve_many(queries, k)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
