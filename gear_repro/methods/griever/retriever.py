"""GRIEVER (Melo et al.): the LLM-free multi-step graph retriever, usable as any method's base retriever.

Alg. 1 (App. A.2), per iteration i = 1..n_i (``iterations``, 2 in the paper's tables):

1. passages R_i: iteration 1 runs the *composed* retrieval (§4.2.2: BM25 candidates re-scored by dense
   cosine) for the query and its relative-clause sub-queries (§4.2.1), a passage keeping its best score;
   later iterations run RRF(BM25, kNN) filtered to passages holding a joinable entity among their
   subjects/objects and never retrieved before (§4.2.2);
2. T = shortlist_triples(q, R_i) (Alg. 2, §4.2.4): the triples of R_i whose partial ("s p" or "p o") is among
   the ``t_max`` best units by RRF(BM25, kNN) within R_i, anchors expanded with their same_as aliases (§4.2.3);
3. score_triples (§4.3-4.4): entity and predicate matching scores from one query encoding, Eq. 1 per
   partial, Eq. 2 per triple; the join entities (``join_from``): ``shortlist`` = Alg. 2's E_j, the complement of
   every shortlisted partial whose triple is in T (+ same_as), or ``top`` = the unmatched complements of the
   ``n_join`` best triples (Alg. 1's E_i read as "the highest-scoring entities", §4.5). Alg. 1 and Alg. 2
   disagree (Alg. 1 discards Alg. 2's E_j); we follow Alg. 2 and §4.2.2 ("the set of joinable entities in the
   sub-graph") by default;
4. q <- rewrite(q) (§4.5): the best triple's matched entity mention (and its predicate mention) replaced by
   its complement entity;
5. the sub-graph G_q grows by T.

rank_passages(R, G_q) (§4.4): a path's score is the mean of its triples' scores; a passage scores the
maximum over its triples t and the paths P containing t of s_t * s_P; passages with no scored triple follow
in retrieval order. ``paths: chain`` (default; §4.4 "every time a new triple is added to the path chain"): a
path takes one triple per iteration, consecutive ones linked by the earlier triple's complement (or an alias)
being an entity of the later one; ``pairs``: single triples and any two triples of G_q sharing an entity or an
alias (the earlier reading). The same_as aliases (§4.2.3) are filtered by the retrieved passages
(``same_as_filter``, :meth:`GrieverRetriever.filter_aliases`).

With ``inner_k`` unset each iteration retrieves the requested k; the result is the top k of the pool.
Choices where the paper is silent are config keys, listed with reasons in docs/griever.md.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gear_repro.backends.base import Backend, Collection
from gear_repro.core.fusion import RRF_K, rrf
from gear_repro.core.triple_graph import normalize_entity
from gear_repro.embedding.embedder import Embedder, SentenceEmbedder
from gear_repro.methods.griever.index import GrieverData, SameAsConfig, ShortlistIndex, Unit, UnitVectors
from gear_repro.methods.griever.matcher import EntityMatcher, QueryEncoding, SentenceTokenEncoder
from gear_repro.methods.griever.store import GrieverStore, MemoryGrieverStore, PassageFilter
from gear_repro.methods.griever.text import DEFAULT_CONNECTORS, rewrite, split_clauses
from gear_repro.types import OwnMatrix, Passage, Ranking, Triple
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.io import progress_bars
from gear_repro.utils.settings import Choice, Settings, num

log = logging.getLogger(__name__)


class JoinFrom(Choice):
    """Which join entities filter iteration i+1 (§4.2.2): Alg. 2's E_j over the whole shortlist, or the
    complements of the ``n_join`` best-scored triples."""

    shortlist = "shortlist"
    top = "top"


class Paths(Choice):
    """Paths of rank_passages (§4.4): chains across consecutive iterations, or pairs sharing an entity."""

    chain = "chain"
    pairs = "pairs"


class SameAsFilter(Choice):
    """How the retrieved passages filter same_as aliases (§4.2.3).

    ``shared_neighbour``: keep alias a of e when a passage of a shares an entity (other than e, a and their
    aliases) with the retrieved passages that contain e, i.e. the alias's context agrees with e's;
    ``alias_in_pool``: keep a when a itself occurs in a retrieved passage; ``entity``: no filter (every alias
    of an entity found in the retrieved passages; the earlier behaviour, a no-op filter).
    """

    shared_neighbour = "shared_neighbour"
    alias_in_pool = "alias_in_pool"
    entity = "entity"


class ScoringQuery(Choice):
    """The query iteration i >= 2 shortlists and scores its triples against (§4.2 vs Alg. 1): Alg. 1 passes the
    rewritten q to ``shortlist_triples`` and ``score_triples``; §4.2's prose says "scored the highest with respect to
    the original text query"."""

    rewritten = "rewritten"
    original = "original"


