"""Graph expansion of a base passage list (GEAR §4, §6.3): NoExpansion, NaiveGE, SyncGE.

Given q and C'_q = h^k_base(q, C):

* ``NoExpansion``: C'_q unchanged (the base retriever rows of Table 2).
* ``NaiveGE`` (§6.3): initial triples T_q = all triples of the passages in C'_q; no LLM.
* ``SyncGE`` (§4.1): T'_q = read(C'_q, q) with the K.2 reader (:mod:`gear_repro.core.triple_reader`; without gist
  memory, Eq. 1, unless the caller passes one); T_q = {tripleLink(t') : t' in T'_q} (Eq. 2), tripleLink =
  top-1 of h_base(t', T).

Both then run the diverse triple beam search (Alg. 1, :mod:`gear_repro.methods.gear.beam_search`), flatten the
beams breadth-first, map triples to passages and de-duplicate (C~_q), and return
C_q = RRF(C'_q, C~_q) (Eq. 3). ``fusion_order`` decides which list comes first, which breaks RRF ties
(first-seen order): ``base_first`` (default) follows the authors' pseudocode
``rrf(base_passages + expanded_passages)`` (gear-rag.github.io, pseudocode_examples/syncge.py and gear.py);
``expanded_first`` is this harness's earlier reading.

Built by :func:`gear_repro.pipeline.wiring.build_expansion` (the ``expansion`` group with the ``beam`` group) and
injected into the method. ``expand(query, base, *, read_query, memory)`` takes everything a call needs as parameters
(the method decides which question the reader sees and which memory; the round of its LLM calls is the
caller's ``ledger.tags``). Degenerate cases never
crash and never empty a non-empty base list; each is counted in ``trace['counters']``:
``passages_without_triples``, ``hub_entities_capped``, ``no_proximal_triples``, ``link_failed``,
``dead_end_beams``, ``beam_stalled``, ``no_initial_triples``, ``empty_expansion`` (see docs/graph_expansion.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gear_repro.core.fusion import RRF_K, rrf
from gear_repro.core.triple_graph import TripleIndex
from gear_repro.core.triple_reader import MEMORY_PROMPT, READER_PROMPT, check_reader_fits, read_triples
from gear_repro.embedding.embedder import Embedder
from gear_repro.llm.base import LLM
from gear_repro.methods.base import ExpansionOutput
from gear_repro.methods.gear.beam_search import BeamConfig, BeamResult, beam_search, scorer_for
from gear_repro.methods.gear.scorers import PathScorer
from gear_repro.retrieval.base import Retriever
from gear_repro.types import Passage, Question, Ranking, Triple3, triple_text
from gear_repro.utils.settings import Choice, Settings, as_dict, num
from gear_repro.utils.trace import bump, count, counting, seconds

log = logging.getLogger(__name__)


class FusionOrder(Choice):
    """Eq. 3's list order, which decides RRF ties (expansion.fusion_order)."""

    base_first = "base_first"  # rrf(base + expanded), the authors' pseudocode
    expanded_first = "expanded_first"  # the earlier reading


class OnNoProximal(Choice):
    """What SyncGE does when the reader yields no proximal triple (expansion.on_no_proximal)."""

    base = "base"  # return C'_q (counted)
    naive = "naive"  # NaiveGE's initial triples


@dataclass
class NoExpansionSettings(Settings):
    """``expansion=none`` (configs/expansion/none.yaml): the schema, :class:`NoExpansion`'s settings, describe()."""

    config_key: ClassVar[str] = "expansion"

    _target_: str = "gear_repro.methods.gear.expansion.NoExpansion"
    name: str = "none"


@dataclass
class NaiveGESettings(Settings):
    """``expansion=naive`` (each field's default and meaning declared here): the schema, the settings of
    :class:`NaiveGE` (and of the :class:`GraphExpansion` machinery), and its describe(). §4, Eq. 3; DESIGN.md."""

    config_key: ClassVar[str] = "expansion"

    _target_: str = "gear_repro.methods.gear.expansion.NaiveGE"
    name: str = "naive"  # label of the expansion in run names and reports
    k_rrf: int = num(RRF_K, ge=0)  # RRF constant of Eq. 3 (60, DESIGN.md)
    output_depth: int | None = num(None, ge=1)  # fused list cut (null = every passage of both lists)
    trace_beams: int | None = num(None, ge=0)  # final beams stored per question in predictions.jsonl (null = all b)
    # Eq. 3 list order, which decides RRF ties: base_first = RRF(C'_q, C~_q), the authors' pseudocode's
    # rrf(base + expanded) | expanded_first (an earlier reading)
    fusion_order: FusionOrder = FusionOrder.base_first


