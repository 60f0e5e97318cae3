"""The GEAR agent (§5, App. B.2): SyncGE per round, gist memory, reasoning for termination, query re-writing,
passageLink and the final RRF (DESIGN.md "GEAR agent").

Per round n (q(1) = q):

1. base retrieval C'_q(n) = h_base^k(q(n), C), k = ``base_k`` (10, App. B.2);
2. graph expansion of C'_q(n) (the run's ``expansion`` group, SyncGE by default): read (K.2 reader with the
   original q; in rounds >= 2 with the gist memory G(n-1), ``reader_memory``) -> proximal triples ->
   tripleLink -> diverse triple beam search scored against the original q (``query_for_beam``) ->
   C_q(n) = RRF(C'_q(n), C~_q(n)). The agent calls :meth:`SyncGE.expand` itself, so single-step SyncGE
   and GEAR share one implementation of read / tripleLink / beam search;
3. gist read (Eq. 4) of the expanded passages C~_q(n) (``gist_docs``; all, or the top ``gist_k``) with the original q and
   the memory G(n-1) (K.2 reader with the gist-memory parts; the plain reader while G is empty) -> TG_q(n);
   G(n) = G(n-1) ∘ TG_q(n) (Eq. 5), repeats kept: the pseudocode's ``gist_memory.extend`` (gear.py:11; docs/readings.md
   "memory de-duplication"), so a triple already in G(n-1) is appended again and adds its passageLink list to the
   final RRF once more (counted ``memory_duplicates``; ``dedupe_memory=true`` drops it instead);
4. a(n), r(n) = reason(G(n), q) (Eq. 6) -> stop when answerable;
5. otherwise, if a round is left, q(n+1) = rewrite(q, G(n), r(n)) (Eq. 7).

After stopping: passageLink(t) = RRF(h_base^k(t, C), passages of h_base^k(t, T)) for every t in G(n)
(Eq. 8, Eq. 10) and the final list is RRF(passageLink lists..., C_q(1), ..., C_q(n)) (Eq. 9).

Every round record carries ``ranking``: the list GEAR would return had it stopped at that round (the same
Eq. 9 recipe over rounds 1..n and G(n)); :func:`gear_repro.evaluation.aggregate.round_recalls` reads it
for Figure 2. Replies of the reasoner that do not follow the format count as "not answerable" (raw reply
kept); a rewrite that does not parse falls back to the original question; both are counted in
``trace['counters']``. The loop runs at most ``max_rounds`` rounds.

The defaults of ``reader_memory``, ``query_for_beam`` and ``gist_docs`` follow the authors' pseudocode
(gear-rag.github.io, ``pseudocode_examples/gear.py``: ``reader(base_passages, query, gist_memory)`` from
step 2, ``graph_expasion(triples, query)``, ``gist_memory_constructor(expanded_passages)``); docs/agent.md
lists the readings and the switches that restore the earlier ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from omegaconf import MISSING

from gear_repro.core.fusion import RRF_K, rrf
from gear_repro.core.triple_graph import TripleIndex, normalize_entity
from gear_repro.core.triple_reader import read_triples
from gear_repro.llm.base import LLM
from gear_repro.llm.ledger import tags
from gear_repro.methods.base import Expansion, MethodOutput
from gear_repro.retrieval.base import Retriever
from gear_repro.types import Passage, Question, Ranking, Triple3, triple_text
from gear_repro.utils.settings import Choice, Settings, as_dict, num
from gear_repro.utils.trace import bump, count, counting, seconds

log = logging.getLogger(__name__)


class QueryChoice(Choice):
    """Which question a GEAR step uses (agent.query_for_base, query_for_beam, read_with)."""

    rewritten = "rewritten"  # q(n)
    original = "original"  # q


class GistDocs(Choice):
    """What the gist reader reads (agent.gist_docs)."""

    expanded = "expanded"  # C~_q(n) (pseudocode gist_memory_constructor(expanded_passages))
    fused = "fused"  # C_q(n)
    base = "base"  # C'_q(n)


class GistEmpty(Choice):
    """What the gist read reads when the expanded list C~_q(n) is empty (agent.gist_empty)."""

    skip = "skip"  # nothing: no gist call (the pseudocode reads the empty list, gear.py:52)
    fused = "fused"  # the top gist_k of C_q(n)


class GistFirstRound(Choice):
    """Round 1's gist memory (agent.gist_first_round)."""

    read = "read"  # a gist read, as in later rounds
    reuse = "reuse"  # SyncGE's proximal triples (one call less)