class FinalRanking(Choice):
    """How the pooled passages are ordered: ``graph`` (§4.4, path scores) or ``rrf`` (RRF of the graph
    order and the retrieval order; not in the paper)."""

    graph = "graph"
    rrf = "rrf"


@dataclass
class GrieverSettings(Settings):
    """GRIEVER's hyper-parameters, each field's default and meaning declared here ("open": a value the paper leaves
    open, docs/griever.md lists them). :class:`GrieverRetrieverSettings` adds the retriever keys."""

    config_key: ClassVar[str] = "retriever"

    iterations: int = num(2, ge=1)      # n_i of Alg. 1 (§5.2: two iterations, one rewrite)
    # passages per iteration (null = the requested k; 5 when GRIEVER is GEAR's/IRCoT's base, §5.3 footnote 1)
    inner_k: int | None = num(None, ge=1)
    # iteration 1 composed retrieval (§4.2.2); false = RRF hybrid (Table 3 "w/o composed_retriever")
    composed: bool = True
    composed_candidates: int = num(100, ge=1)  # (open) BM25 candidates re-scored densely in iteration 1
    # (open) depth of the BM25 and kNN lists fused by RRF (iterations >= 2; shortlisting uses t_max)
    rrf_depth: int = num(100, ge=1)
    k_rrf: int = num(RRF_K, ge=0)       # (open) RRF constant (Cormack et al., 2009)
    split_clauses: bool = True          # §4.2.1 relative-clause sub-queries in iteration 1
    # (open) relative-clause connectors (§4.2.1 shows where, who)
    connectors: list[str] = field(default_factory=lambda: list(DEFAULT_CONNECTORS))
    shortlist: bool = True              # Alg. 2 (false = all triples of R_i; Table 3 "w/o shortlisting")
    # partial: partial_triples units | full: whole triples "s p o" (Table 3 "w/ full_triples")
    shortlist_index: ShortlistIndex = ShortlistIndex.partial
    t_max: int = num(30, ge=1)          # (open) units kept by the shortlisting RRF search (Alg. 2)
    # encode: embed each unit text (§4.2.4) | compose: normalised sum of its name vectors (ours, no encoder pass)
    unit_vectors: UnitVectors = UnitVectors.encode
    max_ngram: int = num(6, ge=1)       # (open) longest query n-gram (words) of the entity matcher (§4.3)
    # (open) best triples tried by the rewrite (§4.5); also the join entities with join_from=top
    n_join: int = num(5, ge=1)
    # (open) matcher cosine an entity mention needs to be rewritten (§4.5)
    rewrite_min_sim: float = num(0.5, ge=-1, le=1)
    # shortlist: Alg. 2's E_j, complements of every shortlisted partial in T (+ same_as) | top: of the n_join best
    # triples (Alg. 1's E_i read as §4.5's "highest-scoring entities"); Alg. 1 and 2 disagree, docs/griever.md
    join_from: JoinFrom = JoinFrom.shortlist
    # chain: §4.4 paths chain one triple per iteration, linked by the earlier triple's complement (or alias) | pairs:
    # any two triples sharing an entity or alias
    paths: Paths = Paths.chain
    # shared_neighbour: §4.2.3 keep an alias whose passages share an entity with the retrieved passages of the entity
    # | alias_in_pool: the alias occurs in a retrieved passage | entity: no filter
    same_as_filter: SameAsFilter = SameAsFilter.shared_neighbour
    final: FinalRanking = FinalRanking.graph  # graph: rank by path scores (§4.4) | rrf: RRF(graph, retrieval order)
    # rewritten: iteration >= 2 shortlists and scores triples against the rewritten q (Alg. 1) | original: against
    # the question (§4.2 prose "with respect to the original text query"); the paper disagrees with itself
    # (docs/readings.md)
    scoring_query: ScoringQuery = ScoringQuery.rewritten
    same_as: SameAsConfig = field(default_factory=SameAsConfig)

    def __post_init__(self) -> None:
        if isinstance(self.same_as, Mapping):
            self.same_as = SameAsConfig(**self.same_as)
        self.connectors = list(self.connectors)
        super().__post_init__()


