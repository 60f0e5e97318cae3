"""T²RAG: triplet-driven thinking over a proposition index (seed 002, §4; Algorithms 1-2; App. E prompts).

Offline (§4.2): every triple t = (s, p, o) of T is a proposition "s p o" mapped to its passage. The harness's
triple collection already indexes exactly that, one document per triple id with its ``passage_id``
(:func:`gear_repro.core.triple_graph.triple_docs`), so every mapping is kept, also duplicate propositions
from different passages (they score alike and each brings its own passage; the prompt lists a text once).

Online (§4.3, Alg. 1):

1. Decompose (App. E "Structured Query Decomposition"): q -> triplets ``s | p | o`` with ``?`` placeholders,
   classified by their number of placeholders: resolved (0), searchable (1), fuzzy (>= 2).
2. For l = 1..N while searchable or fuzzy triplets remain:
   2.1 adaptive retrieval (Alg. 2): each searchable triplet's known parts form a query proposition; the
       candidates of all queries are pooled and ranked globally by their best cosine similarity, and
       propositions are taken in that order until ``k`` unique passages are reached;
   2.2 resolve (App. E "Triplets Resolving") with the searchable and fuzzy triplets, the retrieved passages
       and propositions and the resolved triplets -> "Fully Resolved" and "Newly Searchable" clues;
   2.3 update: resolved ∪= new resolved; searchable = new searchable; fuzzy = fuzzy \\ (the ones a new clue
       fills in). Stop when no searchable or fuzzy triplet is left.
3. Answer (App. E "Final Answering") from the resolved triplets, plus the remaining searchable ones when the
   loop ended at the iteration cap (§4.3 Step 3 (b)).

Where the paper and its public code (rockcor/T2RAG @ 72c43bd ``src/TRAG.py``, which produced the published
numbers) differ, ``configs/agent/t2rag.yaml`` (the default, DESIGN.md) sets the code's behaviour and
``configs/agent/t2rag_paper.yaml`` the prose's (``agent.reading`` names which preset); each behaviour is its own key:
``question_query`` (+ ``question_query_mode``; code 478-487: the lower-cased question without question words,
removed as substrings, is an extra query; paper Alg. 2: searchable triplets only), ``carry_fuzzy`` (code
738-740: the fuzzy set is emptied after every resolve call; paper Step 2.3: carried over),
``resolve_without_context`` (code 622-629: no resolve call when nothing was retrieved; paper Alg. 1: every
iteration), ``example_propositions_chars`` (code 666-668: the example's propositions cut to 1000 characters;
paper App. E: whole) and ``decompose_retry`` (code 375-383, 980-1032: a failed decomposition is retried once
with a simpler prompt, at most 3 triplets kept; paper: no retry) and ``on_no_triplets`` (code 385-396,
1429-1437: with no triplet after that the query fails, no documents and the answer "Error processing query";
paper: answered from no clues) and ``prompt_text`` (code 264-306, 632-725: the code's decomposition and resolve
texts, whose example fills the new clue's object in; paper App. E: "Searchable", the example's object "?") and
``decompose_parse`` (code 319-373: ``s | p | o`` lines after the ``Triples:`` line, three cells, bullets stripped
only when that finds nothing; paper: our lenient repairs) and ``query_placeholders`` (code 466-471, 532: a part
starting with '?' is left out of the query, the others kept verbatim, and candidates with a best similarity <= 0
are skipped; paper: every '?token' removed).
Ablations of Table 2: ``max_iterations=1``
("single round") and ``with_passages=false`` ("w/o chunk").

Our reading of Step 2.3's set difference (fuzzy \\ (new resolved ∪ new searchable)), ``fuzzy_match``:
``placeholder`` (default) first binds the named placeholders a reply clue fills in a searchable triplet
(``?directorA := Michael Curtiz``) and substitutes them into the fuzzy triplets; a new clue then fills a fuzzy
triplet when it has fewer '?', its '?' sit where the fuzzy one's do and the known subject/object agree (word
containment), the predicate compared (one shared content word) only when no entity is known, so a reworded
predicate ("born on" for "was born in") still matches. ``words`` (the earlier reading) needs every known part,
the predicate included, to agree. Each new clue is matched once. Reply clues are re-classified by their
placeholder count (counted as ``reclassified``). ``stall_stop``: the loop stops (``stop = "stalled"``) when
nothing is searchable, nothing was retrieved and the previous step added no clue, instead of calling the
resolver with no context up to N times.

Retrieval output (not evaluated by the paper, §5.2; needed to report Recall@k beside GEAR): each iteration's
passages in retrieval order; the method's ranking is their concatenation with repeated texts dropped, as the code
records a query's documents (``ranking: concat``, TRAG.py:1392-1398, the code preset), or the RRF of the iteration
lists (``ranking: rrf``, as GEAR fuses its rounds, Eq. 9; the paper preset). Each round record carries the
ranking had T²RAG stopped there (Figure-2-style per-iteration recall).

T²RAG answers by itself: :class:`~gear_repro.methods.base.MethodOutput` carries the answer and the runner
scores it with the same EM/F1 as the QA reader (``answer: false`` leaves answering to ``qa_reader``).
Malformed replies never raise: they are repaired where the intent is clear and counted in
``trace['t2rag']['counters']`` (and ``trace['counters']``: metrics.json ``agent_stats``, the run's warning).

The parts live beside this module: ``settings`` (the choices of each key), ``clues`` (the triplets), ``parse``
(the replies), ``state`` (Alg. 1's sets), ``retrieval`` (Alg. 2); this module is the agent.
"""