def triple_key(t: Sequence[str]) -> tuple[str, ...]:
    """De-duplication key of a proximal triple: each element normalised like an entity."""
    return tuple(normalize_entity(x) for x in t)


@dataclass
class RoundRecord:
    """One GEAR round n as written to predictions.jsonl ``rounds[n-1]`` (docs/agent.md; JSON keys and order
    unchanged from the earlier dict). ``ranking`` is the list GEAR returns had it stopped here (Figure 2)."""

    round: int  # n (JSON name kept)
    query: str  # q(n)
    base: list[str]  # C'_q(n)
    proximal: list[list[str]]  # reader triples T'_q(n)
    linked: list[dict[str, Any]]  # tripleLink results
    expanded: list[str]  # C~_q(n)
    fused: list[str]  # C_q(n) (Eq. 3)
    expansion: dict[str, Any]  # the expansion trace without the keys above and the beams
    beams: list[dict[str, Any]]
    gist_read: dict[str, Any]  # ids read, prompt, reply, parse info
    gist_new: list[list[str]]  # TG_q(n) as appended to G: its repeats too, unless dedupe_memory
    memory: list[list[str]]  # G(n)
    reason: dict[str, Any] | None  # Eq. 6 verdict (None: not called)
    rewrite: dict[str, Any] | None = None  # Eq. 7 (None: stopped)
    ranking: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GearAgentSettings(Settings):
    """``agent=gear`` (each field's default and meaning declared here; configs/agent/gear.yaml sets what GEAR's run
    takes from elsewhere): the group's Hydra schema, :class:`GearAgent`'s settings and its ``describe()``. §5 and App. B.2; the pseudocode readings are the
    authors' ``pseudocode_examples/gear.py`` (docs/agent.md)."""

    config_key: ClassVar[str] = "agent"

    _target_: str = "gear_repro.methods.gear.agent.GearAgent"
    name: str = "gear"
    base_k: int = num(10, ge=1)  # k of h_base^k(q(n), C) per round (App. B.2: 10, as IRCoT)
    max_rounds: int = num(MISSING, ge=1)  # rounds at most (YAML: ${dataset.max_rounds}: MuSiQue 4, 2Wiki/HotpotQA 2)
    query_for_base: QueryChoice = QueryChoice.rewritten  # q(n) (§5, the paper) | q
    # beam scoring query: original (q, the pseudocode's graph_expasion(triples, query)) | rewritten (q(n))
    query_for_beam: QueryChoice = QueryChoice.original
    # rounds >= 2: the SyncGE reader sees the gist memory G(n-1) (pseudocode reader(base, query, gist_memory));
    # false: a memory-less reader
    reader_memory: bool = True
    read_with: QueryChoice = QueryChoice.original  # question of the reader and gist reader (Eq. 1/4: q) | rewritten
    # list the gist reader reads: expanded (C~_q(n), pseudocode gist_memory_constructor(expanded_passages)) | fused
    # (C_q(n)) | base (C'_q(n))
    gist_docs: GistDocs = GistDocs.expanded
    # read (a gist read in round 1 too) | reuse (round-1 memory = SyncGE's proximal triples, Eq. 1 = Eq. 4; one call less)
    gist_first_round: GistFirstRound = GistFirstRound.read
    # passages of that list given to the gist reader: null = all (pseudocode gear.py:52 reads expanded_passages whole,
    # <= 20 with b=10, l=2) | its top gist_k
    gist_k: int | None = num(None, ge=1)
    # empty list: skip (no gist call; the pseudocode reads the empty list) | fused (the top gist_k, or base_k, of C_q(n))
    gist_empty: GistEmpty = GistEmpty.skip
    # false: keep a gist triple already in G, as Eq. 5's G(n-1) ∘ TG_q(n) and the pseudocode's gist_memory.extend
    # (gear.py:11): each repeat adds its passageLink list to the final RRF once more | true: drop it (casefold/
    # space-normalised (s, p, o)); either way counted as memory_duplicates
    dedupe_memory: bool = False
    reason_last_round: bool = True  # call the reasoner (Eq. 6) in the last allowed round too (verdict recorded)
    passage_link: bool = True  # passageLink of G(n) in the final RRF (Eq. 9); false = RRF of C_q(1..n)
    passage_link_k: int | None = num(None, ge=1)  # k of passageLink's two retrievals (Eq. 8/10; null = base_k)
    k_rrf: int = num(RRF_K, ge=0)  # RRF constant (DESIGN.md)
    output_depth: int | None = num(None, ge=1)  # final ranking cut (null = all; run.save_depth caps what is saved)
    round_ranking_depth: int | None = num(None, ge=1)  # ids of each round's ``ranking`` (YAML: ${run.save_depth})
    llm_params: dict[str, Any] = field(default_factory=dict)  # extra llm.chat kwargs of the gist/reason/rewrite calls