@dataclass
class GrieverRetrieverSettings(GrieverSettings):
    """``configs/retriever/griever*.yaml``: the group's schema and :class:`GrieverRetriever`'s settings: GRIEVER's
    hyper-parameters, the retriever keys, and the retriever config of tripleLink/passageLink (checked as an option
    of the retriever group; the wiring builds it apart)."""

    _target_: str = "gear_repro.methods.griever.GrieverRetriever"
    name: str = "griever"
    triple_retriever: Any = field(default=None, metadata={"group": "retriever"})


# bytes of Python objects per name and per unit row at the build's peak (GrieverData, the store's maps, the units'
# BM25 index; the dataset's triples and passages are counted apart, capacity.TRIPLE_RECORD_BYTES), fitted to
# bench_griever --scale at 0.1 and 0.2 of MuSiQue and to a 2Wiki-size run on hash vectors (docs/scale.md)
RECORD_BYTES = {"names": 200, "units": 1050}
TIE_EPS = 1e-6  # cosines of one text encoded alone and in a batch differ in the last bits (~1e-7)


@dataclass
class ScoredTriple:
    """A shortlisted triple with its Eq. 2 score and its best partial (anchor matched, complement not)."""

    id: str
    score: float
    anchor: str
    predicate: str
    complement: str
    inverse: bool
    iteration: int