from __future__ import annotations

import logging
import textwrap
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gear_repro.backends.base import Collection
from gear_repro.core.fusion import rrf
from gear_repro.embedding.embedder import Embedder
from gear_repro.llm.base import LLM
from gear_repro.llm.ledger import tags
from gear_repro.methods.base import MethodAnswer, MethodOutput
from gear_repro.methods.t2rag.clues import Clue
from gear_repro.methods.t2rag.parse import (
    code_answer,
    parse_decomposition,
    parse_decomposition_code,
    parse_resolution,
    parse_resolution_code,
    parse_simple_decomposition,
)
from gear_repro.methods.t2rag.retrieval import Retrieved, adaptive_retrieve, question_query
from gear_repro.methods.t2rag.settings import (
    FAILED_ANSWER,
    NEW_CLUE_HEADERS,
    PROMPTS,
    T2RAGAgentSettings,
)
from gear_repro.methods.t2rag.state import TripletState
from gear_repro.prompts import render
from gear_repro.qa.reader import extract_answer
from gear_repro.retrieval.base import DenseRetriever
from gear_repro.types import Passage, Question, Ranking, Triple
from gear_repro.utils.settings import as_dict

log = logging.getLogger(__name__)

CODE_MARGIN = " " * 8  # the code's resolve prompt is an indented f-string (TRAG.py:666-725): its lines' margin
CODE_FUZZY_MARGIN = " " * 12  # and its fuzzy clue blocks' (643-648)