@dataclass
class SyncGESettings(NaiveGESettings):
    """``expansion=sync`` (configs/expansion/sync.yaml): NaiveGE's settings and the K.2 reader's (§4.1)."""

    _target_: str = "gear_repro.methods.gear.expansion.SyncGE"
    name: str = "sync"
    prompt: str = READER_PROMPT  # reader template (App. K.2 without memory)
    memory_prompt: str = MEMORY_PROMPT  # reader template with a gist memory G(n-1) (GEAR rounds >= 2, K.2)
    max_proximal: int | None = num(None, ge=1)  # proximal triples linked per read (null = all parsed)
    on_no_proximal: OnNoProximal = OnNoProximal.base  # nothing parsed: base (return C'_q, counted) | naive (NaiveGE's triples)
    llm_params: dict[str, Any] = field(default_factory=dict)  # extra llm.chat kwargs of the reader call


class NoExpansion:
    """expansion=none: the base list C'_q unchanged. Its output does not depend on the base k beyond
    truncation, so single-step runs need one pass (``k_dependent = False``)."""

    name = "none"
    k_dependent = False  # C_q = C'_q: the k=15 list truncated is the k=5 list
    needs_vectors = False  # reads no triple vectors
    needs_llm = False

    def __init__(self, settings: NoExpansionSettings | None = None, **given: Any):
        self.settings = NoExpansionSettings.of(settings, "NoExpansion", **given)
        self.name = self.settings.name

    def expand(self, query: str, base: Ranking, *, read_query: str | None = None,
               memory: Sequence[Sequence[str]] = ()) -> ExpansionOutput:
        """C_q = C'_q (the Expansion protocol's arguments are not read)."""
        return ExpansionOutput(ranking=base, trace={"expansion": self.name})

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: no prompt."""
        return None

    def describe(self) -> dict[str, Any]:
        return self.settings.asdict()


class GraphExpansion:
    """Shared machinery: initial triples -> Alg. 1 -> C~_q -> RRF of C'_q and C~_q (Eq. 3).

    Args:
        triple_index: the triple graph T (entity adjacency, triple -> passage).
        embedder: the path scorer's SBERT embedder.
        beam: the ``beam`` config group (:class:`BeamConfig` fields).
        settings, **given: :attr:`settings_class` (an instance, or its fields as keywords).
    """

    name = "graph"
    k_dependent = True  # the base list of size k seeds the expansion (Table 2: one pass per evaluated k)
    needs_vectors = True  # the beam search scores with triple vectors
    needs_llm = False
    settings_class: type[NaiveGESettings] = NaiveGESettings

    def __init__(self, triple_index: TripleIndex, embedder: Embedder, beam: Any = None,
                 settings: NaiveGESettings | None = None, **given: Any):
        self.settings = self.settings_class.of(settings, type(self).__name__, **given)
        vars(self).update(self.settings.asdict())  # the expansion reads each setting as an attribute
        self.triple_index = triple_index
        self.embedder = embedder
        self.beam = BeamConfig.from_any(beam)
        self._scorer: PathScorer | None = None

    # -- resources ---------------------------------------------------------------------------------
    @property
    def index(self) -> TripleIndex:
        return self.triple_index

    @property
    def scorer(self) -> PathScorer:
        if self._scorer is None:
            self._scorer = scorer_for(self.beam, self.index, self.embedder)
        return self._scorer

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check of the prompts against ``llm.context_window``: NaiveGE reads nothing (SyncGE checks its reader)."""
        return None

    def describe(self) -> dict[str, Any]:
        return {**self.settings.asdict(), "beam": self.beam.to_dict(), "graph": self.index.describe()}

    # -- steps ---------------------------------------------------------------------------------------
    def initial_triples(self, base: Ranking, trace: dict[str, Any], *, read_query: str,
                        memory: Sequence[Sequence[str]]) -> list[str]:
        """T_q: the triple ids the beam search starts from (what it meets: ``utils.trace.count``)."""
        raise NotImplementedError

    def search(self, query: str, initial: Sequence[str]) -> BeamResult:
        """Alg. 1 from the initial triples with q = ``query`` (its counters: ``BeamResult.counters``)."""
        return beam_search(query, initial, self.index, self.scorer, self.beam)

    def fuse(self, expanded: Sequence[str], base: Ranking) -> Ranking:
        """Eq. 3: C_q = RRF of C'_q and C~_q in ``fusion_order`` (ties keep first-seen order)."""
        lists = [base, list(expanded)] if self.fusion_order == "base_first" else [list(expanded), base]
        return rrf(lists, k_rrf=self.k_rrf, limit=self.output_depth)

    def expand(self, query: str, base: Ranking, *, read_query: str | None = None,
               memory: Sequence[Sequence[str]] = ()) -> ExpansionOutput:
        """C_q from the base list ``base`` (C'_q); the beams are scored against ``query``.

        Args:
            read_query: the question a reader sees (SyncGE; None = ``query``).
            memory: the gist memory G(n-1) a reader sees (GEAR rounds >= 2; empty = none).
        """
        t0 = time.perf_counter()
        trace: dict[str, Any] = {"expansion": self.name}
        with counting() as initial_counts:  # the initial triples' counters, then the beam search's
            initial = self.initial_triples(base, trace, read_query=query if read_query is None else read_query,
                                           memory=memory)
        t1 = time.perf_counter()
        res = self.search(query, initial)
        t2 = time.perf_counter()
        counters = {**initial_counts, **res.counters}
        if not res.passages:
            bump(counters, "empty_expansion")
        ranking = self.fuse(res.passages, base)
        t3 = time.perf_counter()
        trace.update({
            "beams": res.to_trace(self.index, self.trace_beams),
            "beam_steps": res.steps,
            "expanded": list(res.passages),
            "counters": counters,
            "timings": {"initial_s": seconds(t1 - t0), **{k: seconds(v) for k, v in res.timings.items()},
                        "search_s": seconds(t2 - t1), "fusion_s": seconds(t3 - t2)},
        })
        return ExpansionOutput(ranking=ranking, trace=trace)