class GearAgent:
    """Multi-step GEAR (§5). Built by :func:`gear_repro.pipeline.wiring.build_method`.

    Args:
        retriever: h_base over the passages C (each round's base retrieval, passageLink).
        triple_retriever: h_base over the triples T (passageLink).
        triple_index: the triple graph T (triple -> passage for passageLink).
        llm: client of the gist, reason and rewrite calls.
        passage_by_id: passage texts of C (the gist reader's input).
        expansion: the graph expansion run in every round (the run's ``expansion`` group, built and injected by
            the wiring; SyncGE by default, NaiveGE/NoExpansion for ablations).
        settings, **given: :class:`GearAgentSettings` (an instance, or its fields as keywords).
    """

    name = "gear"
    needs_llm = True  # reader, gist, reasoner and rewriter are LLM calls (start-up checks credentials)
    k_dependent = False  # each round retrieves base_k passages whatever the evaluated k
    needs_vectors = True  # passageLink and the expansion's beam search use the embedder
    answers_questions = False

    def __init__(self, retriever: Retriever, triple_retriever: Retriever, triple_index: TripleIndex, llm: LLM,
                 passage_by_id: Mapping[str, Passage], expansion: Expansion,
                 settings: GearAgentSettings | None = None, **given: Any):
        self.settings = GearAgentSettings.of(settings, "GearAgent", **given)
        vars(self).update(self.settings.asdict())  # the loop reads each setting as an attribute
        self.triple_retriever = triple_retriever
        self.triple_index = triple_index
        self.llm = llm
        self.passage_by_id = passage_by_id
        self.passage_link_k = self.settings.passage_link_k or self.base_k
        self.llm_params = as_dict(self.llm_params)
        llm.check_params(self.llm_params, "agent.llm_params")  # a param the API lacks: one error now, not one per call
        self.expansion = expansion
        self.retriever = retriever

    # -- description ----------------------------------------------------------------------------------
    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: the K.2 read of the expansion."""
        self.expansion.check_prompts(questions)

    def describe(self) -> dict[str, Any]:
        """Settings for run.json (the expansion's include γ and the triple graph's hub statistics)."""
        return {**self.settings.asdict(), "passage_link_k": self.passage_link_k,
                "expansion": self.expansion.describe()}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """No run statistics beyond metrics.json's."""
        return {}

    # -- LLM steps ----------------------------------------------------------------------------------------
    def _chat(self, messages: list[dict], stage: str):
        return self.llm.chat(messages, stage=stage, **self.llm_params)

    def gist_read(self, query: str, passage_ids: Sequence[str],
                  memory: list[Triple3]) -> tuple[list[Triple3], dict[str, Any]]:
        """Eq. 4: TG_q(n) = read(passages, q[, G(n-1)]) (:func:`gear_repro.core.triple_reader.read_triples`, stage
        ``gist``). The plain reader while the memory is empty. Empty, cut and unparsed reads are counted
        (``utils.trace.count``: the run loop's counters)."""
        by_id = self.passage_by_id
        passages = [by_id[p] for p in passage_ids if p in by_id]
        if not passages:
            count("gist_no_passages")
        read = read_triples(self.llm, passages, query, stage="gist", memory=memory,
                            llm_params=self.llm_params)
        if read.passages_dropped:
            count("gist_context_dropped_passages", read.passages_dropped)
        if read.failed:
            count("gist_parse_failed")
        if read.repaired:
            count("gist_parse_repaired")
        return read.triples, read.info()

    def reason(self, question: str, memory: list[Triple3]) -> dict[str, Any]:
        """Eq. 6: a(n), r(n) = reason(G(n), q). An unparseable reply counts as not answerable."""
        from gear_repro.llm.parsing import parse_reason
        from gear_repro.prompts import render

        reply = self._chat(render("reason", query=question, triples=memory), "reason")
        answerable, text, ok = parse_reason(reply.text)
        if not ok or answerable is None:
            count("reason_unparsed")
        return {"answerable": bool(answerable) if ok and answerable is not None else False, "parsed": ok,
                "reason": text, "raw": reply.text}

    def rewrite(self, question: str, memory: list[Triple3], reason: str) -> dict[str, Any]:
        """Eq. 7: q(n+1) = rewrite(G(n), q, r(n)); falls back to q when the reply does not parse."""
        from gear_repro.llm.parsing import parse_rewrite
        from gear_repro.prompts import render

        reply = self._chat(render("rewrite", query=question, triples=memory, reason=reason or ""), "rewrite")
        new_q, ok = parse_rewrite(reply.text)
        fallback = not ok or not new_q.strip()
        if fallback:
            count("rewrite_fallback")
            new_q = question
        elif not new_q.rstrip().endswith(("?", "？")):  # prose ("I cannot ...") is still q(n+1), as the
            count("rewrite_not_question")  # paper's loop takes it; counted and warned about
        return {"query": new_q, "parsed": ok, "fallback": fallback, "raw": reply.text}

    # -- passageLink and fusion ---------------------------------------------------------------------------
    def passage_link_lists(self, memory: Sequence[Triple3], cache: dict[str, list[str]]) -> list[list[str]]:
        """Eq. 8/10: for each t in G, RRF(h_base^k(t, C), passages of h_base^k(t, T)); memoised per text."""
        texts = [triple_text(t) for t in memory]
        todo = list(dict.fromkeys(t for t in texts if t not in cache))
        if todo:
            index = self.triple_index
            p_lists = self.retriever.retrieve_many(todo, self.passage_link_k)
            t_lists = self.triple_retriever.retrieve_many(todo, self.passage_link_k)
            for text, pr, tr in zip(todo, p_lists, t_lists, strict=True):
                via_triples = list(dict.fromkeys(index.passage_of[t] for t in tr.ids if t in index.passage_of))
                cache[text] = rrf([pr, via_triples], k_rrf=self.k_rrf).ids
        return [cache[t] for t in texts]

    def fuse(self, memory: Sequence[Triple3], round_lists: Sequence[Sequence[str]],
             cache: dict[str, list[str]]) -> tuple[Ranking, list[list[str]]]:
        """Eq. 9: RRF(passageLink lists..., C_q(1..n)); returns the ranking and the passageLink lists."""
        links = self.passage_link_lists(memory, cache) if self.passage_link and memory else []
        return rrf([*links, *[list(x) for x in round_lists]], k_rrf=self.k_rrf, limit=self.output_depth), links

    # -- the loop -------------------------------------------------------------------------------------------
    def run(self, question: Question, k: int) -> MethodOutput:
        """Run GEAR on one question. ``k`` is ignored (k_dependent=False): each round retrieves ``base_k``."""
        t_start = time.perf_counter()
        q = question.question
        counters: dict[str, int] = {}
        memory: list[Triple3] = []
        seen: set[tuple[str, ...]] = set()
        link_cache: dict[str, list[str]] = {}
        round_lists: list[list[str]] = []
        rounds: list[RoundRecord] = []
        query = q
        stop = "max_rounds"
        final = Ranking()
        links: list[list[str]] = []
        for n in range(1, self.max_rounds + 1):
            # every LLM call of round n (read, gist, reason, rewrite) tagged n; what the steps meet counted
            with tags(round=n), counting(counters):
                t0 = time.perf_counter()
                base_q = query if self.query_for_base == "rewritten" else q
                beam_q = query if self.query_for_beam == "rewritten" else q
                read_q = q if self.read_with == "original" else query
                base = self.retriever.retrieve(base_q, self.base_k)
                t1 = time.perf_counter()
                out = self.expansion.expand(beam_q, base, read_query=read_q,
                                            memory=list(memory) if self.reader_memory else [])
                t2 = time.perf_counter()
                etrace = out.trace or {}
                fused = out.ranking
                expanded = list(etrace.get("expanded", []))
                round_lists.append(list(fused.ids))
                for key, val in (etrace.get("counters") or {}).items():
                    if isinstance(val, int):
                        bump(counters, f"expansion.{key}", val)
                gist_src = {"fused": fused.ids, "expanded": expanded, "base": base.ids}[self.gist_docs]
                # gear.py:52 (gear-rag.github.io@39fd9c7): gist_memory_constructor(expanded_passages), no cap
                gist_ids = list(gist_src[: self.gist_k])
                if not gist_ids and self.gist_empty == "fused":
                    gist_ids = list(fused.ids[: self.gist_k or self.base_k])
                if n == 1 and self.gist_first_round == "reuse":
                    new = [tuple(str(x) for x in t) for t in etrace.get("proximal", [])]
                    ginfo = {"prompt": None, "reply": None, "reused": "proximal"}
                elif not gist_ids:  # gist_empty=skip: the pseudocode's read of an empty list adds nothing
                    bump(counters, "gist_empty_expansion")
                    new, ginfo = [], {"prompt": None, "reply": None, "skipped": "empty_expansion"}
                else:
                    new, ginfo = self.gist_read(read_q, gist_ids, memory)
                added = []
                for t in new:
                    key = triple_key(t)
                    if key in seen:
                        bump(counters, "memory_duplicates")
                        if self.dedupe_memory:
                            continue
                    seen.add(key)
                    memory.append(t)
                    added.append(t)
                t3 = time.perf_counter()
                last = n == self.max_rounds
                verdict = None
                if not last or self.reason_last_round:
                    verdict = self.reason(q, memory)
                t4 = time.perf_counter()
                final, links = self.fuse(memory, round_lists, link_cache)
                t5 = time.perf_counter()
                rec = RoundRecord(
                    round=n, query=query, base=list(base.ids), proximal=etrace.get("proximal", []),
                    linked=etrace.get("linked", []), expanded=expanded, fused=list(fused.ids),
                    expansion={k_: v for k_, v in etrace.items() if k_ not in ("proximal", "linked", "expanded", "beams")},
                    beams=etrace.get("beams", []), gist_read={"ids": gist_ids, **ginfo},
                    gist_new=[list(t) for t in added], memory=[list(t) for t in memory], reason=verdict,
                    ranking=final.ids[: self.round_ranking_depth] if self.round_ranking_depth else final.ids)
                timings = {"base_s": t1 - t0, "expansion_s": t2 - t1, "gist_s": t3 - t2, "reason_s": t4 - t3,
                           "fusion_s": t5 - t4}
                rounds.append(rec)
                if verdict is not None and verdict["answerable"]:
                    stop = "answerable"
                    rec.timings = {k_: seconds(v) for k_, v in timings.items()}
                    break
                if last:
                    rec.timings = {k_: seconds(v) for k_, v in timings.items()}
                    break
                t6 = time.perf_counter()
                rw = self.rewrite(q, memory, verdict["reason"] if verdict else "")
                timings["rewrite_s"] = time.perf_counter() - t6
                rec.rewrite = rw
                rec.timings = {k_: seconds(v) for k_, v in timings.items()}
                if normalize_entity(rw["query"]) in {normalize_entity(r.query) for r in rounds}:
                    bump(counters, "rewrite_repeated")
                query = rw["query"]
        trace = {
            "agent": self.name,
            "stop": stop,
            "n_rounds": len(rounds),
            "max_rounds": self.max_rounds,
            "memory": [list(t) for t in memory],
            "answer": next((r.reason["reason"] for r in reversed(rounds) if r.reason and r.reason["answerable"]),
                           None),
            "passage_link": [{"triple": list(t), "ids": ids[: self.passage_link_k * 2]}
                             for t, ids in zip(memory, links, strict=False)] if links else [],
            "counters": counters,
            "timings": {"total_s": seconds(time.perf_counter() - t_start)},
        }
        return MethodOutput(ranking=final, rounds=[r.to_dict() for r in rounds], trace=trace)