class GrieverRetriever:
    """``retriever=griever``: built by the wiring (:mod:`gear_repro.pipeline.wiring`) from ``cfg.retriever``.

    ``collection`` is the run's passage collection, ``passages``/``triples`` the dataset's, ``backend`` the run's
    index engine: the Elasticsearch backend gets :class:`ElasticsearchGrieverStore`, the memory backend
    :class:`MemoryGrieverStore`. The indexes are built on first use (:meth:`build`).
    """

    name = "griever"
    k_dependent = True  # each iteration retrieves k: the top k of a k-pool differs from the top k of a 15-pool
    needs_vectors = True  # the passage and unit searches are hybrid (BM25 + dense)
    searches_knn = False  # ... the dense part in its store (exact over the passage vectors), not collection.knn

    def __init__(self, collection: Collection, embedder: Embedder, passages: Sequence[Passage],
                 triples: Sequence[Triple] | None, backend: Backend, settings: GrieverRetrieverSettings | None = None,
                 **given: Any):
        if embedder is None:
            raise ConfigError("retriever=griever needs an embedder")
        self.collection = collection
        self.embedder = embedder
        self.passages = passages
        self.triples = triples
        self.backend = backend
        self.settings = GrieverRetrieverSettings.of(settings, "GrieverRetriever", **given)
        self.name = self.settings.name
        # query tokens on the query side of the embedder (embedder.query_precision); doubles encode their own
        encoder = SentenceTokenEncoder(embedder.queries) if isinstance(embedder, SentenceEmbedder) else embedder
        self.matcher = EntityMatcher(encoder, max_ngram=self.settings.max_ngram)
        self._store: GrieverStore | None = None
        self._units: dict[str, Unit] = {}
        self.build_stats: dict = {}

    @staticmethod
    def capacity_collections(node: Any, triples: Sequence[Triple]) -> dict[str, OwnMatrix]:
        """What the build embeds beyond the passages, for the start-up capacity check
        (:mod:`gear_repro.pipeline.capacity`; ``node``: this retriever's config): the distinct entity and predicate
        names and the units (§4.2.4: "s p" / "p o" partials, or whole triples), counted on the raw strings, at least
        as many as the normalised ones the build keeps. Both are memory maps of their cache files; the alias
        clustering reads the names whole (unless ``same_as.max_aliases`` is 0). The records (the index content, the
        store's maps, the units' BM25 index) are counted per row, :data:`RECORD_BYTES` (docs/scale.md)."""
        names = {x for t in triples for x in (t.subject, t.object, t.predicate)}
        if str(node.get("shortlist_index", ShortlistIndex.partial.value)) == ShortlistIndex.full.value:
            units = {(t.subject, t.predicate, t.object) for t in triples}
        else:
            units = {(t.subject, t.predicate, False) for t in triples} | {(t.object, t.predicate, True)
                                                                          for t in triples}
        clustered = int((node.get("same_as") or {}).get("max_aliases", SameAsConfig.max_aliases)) > 0
        return {"griever names": OwnMatrix(len(names), sum(map(len, names)), clustered, RECORD_BYTES["names"]),
                "griever units": OwnMatrix(len(units), sum(len(u[0]) + len(u[1]) + 1 for u in units), False,
                                           RECORD_BYTES["units"])}

    @staticmethod
    def capacity_hints(node: Any, mats: dict[str, OwnMatrix], dim: int) -> list[str]:
        """The setting that needs less memory, named when the capacity check refuses the run."""
        names = mats.get("griever names")  # absent from a plan's later run that shares the names' encode
        if names is None or not names.resident:
            return []
        return [f"retriever.same_as.max_aliases=0 (no same_as aliases: the {names.rows * dim * 4 / 2**30:.1f} GiB "
                "name matrix is then not read whole)"]

    # -- offline ------------------------------------------------------------------------------
    def build(self) -> dict:
        """Build (or load) the three indexes; returns sizes and seconds."""
        if self._store is None:
            from gear_repro.backends.elasticsearch import ElasticsearchBackend

            t0 = time.perf_counter()
            # bars over the records, units and aliases (minutes at full size, docs/scale.md) as the embedder's
            # encode bars: its show_progress follows run.progress
            with progress_bars(bool(getattr(self.embedder, "show_progress", False))):
                data = GrieverData.build(self.passages, self.triples, self.embedder, self.settings.shortlist_index,
                                         self.settings.same_as, self.settings.unit_vectors)
                t1 = time.perf_counter()
                backend = self.backend
                if isinstance(backend, ElasticsearchBackend):
                    from gear_repro.methods.griever.elasticsearch import ElasticsearchGrieverStore

                    self._store = ElasticsearchGrieverStore(backend, data, self.embedder)
                else:
                    self._store = MemoryGrieverStore(data, self.collection, backend)
            self._units = {u.id: u for u in data.units}
            self.build_stats = {**data.stats(), "data_s": round(t1 - t0, 3),
                                "store_s": round(time.perf_counter() - t1, 3)}
            log.info("griever indexes: %s", self.build_stats)
        return self.build_stats

    @property
    def store(self) -> GrieverStore:
        if self._store is None:
            self.build()
        assert self._store is not None
        return self._store

    # -- online -------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int) -> Ranking:
        return self.retrieve_traced(query, k)[0]

    def retrieve_many(self, queries: Sequence[str], k: int) -> list[Ranking]:
        return [self.retrieve(q, k) for q in queries]

    def retrieve_traced(self, query: str, k: int) -> tuple[Ranking, dict]:
        """Alg. 1; the trace holds each iteration's query, new passages, join entities and best triples."""
        s = self.settings
        self.build()  # the indexes, on first use
        kk = s.inner_k or k
        pool: dict[str, int] = {}
        q = query
        filt: PassageFilter | None = None
        graph: list[ScoredTriple] = []
        aliases: dict[str, list[str]] = {}
        trace: list[dict] = []
        original = None  # (query, encoding) shortlisting and scoring use with scoring_query=original
        for it in range(s.iterations):
            enc = self.matcher.encode(q)
            if original is None or s.scoring_query is ScoringQuery.rewritten:
                original = (q, enc)
            q_score, enc_score = original
            if filt is None:
                got = self._first_retrieval(q, enc, kk)
            else:
                got = self._rrf_retrieval(q, enc.sentence, kk, filt)
            new = [p for p in got.ids if p not in pool]
            for p in new:
                pool[p] = len(pool)
            rec: dict = {"query": q, "passages": new}
            trace.append(rec)
            if not new:
                break
            counts = {"aliases_found": 0, "aliases_kept": 0}
            triples, syn, units = self._shortlist(q_score, enc_score, new, list(pool), counts)
            aliases.update(syn)
            scored = self._score_triples(enc_score, triples, syn, it)
            graph += scored
            join = self._join_entities(scored, triples, units)
            join_syn = self.same_as(join, list(pool), counts)
            aliases.update(join_syn)
            ents = frozenset(join) | frozenset(a for e in join for a in join_syn.get(e, ()))
            rec.update(n_triples=len(triples), join=join, best=[(t.id, round(t.score, 4)) for t in scored[:3]],
                       **counts)
            if it + 1 < s.iterations:
                q = self._rewrite(q, enc, scored, syn)
                filt = PassageFilter(ents, frozenset(pool))
        return self._rank(pool, graph, aliases, k), {"iterations": trace}

    def _first_retrieval(self, q: str, enc: QueryEncoding, k: int) -> Ranking:
        """Iteration 1 (§4.2.1-4.2.2): composed (or RRF hybrid) retrieval of q and its sub-queries, best score
        per passage across them (first-seen order on ties)."""
        s = self.settings
        # a blank query has no clause (split_clauses gives []): it is its own sub-query, as without splitting
        subs = (split_clauses(q, s.connectors) if s.split_clauses else []) or [q]
        encs = [enc] + [self.matcher.encode(x) for x in subs[1:]]
        best: dict[str, float] = {}
        if s.composed:
            for e, cands in zip(encs, self.store.passage_bm25(subs, s.composed_candidates), strict=True):
                r = self.store.passage_rescore(e.sentence, cands.ids)
                for pid, sc in zip(r.ids, r.scores, strict=True):
                    best[pid] = max(sc, best.get(pid, -math.inf))
        else:
            for sub, e in zip(subs, encs, strict=True):
                r = self._rrf_retrieval(sub, e.sentence, s.rrf_depth, None)
                for pid, sc in zip(r.ids, r.scores, strict=True):
                    best[pid] = max(sc, best.get(pid, -math.inf))
        order = sorted(best, key=lambda p: -best[p])[:k]  # stable: first-seen order on ties
        return Ranking(order, [best[p] for p in order])

    def _rrf_retrieval(self, q: str, vec: np.ndarray, k: int, filt: PassageFilter | None) -> Ranking:
        s = self.settings
        sparse = self.store.passage_bm25([q], s.rrf_depth, filt)[0]
        dense = self.store.passage_knn(vec, s.rrf_depth, filt)
        return rrf([sparse, dense], k_rrf=s.k_rrf, limit=k)

    def _shortlist(self, q: str, enc: QueryEncoding, passage_ids: list[str], pool: list[str],
                   counts: dict[str, int] | None = None) -> tuple[list[str], dict[str, list[str]], list[str]]:
        """Alg. 2: (shortlisted triple ids T of ``passage_ids``, same_as aliases of their entities, the
        shortlisted units P_T best first; empty without shortlisting)."""
        s = self.settings
        data = self.store.data
        by_passage = self.store.passage_triples(passage_ids)
        triples = [t for p in passage_ids for t in by_passage.get(p, [])]
        ents = list(dict.fromkeys(e for p in passage_ids for e in data.passage_entities.get(p, [])))
        syn = self.same_as(ents, pool, counts)
        if not s.shortlist or not triples:
            return triples, syn, []
        anchors = list(dict.fromkeys([*ents, *(a for e in ents for a in syn.get(e, ()))]))
        units = rrf([self.store.unit_bm25(q, s.t_max, passage_ids, anchors),
                     self.store.unit_knn(enc.sentence, s.t_max, passage_ids, anchors)], k_rrf=s.k_rrf, limit=s.t_max)
        keep = {t for u in units.ids for t in self._units[u].triple_ids}
        return [t for t in triples if t in keep], syn, list(units.ids)

    def _join_entities(self, scored: list[ScoredTriple], triples: list[str], units: list[str]) -> list[str]:
        """Join entities of one iteration (``join_from``). ``shortlist``: Alg. 2's
        E_j = {o | p ∈ P_T, o ∈ p.objects, (p.s, p.p, o) or its inverse ∈ T}, in unit rank order (without
        shortlisting: the complements of every scored triple); ``top``: the complements of the ``n_join`` best."""
        if self.settings.join_from == JoinFrom.top:
            return list(dict.fromkeys(t.complement for t in scored[: self.settings.n_join]))
        if not units:
            return list(dict.fromkeys(t.complement for t in scored))
        data = self.store.data
        in_t = set(triples)
        out: dict[str, None] = {}
        for uid in units:
            u = self._units[uid]
            for tid in u.triple_ids:
                if tid in in_t:
                    t = data.triples[tid]
                    out[normalize_entity(t.subject if u.inverse else t.object)] = None
        return list(out)

    def same_as(self, entities: Sequence[str], pool: Sequence[str],
                counts: dict[str, int] | None = None) -> dict[str, list[str]]:
        """same_as aliases of ``entities`` met by the pool (§4.2.3), filtered by ``same_as_filter``; adds the
        alias counts before and after the filter to ``counts``."""
        syn = self.store.same_as(entities, pool)
        kept = self.filter_aliases(syn, pool)
        if counts is not None:
            counts["aliases_found"] += sum(map(len, syn.values()))
            counts["aliases_kept"] += sum(map(len, kept.values()))
        return kept

    def filter_aliases(self, syn: dict[str, list[str]], pool: Sequence[str]) -> dict[str, list[str]]:
        """§4.2.3 "already retrieved passage_ids can be used to filter the same_as query, so that only synonyms
        relevant to the intended meaning of the entity (i.e. based on the context in those passages) are
        retrieved": our same_as docs hold one alias list per name, so the passages select the aliases here
        (:class:`SameAsFilter`)."""
        mode = self.settings.same_as_filter
        if mode == SameAsFilter.entity or not syn:
            return syn
        data = self.store.data
        pset = set(pool)
        out: dict[str, list[str]] = {}
        for e, found in syn.items():
            if mode == SameAsFilter.alias_in_pool:
                keep = [a for a in found if pset.intersection(data.entity_passages.get(a, ()))]
            else:
                names = {e, *found}
                context = {x for p in pset.intersection(data.entity_passages.get(e, ()))
                           for x in data.passage_entities.get(p, ())} - names
                keep = [a for a in found if context.intersection(
                    x for p in data.entity_passages.get(a, ()) for x in data.passage_entities.get(p, ()))]
            if keep:
                out[e] = keep
        return out

    def _score_triples(self, enc: QueryEncoding, triple_ids: list[str], syn: dict[str, list[str]],
                       iteration: int) -> list[ScoredTriple]:
        """§4.3-4.4: s_e = best n-gram cosine over the entity and its aliases, s_p likewise for the predicate;
        Eq. 1 per partial (s_e + s_p) / (2 (1 + log freq(e, p))); Eq. 2 the better partial. Best first."""
        if not triple_ids:
            return []
        data = self.store.data
        norm = normalize_entity
        keys = [(norm(t.subject), norm(t.predicate), norm(t.object)) for t in (data.triples[i] for i in triple_ids)]
        ents = list(dict.fromkeys(e for s_, _, o in keys for e in (s_, o)))
        preds = list(dict.fromkeys(p for _, p, _ in keys))
        s_e = self.entity_scores(enc, ents, syn)
        sp, _ = EntityMatcher.best(enc, data.predicate_vectors(preds))
        s_p = dict(zip(preds, sp.tolist(), strict=True))
        out = []
        for tid, (sk, pk, ok) in zip(triple_ids, keys, strict=True):
            fwd = (s_e[sk][0] + s_p[pk]) / (2 * (1 + math.log(data.freq(sk, pk, False))))
            inv = (s_e[ok][0] + s_p[pk]) / (2 * (1 + math.log(data.freq(ok, pk, True))))
            if fwd >= inv - TIE_EPS:  # a tie within float noise keeps the forward partial
                out.append(ScoredTriple(tid, fwd, sk, pk, ok, False, iteration))
            else:
                out.append(ScoredTriple(tid, inv, ok, pk, sk, True, iteration))
        return sorted(out, key=lambda t: -t.score)

    def entity_scores(self, enc: QueryEncoding, ents: list[str],
                      syn: dict[str, list[str]]) -> dict[str, tuple[float, int]]:
        """s_e^q per entity (§4.3): max over the entity and its aliases of the best n-gram cosine, and the
        index of that n-gram in ``enc.spans`` (-1 when the query has none)."""
        data = self.store.data
        cands = list(dict.fromkeys([*ents, *(a for e in ents for a in syn.get(e, ()))]))
        sims, arg = EntityMatcher.best(enc, data.entity_vectors(cands))
        one = {c: (float(v), int(a)) for c, v, a in zip(cands, sims, arg, strict=True)}
        return {e: max([one[e], *(one[a] for a in syn.get(e, ()))], key=lambda x: x[0]) for e in ents}

    def _rewrite(self, q: str, enc: QueryEncoding, scored: list[ScoredTriple], syn: dict[str, list[str]]) -> str:
        """§4.5: the first of the ``n_join`` best triples whose anchor mention matches (cosine >=
        ``rewrite_min_sim``) and whose complement is not yet in q: replace the mention (and the predicate
        mention when it matches too) by the complement. Unchanged q when none qualifies. The mention is found as
        s_e found it (§4.3: the best n-gram over the entity and its aliases ``syn``), so a triple ranked through
        an alias has that alias's mention replaced."""
        s = self.settings
        data = self.store.data
        for t in scored[: s.n_join]:
            name = data.entity_name[t.complement]
            if not name or name.casefold() in q.casefold():
                continue
            (e_sim, e_arg), = self.entity_scores(enc, [t.anchor], syn).values()
            if e_arg < 0 or e_sim < s.rewrite_min_sim:
                continue
            p_sim, p_arg = EntityMatcher.best(enc, data.predicate_vectors([t.predicate]))
            p_span = enc.spans[int(p_arg[0])] if p_arg[0] >= 0 and p_sim[0] >= s.rewrite_min_sim else None
            return rewrite(q, enc.words, enc.spans[e_arg], name, p_span)
        return q

    @staticmethod
    def _chain_paths(graph: list[ScoredTriple], aliases: dict[str, list[str]],
                     score: dict[str, float]) -> dict[str, float]:
        """Best s_P over the chains through each triple (§4.4 ``paths: chain``): a chain takes one triple per
        consecutive iteration, u -> t when u's complement (or an alias of it) is t's anchor or complement
        (or an alias of them); s_P = mean of its scores. For each triple and length, the best prefix sum ending
        there and suffix sum starting there (a DP over iterations) give the exact best mean."""
        def names(e: str) -> set[str]:
            return {e, *aliases.get(e, ())}

        by_it: dict[int, list[ScoredTriple]] = defaultdict(list)
        for t in graph:
            by_it[t.iteration].append(t)
        preds = {t.id: [u.id for u in by_it.get(t.iteration - 1, ())
                        if names(u.complement) & (names(t.anchor) | names(t.complement))] for t in graph}
        succ: dict[str, list[str]] = defaultdict(list)
        for t, us in preds.items():
            for u in us:
                succ[u].append(t)
        pre: dict[str, dict[int, float]] = {}
        for t in sorted(graph, key=lambda x: x.iteration):  # best sum of a chain of n triples ending at t
            pre[t.id] = {1: score[t.id]}
            for u in preds[t.id]:
                for n, v in pre[u].items():
                    pre[t.id][n + 1] = max(pre[t.id].get(n + 1, -math.inf), v + score[t.id])
        suf: dict[str, dict[int, float]] = {}
        for t in sorted(graph, key=lambda x: -x.iteration):  # ... starting at t
            suf[t.id] = {1: score[t.id]}
            for u in succ[t.id]:
                for n, v in suf[u].items():
                    suf[t.id][n + 1] = max(suf[t.id].get(n + 1, -math.inf), v + score[t.id])
        return {t.id: max((a + b - score[t.id]) / (m + n - 1) for m, a in pre[t.id].items()
                          for n, b in suf[t.id].items()) for t in graph}

    def _rank(self, pool: dict[str, int], graph: list[ScoredTriple], aliases: dict[str, list[str]],
              k: int) -> Ranking:
        """rank_passages (§4.4) over the pool, top k."""
        data = self.store.data
        score = {t.id: max(t.score, 0.0) for t in graph}
        if self.settings.paths == Paths.chain:
            best_path = self._chain_paths(graph, aliases, score)
        else:
            ents_of = {t.id: {t.anchor, t.complement} for t in graph}
            by_ent: dict[str, list[str]] = defaultdict(list)
            for t in graph:
                for e in ents_of[t.id]:
                    for x in (e, *aliases.get(e, ())):
                        by_ent[x].append(t.id)
            best_path = dict(score)  # single-triple path: s_P = s_t
            for t in graph:
                for e in ents_of[t.id]:
                    for u in by_ent.get(e, ()):
                        if u != t.id:
                            best_path[t.id] = max(best_path[t.id], (score[t.id] + score[u]) / 2)
        passage_score: dict[str, float] = {}
        for t in graph:
            pid = data.triples[t.id].passage_id
            passage_score[pid] = max(passage_score.get(pid, 0.0), score[t.id] * best_path[t.id])
        retrieval_order = sorted(pool, key=pool.__getitem__)
        graph_order = sorted(retrieval_order, key=lambda p: -passage_score.get(p, -1.0))
        if self.settings.final == FinalRanking.rrf:
            return rrf([graph_order, retrieval_order], k_rrf=self.settings.k_rrf, limit=k)
        top = graph_order[:k]
        return Ranking(top, [passage_score.get(p, 0.0) for p in top])