def t2rag_trace(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """T²RAG's trace of a prediction record (``trace['t2rag']``); None for another method's record or an error's."""
    trace = record.get("trace")
    return trace.get("t2rag") if isinstance(trace, dict) else None


def loop_counts(traces: Iterable[Mapping[str, Any]]) -> tuple[Counter[int], Counter[str]]:
    """Questions per number of resolve iterations and per stop reason, over T²RAG traces."""
    iterations: Counter[int] = Counter()
    stops: Counter[str] = Counter()
    for t in traces:
        iterations[t.get("iterations", 0)] += 1
        stops[t.get("stop", "?")] += 1
    return iterations, stops


def _code_blocks(clues: Sequence[Clue], label: str, margin: str) -> str:
    """Clue blocks as the code's resolve prompt concatenates them (TRAG.py:641-664): each block on new lines after a
    line break, its lines and the line after it indented by ``margin``."""
    return "".join(f"\n{textwrap.indent(c.block(f'{label} {i + 1}'), margin)}\n{margin}" for i, c in enumerate(clues))


# -- the method -----------------------------------------------------------------------------------------------
class T2RAGAgent:
    """T²RAG (§4.3, Alg. 1-2). Built by the runner from ``configs/agent/t2rag.yaml`` (settings: :class:`T2RAGAgentSettings`).

    Args:
        llm: the decompose / resolve / answer calls' client.
        embedder: query embeddings of the proposition search.
        triple_collection: the proposition index (the run's triple collection, dense search).
        triples: the dataset's triples (triple -> passage, triple -> text).
        passage_by_id: passage texts of the corpus (resolve context).
        settings, **given: :class:`~gear_repro.methods.t2rag.settings.T2RAGAgentSettings` (an instance, or its
            fields as keywords). What each reading key selects: ``code`` is rockcor/T2RAG (behind the published
            numbers), ``paper`` the prose; the choices' Enums (methods/t2rag/settings.py) cite both.
    """

    name = "t2rag"
    k_dependent = False

    needs_llm = True
    needs_vectors = True  # the proposition search is dense (§4.2)
    knn_collections = frozenset({"triples"})  # ... by a retriever of its own (the capacity check counts its index)

    def __init__(self, llm: LLM, embedder: Embedder, triple_collection: Collection, triples: Sequence[Triple],
                 passage_by_id: Mapping[str, Passage], settings: T2RAGAgentSettings | None = None, **given: Any):
        s = self.settings = T2RAGAgentSettings.of(settings, "T2RAGAgent", **given)
        self.name = s.name
        self.llm = llm
        self.embedder = embedder
        self.triple_collection = triple_collection
        self.triples = triples
        self.passage_by_id = passage_by_id
        self.k, self.max_iterations, self.candidate_depth = s.k, s.max_iterations, s.candidate_depth
        self.reading = s.reading.value
        self.with_passages = s.with_passages
        self.carry_fuzzy, self.question_query = bool(s.carry_fuzzy), bool(s.question_query)
        self.question_query_mode = s.question_query_mode.value
        self.resolve_without_context = bool(s.resolve_without_context)
        self.example_propositions_chars = s.example_propositions_chars
        self.decompose_retry = s.decompose_retry.value
        self.on_no_triplets = s.on_no_triplets.value
        self.prompt_text = s.prompt_text.value
        self.decompose_parse = s.decompose_parse.value
        self.query_placeholders = s.query_placeholders.value
        self.resolve_parse = s.resolve_parse.value
        self.resolved_update = s.resolved_update.value
        self.proposition_passage = s.proposition_passage.value
        self.fuzzy_match = s.fuzzy_match.value
        self.stall_stop = s.stall_stop
        self.answers_questions = s.answer  # the runner scores EM/F1 of this method's own answers
        self.answer_parse = s.answer_parse.value
        self.ranking, self.k_rrf = s.ranking.value, s.k_rrf
        self.llm_params = as_dict(s.llm_params)
        llm.check_params(self.llm_params, "agent.llm_params")  # a param the API lacks: one error now, not one per call
        self._maps: tuple[dict[str, str], dict[str, str]] | None = None
        self._retriever: DenseRetriever | None = None

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: not fitted (its prompts hold propositions, not passages)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (§5.2 / B.1 defaults, the preset's ``reading`` and its paper-vs-code switches)."""
        return self.settings.asdict()

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """For run.json after the questions: the iteration histogram ({iterations: questions}) and stop reasons of
        the run's finished records (all of a resumed run's, as the report's ``t2rag_stats``)."""
        iterations, stops = loop_counts(t for r in records if (t := t2rag_trace(r)) is not None)
        return {"iterations_hist": {str(n): c for n, c in sorted(iterations.items())}, "stops": dict(sorted(stops.items()))}

    @property
    def max_rounds(self) -> int:
        """Rounds of the per-round recall (the runner's ``recall@k_by_round``): the N iterations."""
        return self.max_iterations

    # -- the proposition index --------------------------------------------------------------------------------
    def _index(self) -> tuple[DenseRetriever, dict[str, str], dict[str, str]]:
        """The proposition index (§4.2): dense search over the triple collection, triple -> passage/text. With
        ``proposition_passage: code`` every triple of one text maps to the passage of the last such triple in the
        triples' order, as TRAG.py:196-210 keys ``proposition_to_passage`` by the text (a later passage overwrites)."""
        if self._retriever is None:
            triples = self.triples
            text_of = {t.id: t.text for t in triples}
            if self.proposition_passage == "code":
                last = {t.text: t.passage_id for t in triples}  # dict assignment: the last passage wins
                passage_of = {t.id: last[text_of[t.id]] for t in triples}
            else:
                passage_of = {t.id: t.passage_id for t in triples}
            self._maps = (passage_of, text_of)
            self._retriever = DenseRetriever(self.triple_collection, self.embedder)
        assert self._maps is not None
        return self._retriever, *self._maps

    def _chat(self, messages: list[dict], stage: str) -> str:
        return self.llm.chat(messages, stage=stage, **self.llm_params).text

    # -- prompts ----------------------------------------------------------------------------------------------
    def decompose_messages(self, question: str) -> list[dict]:
        """App. E "Structured Query Decomposition" (Step 1), or the code's text (TRAG.py:264-306)."""
        return render(PROMPTS[self.prompt_text][0], query=question)

    def resolve_messages(self, question: str, state: TripletState, retrieved: Retrieved) -> list[dict]:
        """App. E "Triplets Resolving" with the current sets and the retrieved context (Step 2.2); with
        ``prompt_text: code`` the code's text and layout (TRAG.py:632-725): "Traceable" clue blocks, the fuzzy ones
        indented as its f-string has them, empty lists left empty and the resolved clues' section (with its own
        header) only when some are resolved."""
        code = self.prompt_text == "code"
        none = "" if code else "None"
        by_id = self.passage_by_id
        props = "\n".join(f"- {p['text']}" for p in retrieved.propositions) or none
        cut = self.example_propositions_chars  # TRAG.py:668 `context_propositions[:1000]`; 0 = whole (App. E)
        example = props[:cut] if cut else props
        margin = CODE_MARGIN if code else ""
        section = ""
        if self.with_passages:
            texts = "\n".join(f"- {by_id[p].content}" for p in retrieved.passages.ids if p in by_id) or none
            section = f"Context Passages:\n{margin}{texts}\n\n{margin}"
        resolved = "\n".join(f"- {c.pipe()}" for c in state.resolved)
        if code:
            clues = {"traceable": _code_blocks(state.searchable, "Traceable Clue", ""),
                     "fuzzy": _code_blocks(state.fuzzy, "Fuzzy Clue", CODE_FUZZY_MARGIN),
                     "resolved_section": render("t2rag_resolve_code_resolved", resolved=resolved)[0]["content"]
                     if resolved else ""}
        else:
            clues = {"searchable": "\n".join(c.block(f"Searchable Clue {i + 1}") for i, c in enumerate(state.searchable))
                     or none, "fuzzy": "\n".join(c.block(f"Fuzzy Clue {i + 1}") for i, c in enumerate(state.fuzzy))
                     or none, "resolved": resolved or none}
        return render(PROMPTS[self.prompt_text][1], example_propositions=example, query=question,
                      passages_section=section, propositions=props, **clues)

    def answer_messages(self, question: str, clues: Sequence[Clue]) -> list[dict]:
        """App. E "Final Answering" (Step 3; the code's text is the same, TRAG.py:1091-1109); clues as
        "Clue n: s | p | o" lines (the code's layout), "None" for no clue (``prompt_text: code``: empty, 1085-1088)."""
        lines = "\n".join(f"Clue {i + 1}: {c.pipe()}" for i, c in enumerate(clues))
        return render("t2rag_answer", query=question, clues=lines or ("" if self.prompt_text == "code" else "None"))

    # -- Alg. 1 -----------------------------------------------------------------------------------------------
    def run(self, question: Question, k: int | None = None) -> MethodOutput:
        """Answer ``question`` (Alg. 1). ``k`` from the runner is ignored: T²RAG retrieves ``self.k`` unique
        passages per iteration (its ranking holds up to k × iterations passages)."""
        t0 = time.perf_counter()
        q = question.question
        counters: dict[str, int] = {}

        def bump(key: str, n: int = 1) -> None:
            if n:
                counters[key] = counters.get(key, 0) + n

        raw = self._chat(self.decompose_messages(q), "decompose")
        dec = parse_decomposition_code(raw) if self.decompose_parse == "code" else parse_decomposition(raw)
        bump(f"decompose_{dec.status}")
        retry_raw = None
        if dec.status == "failed" and self.decompose_retry == "simple":  # TRAG.py:375-383
            retry_raw = self._chat(render("t2rag_decompose_simple", query=q), "decompose_retry")
            dec = parse_simple_decomposition(retry_raw)
            bump(f"decompose_retry_{'ok' if dec.clues else 'failed'}")
        state = TripletState.from_clues(dec.clues)
        trace: dict[str, Any] = {"decomposition": {"raw": raw, "status": dec.status, "state": state.to_dict(),
                                                   **({"retry_raw": retry_raw} if retry_raw is not None else {})}}
        rounds: list[dict[str, Any]] = []
        lists: list[Ranking] = []
        retriever, passage_of, text_of = self._index()
        iteration = 0
        progress, stalled = bool(dec.clues), False
        while state.open and iteration < self.max_iterations:
            queries = [c.query_for(self.query_placeholders) for c in state.searchable]
            if self.question_query:  # TRAG.py:478-487
                queries.append(question_query(q, self.question_query_mode))
            got = adaptive_retrieve(retriever, passage_of, text_of, queries, self.k, self.candidate_depth,
                                    positive_only=self.query_placeholders == "code")
            if self.stall_stop and not state.searchable and not got.passages.ids and not progress:
                stalled = True  # nothing to search, nothing retrieved, nothing new since the last resolve
                break
            iteration += 1
            lists.append(got.passages)
            rec: dict[str, Any] = {"round": iteration, "queries": queries, "passages": got.passages.ids,
                                   "propositions": got.propositions, "input": state.to_dict()}
            if got.propositions or self.resolve_without_context:
                with tags(round=iteration):  # decomposition and answer are round 0, the resolves 1..N
                    reply = self._chat(self.resolve_messages(q, state, got), "resolve")
                res = (parse_resolution_code(reply, NEW_CLUE_HEADERS[self.prompt_text])
                       if self.resolve_parse == "code" else parse_resolution(reply))
                bump(f"resolve_{res.status}")
                rec.update(reply=reply, status=res.status, new_resolved=[list(c.parts) for c in res.clues],
                           new_searchable=[list(c.parts) for c in res.searchable])
                for key, n in state.update(res.clues, res.searchable, self.carry_fuzzy, self.fuzzy_match,
                                           self.resolved_update).items():
                    bump(key, n)
                progress = bool(res.clues or res.searchable)
            else:  # TRAG.py:622-629: no call, the clues stay as they were
                bump("resolve_skipped")
                rec.update(reply=None, status="skipped", new_resolved=[], new_searchable=[])
                progress = False
            rec["state"] = state.to_dict()
            rec["ranking"] = self._fuse(lists).ids
            rounds.append(rec)
        stop = ("no_triplets" if not dec.clues else "stalled" if stalled else
                "all_resolved" if not state.open else "max_iterations")
        trace.update(stop=stop, iterations=iteration, counters=counters, final_state=state.to_dict())
        answer = None
        if self.answers_questions and not dec.clues and self.on_no_triplets == "fail":
            bump("query_failed")  # TRAG.py:1429-1437: the reference records this answer and no documents
            answer = MethodAnswer(text=FAILED_ANSWER, raw="")
        elif self.answers_questions:
            context = state.answer_context()
            reply = self._chat(self.answer_messages(q, context), "answer")
            text = code_answer(reply) if self.answer_parse == "code" else extract_answer(reply)
            answer = MethodAnswer(text=text, raw=reply)
            trace["answer_context"] = [list(c.parts) for c in context]
        trace["timings"] = {"total_s": round(time.perf_counter() - t0, 6)}
        # the counters also where metrics.json's agent_stats and the run's warning read them (report hooks)
        return MethodOutput(ranking=self._fuse(lists), rounds=rounds, trace={"t2rag": trace, "counters": counters},
                            answer=answer)

    def _fuse(self, lists: Sequence[Ranking]) -> Ranking:
        """The method's ranking of the iteration lists so far (``ranking``): ``concat`` as TRAG.py:1392-1398 builds the
        documents of a query, every iteration's passages in order, one whose text is already listed dropped (a
        corpus may hold one text under two ids: the first listed stays); ``rrf`` their RRF."""
        if self.ranking == "concat":
            by_id = self.passage_by_id
            seen: set[str] = set()
            ids = []
            for pid in (p for lst in lists for p in lst.ids):
                text = by_id[pid].content if pid in by_id else pid
                if text not in seen:
                    seen.add(text)
                    ids.append(pid)
            return Ranking(ids, [float(len(ids) - i) for i in range(len(ids))])
        return rrf(list(lists), k_rrf=self.k_rrf) if lists else Ranking()



__all__ = ["T2RAGAgent", "loop_counts", "t2rag_trace"]