class NaiveGE(GraphExpansion):
    """NaiveGE (§6.3): T_q = all triples of the passages in C'_q, in base-rank then record order. No LLM."""

    name = "naive"

    def initial_triples(self, base: Ranking, trace: dict[str, Any], *, read_query: str = "",
                        memory: Sequence[Sequence[str]] = ()) -> list[str]:
        """T_q = every triple of the base passages (§6.3); no reader, so the question and memory are unused."""
        out: list[str] = []
        for pid in base.ids:
            ts = self.index.triples_of_passage(pid)
            if not ts:
                count("passages_without_triples")
            out.extend(ts)
        trace["initial_triples"] = len(out)
        return out


class SyncGE(GraphExpansion):
    """SyncGE (§4.1): LLM read of C'_q (K.2 reader; :func:`gear_repro.core.triple_reader.read_triples`) -> proximal
    triples T'_q -> tripleLink (top-1 of the base retriever over T) -> T_q -> Alg. 1 -> RRF with C'_q.

    Args (besides :class:`GraphExpansion`'s; settings: :class:`SyncGESettings`):
        triple_retriever: h_base over T (tripleLink, Eq. 2).
        llm: the K.2 reader's client.
        passage_by_id: passage texts of the corpus C.
    """

    name = "sync"
    needs_llm = True  # the K.2 reader is an LLM call (start-up checks its credentials)
    settings_class = SyncGESettings

    def __init__(self, triple_index: TripleIndex, embedder: Embedder, triple_retriever: Retriever, llm: LLM,
                 passage_by_id: Mapping[str, Passage], beam: Any = None, settings: SyncGESettings | None = None,
                 **given: Any):
        super().__init__(triple_index, embedder, beam, settings, **given)
        self.triple_retriever = triple_retriever
        self.llm = llm
        self.passage_by_id = passage_by_id
        self.llm_params = as_dict(self.llm_params)
        llm.check_params(self.llm_params, "expansion.llm_params")  # a param the API lacks: one error now, not one per call

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check: the reader prompt without passages fits ``llm.context_window``."""
        check_reader_fits(self.llm, [q.question for q in questions], prompt=self.prompt, llm_params=self.llm_params)

    def link(self, proximal: Sequence[Triple3]) -> list[dict[str, Any]]:
        """Eq. 2: tripleLink each proximal triple (top-1 of h_base(t', T)); failures are counted."""
        texts = [triple_text(p) for p in proximal]
        ids = self.index.link_many(texts, self.triple_retriever)
        out = []
        for p, t, tid in zip(proximal, texts, ids, strict=True):
            if tid is None:
                count("link_failed")
                out.append({"proximal": list(p), "text": t, "triple": None})
                continue
            deg = int(self.index.neighbour_rows(self.index.row[tid]).size)
            if deg == 0:
                count("linked_without_neighbours")
            out.append({"proximal": list(p), "text": t, "triple": tid, "triple_text": self.index.text(tid),
                        "passage": self.index.passage_of[tid], "neighbours": deg})
        return out

    def initial_triples(self, base: Ranking, trace: dict[str, Any], *, read_query: str,
                        memory: Sequence[Sequence[str]]) -> list[str]:
        t0 = time.perf_counter()
        by_id = self.passage_by_id
        read = read_triples(self.llm, [by_id[p] for p in base.ids if p in by_id], read_query,
                            stage="read", memory=memory, prompt=self.prompt,
                            memory_prompt=self.memory_prompt, llm_params=self.llm_params)
        proximal = read.triples
        t1 = time.perf_counter()
        if read.passages_dropped:
            count("context_dropped_passages", read.passages_dropped)
        if read.failed:
            count("parse_failed")
        if read.repaired:
            count("parse_repaired")
        if self.max_proximal is not None and len(proximal) > self.max_proximal:
            count("proximal_capped", len(proximal) - self.max_proximal)
            proximal = proximal[: self.max_proximal]
        count("proximal_triples", len(proximal))
        linked = self.link(proximal) if proximal else []
        initial = [x["triple"] for x in linked if x["triple"] is not None]
        trace.update({"proximal": [list(p) for p in proximal], "linked": linked, "read": read.info(),
                      "read_s": seconds(t1 - t0), "link_s": seconds(time.perf_counter() - t1)})
        if not proximal:
            count("no_proximal_triples")
            if self.on_no_proximal == "naive":
                count("naive_fallback")
                initial = NaiveGE.initial_triples(self, base, trace)  # type: ignore[arg-type]
        trace["initial_triples"] = len(initial)
        return initial
