"""HippoRAG online retrieval (Gutiérrez et al., 2024, §3 "Online retrieval") as a retriever: query NER ->
link each entity to its most similar phrase node -> Personalized PageRank -> passage scores.

Reference code: OSU-NLP-Group/HippoRAG, ``legacy`` branch ``src/hipporag.py`` (``rank_docs``, ``query_ner``,
``link_node_by_dpr``, ``run_pagerank_igraph_chunk``) and ``src/named_entity_extraction_parallel.py`` (the NER
prompt: ``gear_repro/prompts/templates/hipporag_ner.txt``); ``version=v2``: ``main`` branch
``src/hipporag/HippoRAG.py`` (``retrieve``, ``get_fact_scores``, ``graph_search_with_fact_entities``,
``run_ppr``). Our own code; every default and difference is listed in configs/hipporag/*.yaml and
docs/baselines.md.

v1, per query:
1. named entities from the LLM (one-shot NER prompt, stage ``ner``), parsed by
   :func:`gear_repro.llm.parsing.parse_named_entities` and normalised like the phrase nodes;
2. each entity linked to the phrase node of highest embedding cosine; reset weight of a linked node = its node
   specificity 1/|P_i| (|P_i| = passages containing it; 1 when 0), or 1 with ``node_specificity=false``;
3. PPR (damping 0.5) over the phrase graph; passage score = passage_phrase @ PPR, min-max normalised;
   ranking by score, ties in corpus order.
No entity (or no parseable reply) -> ``no_entity_fallback``: ``uniform`` (the v1 code: every passage 1/N, ties
in descending corpus order, i.e. the last k passages) or ``retriever`` (the run's base retriever, as v2 falls
back to dense retrieval). Every search counts ``hipporag_searches``, ``hipporag_no_entity`` and the NER replies
that did not parse (``hipporag_ner_failed``) or were repaired (``hipporag_ner_repaired``) in ``trace['counters']``
(metrics.json ``agent_stats`` sums them and gives the rates; the report's ``hipporag_stats`` table and a warning
after the run show the failures).

v2, per query (no LLM call unless the optional fact filter existed; it is not implemented): fact scores =
cosine(query, triple text) min-max normalised; the top ``linking_top_k`` (5) facts seed their subject/object
phrases with score / |P_i|, averaged over occurrences, top ``linking_top_k`` phrases kept; every passage node is
seeded with its min-max normalised dense score × ``passage_node_weight`` (0.05); PPR (0.5); passage score = its
node's PPR value. No fact -> the fallback.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, ClassVar

import numpy as np

from gear_repro.backends.base import Collection
from gear_repro.embedding.embedder import Embedder, mapped_matrix
from gear_repro.llm.base import LLM
from gear_repro.methods.base import SearchResult
from gear_repro.methods.hipporag.phrase_graph import (
    SYNONYM_SAMPLE_ROWS,
    HippoRAGVersion,
    PhraseGraph,
    PhraseNormalisation,
    SynonymSearch,
    alnum_length,
    cached_graph_edges,
    cached_phrase_graph,
    cached_phrase_vectors,
    phrase_key,
    sampled_synonym_entries,
)
from gear_repro.retrieval.base import Retriever
from gear_repro.types import OwnMatrix, Passage, Ranking, Triple
from gear_repro.utils.arrays import matrix_scores
from gear_repro.utils.memory import check_build
from gear_repro.utils.settings import Choice, Settings, as_dict, num

log = logging.getLogger(__name__)


class NoEntityFallback(Choice):
    """What a query with no linked entity or fact returns (hipporag.no_entity_fallback)."""

    uniform = "uniform"  # v1 code: 1/N each, descending corpus order (hipporag.py:232-233, :264)
    retriever = "retriever"  # the run's base retriever (as v2's dense fallback)


class TieOrder(Choice):
    """Order of passages with equal v1 PPR scores (hipporag.tie_order)."""

    reference = "reference"  # v1 code: descending corpus order, hipporag.py:264 argsort(kind='mergesort')[::-1]
    corpus = "corpus"  # ascending corpus order (stable sort)


def min_max(x: np.ndarray) -> np.ndarray:
    """(x - min) / (max - min); all zeros when x is constant (the reference would divide by zero)."""
    lo, hi = float(np.min(x)), float(np.max(x))
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x, dtype=np.float64)


def rank_scores(ids: list[str], scores: np.ndarray, k: int | None, *, reverse_ties: bool = False) -> Ranking:
    """Ids by descending score, ties in the given (corpus) order, or in reverse order with ``reverse_ties``
    (the v1 code's ``argsort(kind='mergesort')[::-1]``); top ``k`` (None = all)."""
    position = -np.arange(len(scores)) if reverse_ties else np.arange(len(scores))
    order = np.lexsort((position, -np.asarray(scores, dtype=np.float64)))
    if k is not None:
        order = order[:k]
    return Ranking([ids[i] for i in order], [float(scores[i]) for i in order])


JSON_MODE = {"type": "json_object"}  # the OpenAI API's JSON mode, as the reference's query NER asks for it


def ner_json_mode(llm: Any, setting: bool | None) -> bool:
    """Whether the query NER request asks for the API's JSON mode (``hipporag.ner_json``). ``None`` (auto) follows the
    reference, HippoRAG legacy@b144c46 src/named_entity_extraction_parallel.py: ``response_format={"type":
    "json_object"}`` for its OpenAI client (:47-51), none for its local llama.cpp / Ollama clients (:52-55). So on
    for an LLM whose server the harness does not start (``llm=openai`` / ``openai_compatible``: ``llm.server`` null),
    off for the harness-started llama.cpp server (``llm=local`` / ``tiny``), where JSON mode made greedy decoding of
    the 1.5B model loop. ``True`` / ``False`` force it."""
    if setting is not None:
        return bool(setting)
    return llm is not None and getattr(llm, "server_cfg", None) is None


# Python objects per phrase while the graph is built: its key and index, its synonym entries and the ANN cell
# lists; from bench_hipporag_synonyms' peaks at 50k and 200k synthetic phrases, less the vectors
# (docs/scale.md "HippoRAG at full size")
PHRASE_RECORD_BYTES = 1_500
# Without the synonym search (HippoRAG 2, hipporag.synonyms=false) a phrase costs its key, its index entry and its
# share of the build's arrays: 782 B at the build's peak at MuSiQue size, 736 at 2Wiki's (400-500 held after it),
# RssAnon of build_phrase_graph on the generated corpora (docs/scale.md "Peaks on hash vectors")
FACT_PHRASE_BYTES = 800
# An edge of the phrase graph while PPR runs: igraph's edge (two ids and two index entries, 64-bit: 32 B), its weight
# as a Python float in igraph's attribute list (32 B) and the graph's own arrays. Fitted to HippoRAG v1's run at
# MuSiQue size: 36.1M edges, 2.6 GiB above the rest of the estimate, which counts the dataset's triples (0.78 GiB)
# as records (docs/scale.md, "Every method at full size").
GRAPH_EDGE_BYTES = 78
# Edges a phrase before the corpus's graph or phrase vectors are cached: the bundled MuSiQue sample's graph (16,227
# phrases, 22,822 relation and synonym edges; MiniLM, synonym_threshold 0.8). A corpus with more synonyms has more:
# the generated MuSiQue-size corpus's pseudo-words give 24.4 a phrase, so its first build is priced low until its
# phrase vectors are cached (graph_edges_estimate).
EDGES_PER_PHRASE = 1.4


@dataclass
class HippoRAGSettings(Settings):
    """The ``hipporag`` group (each field's default and its source in the reference code declared here), placed at the top-level ``hipporag`` by agent=hipporag and agent=hipporag_ircot: the schema,
    :class:`HippoRAG`'s settings and its describe(). HippoRAG §3 (Gutiérrez et al., 2024) as GEAR §6.1 re-ran it."""

    config_key: ClassVar[str] = "hipporag"

    _target_: str = "gear_repro.methods.hipporag.retriever.HippoRAG"
    # v1 (legacy branch: NER -> phrase linking -> PPR over phrases) | v2 (HippoRAG 2, main branch: fact linking,
    # passage nodes)
    version: HippoRAGVersion = HippoRAGVersion.v1
    # PPR damping (probability of following an edge): 0.5 in run_hipporag_main_exps.sh and v2's default; v1 code's 0.1
    damping: float = num(0.5, gt=0, lt=1)
    node_specificity: bool = True  # reset weight of a linked node = 1/|P_i| (v1 hipporag.py node_specificity=True)
    # phrase keys: hipporag (processing_phrases: lower, non-alphanumerics -> space, squeeze) | entity (GEAR's key)
    normalisation: PhraseNormalisation = PhraseNormalisation.hipporag
    synonyms: bool = True  # synonym edges (graph_type facts_and_sim in the scripts); false = facts-only graph
    # encoder cosine of a synonym edge (--sim_threshold 0.8; v2 synonymy_edge_sim_threshold). The reference scored
    # ColBERTv2's self-normalised MaxSim or Contriever's cosine, a different scale
    # (benchmarks/bench_hipporag_synonyms.py shows 0.8/0.85/0.9)
    synonym_threshold: float = num(0.8, ge=-1, le=1)
    synonym_top_k: int = num(100, ge=1)  # synonyms kept per phrase (the reference stops after ~100 of 2047 neighbours)
    # alphanumeric characters a phrase needs for synonyms: > 2 (create_graph.py)
    synonym_min_alnum: int = num(3, ge=0)
    # synonym kNN: exact (all pairs, O(N^2)) | ann (faiss k-means cells; the reference's kNN was faiss too,
    # RetrievalModule.py:251-335) | auto: exact below synonym_auto_min_phrases phrases (every bundled sample), else ann
    synonym_search: SynonymSearch = SynonymSearch.auto
    synonym_auto_min_phrases: int = num(100_000, ge=0)  # auto: exact below this many phrases
    synonym_nlist: int | None = num(None, ge=1)  # ann: k-means cells; null = 4·sqrt(N), at most N/39
    synonym_nprobe: int = num(64, ge=1)  # ann: nearest cells each cell is searched against (>= nlist: exact)
    # no entity/fact found: uniform (v1 hipporag.py:232-233, 1/N each, ties in descending corpus order :264) |
    # retriever (the run's base retriever, e.g. BM25; as v2's dense fallback)
    no_entity_fallback: NoEntityFallback = NoEntityFallback.uniform
    linking_top_k: int = num(5, ge=1)  # v2 only: facts and phrases seeding PPR (v2 linking_top_k=5)
    passage_node_weight: float = num(0.05, ge=0)  # v2 only: reset weight factor of passage nodes (v2's 0.05)
    ner_params: dict[str, Any] = field(default_factory=dict)  # llm.chat kwargs of the query NER call
    # the query NER asks for the API's JSON mode (response_format {"type": "json_object"}): null = auto: on for an
    # LLM whose server the harness does not start (llm=openai / openai_compatible), as the reference's OpenAI client
    # (named_entity_extraction_parallel.py:47-51), off for the harness-started llama.cpp server (llm=local / tiny), as
    # the reference's local clients (:52-55) and because JSON mode made the 1.5B model's greedy decoding loop
    ner_json: bool | None = None
    cache: bool = True  # cache the built graph at $GEAR_CACHE/hipporag/graph-<content hash>.npz
    block_rows: int | None = num(None, ge=1)  # synonym kNN query rows per block (null = 256 MiB of similarities)
    # synonym/linking encoder: null = the run's embedder | a model name | an embedder node (checked as one); the
    # wiring builds it and hands the object over as HippoRAG's ``encoder``
    encoder: Any = field(default=None, metadata={"group": "embedder"})
    # v1 passages with equal scores (e.g. all at 0, out of the seeds' reach): reference (descending corpus order,
    # v1 hipporag.py:264 argsort(kind='mergesort')[::-1]) | corpus (ascending)
    tie_order: TieOrder = TieOrder.reference
    # before the synonym search of a graph build, price the graph from the phrase vectors just encoded and stop
    # (their encode cached) if it would not fit in memory (follows run.capacity_check; changes no result)
    capacity_check: bool = True


def graph_edges_estimate(s: HippoRAGSettings, phrases: Sequence[str], triples: int) -> tuple[int, str]:
    """The phrase graph's edges before it is built, and how they were found: those of a cached graph of as many
    phrases (:func:`cached_graph_edges`); else at most one relation pair a triple (v2: three, with a passage's edges
    to its triples' subject and object), and with ``synonyms`` the synonym entries estimated from the phrases'
    cached vectors (:func:`sampled_synonym_entries`; each entry at most an edge), or without them
    :data:`EDGES_PER_PHRASE` a phrase."""
    if (cached := cached_graph_edges(len(phrases))) is not None:
        return cached, "the cached graph's"
    per_triple, what = (3, "three a triple") if s.version is HippoRAGVersion.v2 else (1, "one a triple")
    if not s.synonyms:
        return per_triple * triples, f"at most {what}, no synonym edges"
    if maps := cached_phrase_vectors(phrases):
        return sampled_graph_edges(s, phrases, maps, per_triple * triples, "cached vectors", what)
    return round(len(phrases) * EDGES_PER_PHRASE), f"{EDGES_PER_PHRASE} a phrase assumed"


def synonym_hints(s: HippoRAGSettings) -> list[str]:
    """The settings that give the phrase graph fewer synonym edges (most of its edges at full size)."""
    return [f"a higher hipporag.synonym_threshold (now {s.synonym_threshold})",
            f"a lower hipporag.synonym_top_k (now {s.synonym_top_k})", "hipporag.synonyms=false (no synonym edges)"]


def sampled_graph_edges(s: HippoRAGSettings, phrases: Sequence[str], vectors: Sequence[np.ndarray], triples: int,
                        which: str, per_triple: str = "one a triple") -> tuple[int, str]:
    """The ``triples`` bound (``per_triple``) and the synonym entries estimated from the phrases' ``vectors`` (the
    largest over several encoders' matrices: :func:`sampled_synonym_entries`), each entry at most an edge; and how,
    naming the vectors as ``which``. A cache file's estimate is sampled once per process (:func:`_sampled_entries`):
    the start-up check and the graph build's price the same file, and the second pays neither the sampling nor the
    phrases' eligibility (~1 s a million phrases)."""
    mask = cache(lambda: np.fromiter((alnum_length(p) >= s.synonym_min_alnum for p in phrases), bool, len(phrases)))
    entries, rows = max(_sampled_entries(s, m, mask) for m in vectors)
    return triples + entries, (f"at most {per_triple} and ~{entries:,} synonym entries, estimated from "
                               f"{rows:,} phrases' {which}")


_SAMPLED: dict[tuple, tuple[int, int]] = {}  # (cache file, its size and time, synonym settings) -> entries, rows


def _sampled_entries(s: HippoRAGSettings, vectors: np.ndarray,
                     eligible: Callable[[], np.ndarray]) -> tuple[int, int]:
    """:func:`sampled_synonym_entries` of ``vectors`` and the rows it sampled, remembered for a memory-mapped cache
    file (its name, size and modification time; the file is keyed by the phrases, so it fixes the ``eligible``
    mask, asked for only when sampling): a build whose vectors were cached at start-up samples them once, not
    again at the build's check (37-65 s at MuSiQue size)."""
    name, base = None, vectors
    while base is not None and name is None:  # np.asarray of a memory map is a view of it
        name = base.filename if isinstance(base, np.memmap) else None
        base = getattr(base, "base", None)
    key = None
    if name and os.path.exists(name):
        st = os.stat(name)
        key = (str(name), st.st_size, st.st_mtime_ns, s.synonym_threshold, s.synonym_top_k, s.synonym_min_alnum)
        if key in _SAMPLED:
            return _SAMPLED[key]
    mask = eligible()
    found = (sampled_synonym_entries(vectors, s.synonym_threshold, s.synonym_top_k, mask),
             min(SYNONYM_SAMPLE_ROWS, int(mask.sum())))
    if key is not None:
        _SAMPLED[key] = found
    return found


class HippoRAG:
    """HippoRAG v1/v2 over the run's dataset triples; a retriever (``retrieve(query, k) -> Ranking``) that also
    reports its trace (``search``). Built by the wiring (once per run) from ``configs/hipporag/*.yaml``.

    Args (settings, **given: :class:`HippoRAGSettings`, an instance or its fields as keywords):
        passages: the corpus C (the graph's passage nodes; ``uniform`` fallback order).
        triples: the OpenIE triples the phrase graph is built from.
        embedder: query embeddings (and the phrase encoder when ``encoder`` is None).
        llm: the query NER client (v1; None for v2, which makes no LLM call).
        fallback_retriever: the run's base retriever for ``no_entity_fallback=retriever`` (None otherwise).
        passage_collection / triple_collection: v2's passage and triple vectors (None for v1).
        encoder: the phrase encoder of the synonym edges and of v1's entity linking (``hipporag.encoder``, built
            by the wiring; None = ``embedder``). The reference used ColBERTv2 or Contriever (not installable
            here); v2's fact and passage scores always use the run's embedder (the collections' vectors).

    ``ner_json`` (:func:`ner_json_mode`) on adds ``response_format={"type": "json_object"}`` to ``ner_params``.
    """

    name = "hipporag"
    k_dependent = False  # PPR scores do not depend on k
    needs_vectors = True  # v2 scores passage and triple vectors; v1's dense fallback may

    def __init__(self, passages: Sequence[Passage], triples: Sequence[Triple] | None, embedder: Embedder,
                 llm: LLM | None = None, fallback_retriever: Retriever | None = None,
                 passage_collection: Collection | None = None, triple_collection: Collection | None = None,
                 encoder: Embedder | None = None, settings: HippoRAGSettings | None = None, **given: Any):
        s = self.settings = HippoRAGSettings.of(settings, "HippoRAG", **given)
        version, normalisation = s.version.value, s.normalisation.value
        self.reverse_ties = s.tie_order is TieOrder.reference
        self.passages = passages
        self.triples = triples
        self.embedder = embedder
        self.llm = llm
        self.fallback_retriever = fallback_retriever
        self.passage_collection = passage_collection
        self.triple_collection = triple_collection
        self.version = version
        self.damping = float(s.damping)
        self.node_specificity = s.node_specificity
        self.normalisation = normalisation
        self.no_entity_fallback = s.no_entity_fallback.value
        self.linking_top_k = s.linking_top_k
        self.passage_node_weight = float(s.passage_node_weight)
        self.ner_params = as_dict(s.ner_params)
        self.ner_json = ner_json_mode(llm, s.ner_json)
        if self.ner_json and "response_format" not in self.ner_params:
            self.ner_params = {**self.ner_params, "response_format": dict(JSON_MODE)}
        if llm is not None:  # v1's query NER (v2 calls no LLM)
            llm.check_params(self.ner_params, "hipporag.ner_params")
        self.cache = s.cache
        # the phrase graph's settings: its cache key (cached_phrase_graph)
        self.graph_settings = {"version": version, "normalisation": normalisation, "synonyms": s.synonyms,
                               "synonym_threshold": float(s.synonym_threshold), "synonym_top_k": s.synonym_top_k,
                               "synonym_min_alnum": s.synonym_min_alnum, "synonym_search": s.synonym_search.value,
                               "synonym_auto_min_phrases": s.synonym_auto_min_phrases,
                               "synonym_nlist": s.synonym_nlist, "synonym_nprobe": s.synonym_nprobe}
        self.block_rows = s.block_rows
        self.encoder = encoder if encoder is not None else embedder

    @staticmethod
    def capacity_collections(node: Any, triples: Sequence[Triple]) -> dict[str, OwnMatrix]:
        """What the build embeds beyond the passages, for the start-up capacity check
        (:mod:`gear_repro.pipeline.capacity`; ``node``: the ``hipporag`` config): the phrase nodes (distinct
        subject and object keys under ``normalisation`` of the facts with both), their vectors a memory map of the
        cache file (read by the synonym search and by v1's entity linking as file pages the kernel can drop), with
        :data:`PHRASE_RECORD_BYTES` of objects each (HippoRAG 2 without synonym edges embeds none, and its build
        holds :data:`FACT_PHRASE_BYTES` a phrase), and the phrase graph at :data:`GRAPH_EDGE_BYTES` an edge
        (:func:`graph_edges_estimate`). Counted at the run's embedder's dimension (a ``hipporag.encoder`` of another
        size is not). One pass of :func:`phrase_key` over the triples' subjects and objects: ~3.5 CPU-s at
        MuSiQue's 1.5M triples, paid at each start (the graph build computes the keys again on its first run only:
        its graph is cached)."""
        s = HippoRAGSettings.of(node, "HippoRAG")
        phrases: set[str] = set()
        for t in triples:
            if (h := phrase_key(t.subject, s.normalisation.value)) and (o := phrase_key(t.object, s.normalisation.value)):
                phrases.update((h, o))
        names = sorted(phrases)
        edges, how = graph_edges_estimate(s, names, len(triples))
        graph = (f"hipporag phrase graph ({edges:,} edges, {how})", edges * GRAPH_EDGE_BYTES)
        chars = sum(map(len, names))
        if s.version is HippoRAGVersion.v2 and not s.synonyms:  # v2 links by fact vectors: no phrase is embedded
            return {"hipporag phrases": OwnMatrix(0, 0, False, 0, also=(
                f"hipporag phrases ({len(names):,}, not embedded without synonyms) and {graph[0]}",
                len(names) * FACT_PHRASE_BYTES + 2 * chars + graph[1]))}
        return {"hipporag phrases": OwnMatrix(len(names), chars, False, PHRASE_RECORD_BYTES, also=graph)}

    @staticmethod
    def capacity_hints(node: Any, mats: dict[str, OwnMatrix], dim: int) -> list[str]:
        """The settings that make the phrase graph smaller, named when the capacity check refuses the run."""
        s = HippoRAGSettings.of(node, "HippoRAG")
        return synonym_hints(s) if s.synonyms and "hipporag phrases" in mats else []

    # -- offline ----------------------------------------------------------------------------------------
    @property
    def encoder_id(self) -> str:
        return self.encoder.model_id

    def _embed_corpus(self, texts: list[str]) -> np.ndarray:
        # a memory map of the cache file: 4.8M phrases at 2Wiki's size are 6.9 GiB of float32 (docs/scale.md)
        return mapped_matrix(self.encoder, texts, "hipporag phrases")

    @cached_property
    def graph(self) -> PhraseGraph:
        # the graph build's bars follow the encoder's (embedder.show_progress: run.progress by default)
        # the build encodes phrases only for its synonym search, so a graph without synonyms is never priced here
        g = cached_phrase_graph(self.triples or [], [p.id for p in self.passages],
                                self._embed_and_price if self.settings.capacity_check else self._embed_corpus,
                                self.graph_settings,
                                embedder_id=self.encoder_id, cache=self.cache, block_rows=self.block_rows,
                                progress=bool(getattr(self.encoder, "show_progress", False)))
        log.info("HippoRAG graph: %s", g.stats)
        return g

    def _embed_and_price(self, phrases: list[str]) -> np.ndarray:
        """The phrases' vectors, then the memory check the start-up estimate could not make before they existed: the
        graph priced from them (:func:`sampled_graph_edges`, :data:`GRAPH_EDGE_BYTES` an edge) beyond what the
        build holds already (:func:`~gear_repro.utils.memory.check_build`), before the synonym search. A
        corpus with more synonyms than the bundled sample's rate otherwise ran out of memory an hour into its build
        (docs/scale.md); stopped here, its encode is cached and the next start prices the graph from it."""
        vectors = self._embed_corpus(phrases)
        s = self.settings
        edges, how = sampled_graph_edges(s, phrases, [vectors], len(self.triples or ()), "vectors")
        check_build(edges * GRAPH_EDGE_BYTES, f"HippoRAG's phrase graph ({edges:,} edges, {how})", synonym_hints(s))
        return vectors

    @cached_property
    def phrase_vectors(self) -> np.ndarray:
        return self._embed_corpus(self.graph.phrases)

    @cached_property
    def specificity(self) -> np.ndarray:
        counts = self.graph.node_specificity_counts()
        return np.where(counts > 0, 1.0 / np.maximum(counts, 1), 1.0)

    def describe(self) -> dict[str, Any]:
        return {**self.settings.asdict(), "ner_json": self.ner_json, "encoder": self.encoder.describe()["model"],
                "graph": self.graph.stats}

    # -- online -----------------------------------------------------------------------------------------
    def retrieve(self, query: str, k: int) -> Ranking:
        return self.search(query, k).ranking

    def retrieve_many(self, queries: list[str], k: int) -> list[Ranking]:
        return [self.retrieve(q, k) for q in queries]

    def search(self, query: str, k: int) -> SearchResult:
        """Top-``k`` passages for ``query`` and the trace (entities, links, fallback, timings in ms)."""
        t0 = time.perf_counter()
        res = self._search_v2(query, k) if self.version == "v2" else self._search_v1(query, k)
        ner = res.trace.get("ner") or {}
        res.trace["counters"] = {"hipporag_searches": 1, "hipporag_no_entity": int("fallback" in res.trace),
                                 "hipporag_ner_failed": int(bool(ner.get("failed"))),
                                 "hipporag_ner_repaired": int(bool(ner.get("repaired")) and not ner.get("failed"))}
        res.trace["total_ms"] = round(1000 * (time.perf_counter() - t0), 3)
        return res

    def ner(self, query: str) -> tuple[list[str], dict[str, Any]]:
        """HippoRAG's query NER (stage ``ner``); the LLM layer caches the reply."""
        from gear_repro.llm.parsing import parse_named_entities
        from gear_repro.prompts import render

        reply = self.llm.chat(render("hipporag_ner", question=query), stage="ner", **self.ner_params)
        parsed = parse_named_entities(reply.text)
        return parsed.entities, {"reply": reply.text, "failed": parsed.failed, "repaired": parsed.repaired,
                                 "error": parsed.error}

    def _fallback(self, query: str, k: int, trace: dict[str, Any]) -> SearchResult:
        trace["fallback"] = self.no_entity_fallback
        if self.no_entity_fallback == "uniform":
            # HippoRAG legacy@b144c46 src/hipporag.py:232-233 (1/N each) and :264 (mergesort then [::-1]:
            # tied passages in descending corpus order)
            ids = [p.id for p in self.passages]
            scores = np.full(len(ids), 1.0 / max(1, len(ids)))
            return SearchResult(rank_scores(ids, scores, k, reverse_ties=True), trace)
        return SearchResult(self.fallback_retriever.retrieve(query, k), trace)

    def _scores_from_ppr(self, reset: np.ndarray, trace: dict[str, Any]) -> np.ndarray:
        t = time.perf_counter()
        ppr = self.graph.personalized_pagerank(reset, self.damping)
        trace["ppr_ms"] = round(1000 * (time.perf_counter() - t), 3)
        return ppr

    def _search_v1(self, query: str, k: int) -> SearchResult:
        g = self.graph
        t = time.perf_counter()
        raw, ner_info = self.ner(query)
        entities = list(dict.fromkeys(e for e in (phrase_key(x, self.normalisation) for x in raw) if e))
        trace: dict[str, Any] = {"entities": entities, "ner": ner_info, "ner_ms": round(1000 * (time.perf_counter() - t), 3)}
        if not entities or g.n_phrases == 0:
            return self._fallback(query, k, trace)
        t = time.perf_counter()
        sims = self.encoder.encode(entities) @ self.phrase_vectors.T
        linked = np.argmax(sims, axis=1)
        reset = np.zeros(g.n_nodes)
        for i in linked:
            reset[i] = self.specificity[i] if self.node_specificity else 1.0
        trace["linked"] = [[e, g.phrases[int(i)], round(float(sims[r, i]), 4)] for r, (e, i) in enumerate(zip(entities, linked, strict=True))]
        trace["link_ms"] = round(1000 * (time.perf_counter() - t), 3)
        ppr = self._scores_from_ppr(reset, trace)
        scores = min_max(np.asarray(g.passage_phrase @ ppr[: g.n_phrases]).ravel())
        # passages out of the seeds' reach tie at 0: hipporag.py:264 lists them in descending corpus order
        return SearchResult(rank_scores(g.passage_ids, scores, k, reverse_ties=self.reverse_ties), trace)

    @cached_property
    def _facts(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(triple ids, subject node, object node) aligned with the triple collection's vectors (-1 = no node)."""
        coll = self.triple_collection
        by_id = {t.id: t for t in self.triples or []}
        idx = self.graph.phrase_index
        subj = np.array([idx.get(phrase_key(by_id[i].subject, self.normalisation), -1) for i in coll.ids])
        obj = np.array([idx.get(phrase_key(by_id[i].object, self.normalisation), -1) for i in coll.ids])
        return list(coll.ids), subj, obj

    def _search_v2(self, query: str, k: int) -> SearchResult:
        g = self.graph
        trace: dict[str, Any] = {}
        t = time.perf_counter()
        ids, subj, obj = self._facts
        q = self.embedder.encode([query])[0]
        fact_scores = min_max(matrix_scores(self.triple_collection.vectors(), q))
        top = np.lexsort((np.arange(len(fact_scores)), -fact_scores))[: self.linking_top_k]
        weights, occurs = np.zeros(g.n_phrases), np.zeros(g.n_phrases)
        for f in top:
            for node in {int(subj[f]), int(obj[f])} - {-1}:
                weights[node] += fact_scores[f] * (self.specificity[node] if self.node_specificity else 1.0)
                occurs[node] += 1
        weights = np.divide(weights, occurs, out=np.zeros_like(weights), where=occurs > 0)
        keep = np.lexsort((np.arange(g.n_phrases), -weights))[: self.linking_top_k]
        phrase_reset = np.zeros(g.n_phrases)
        phrase_reset[keep] = weights[keep]
        trace["facts"] = [[ids[int(f)], round(float(fact_scores[f]), 4)] for f in top]
        trace["seeds"] = [[g.phrases[int(i)], round(float(weights[i]), 4)] for i in keep if weights[i] > 0]
        trace["link_ms"] = round(1000 * (time.perf_counter() - t), 3)
        if not trace["seeds"]:
            return self._fallback(query, k, trace)
        dense = min_max(matrix_scores(self.passage_collection.vectors(), q))
        reset = np.concatenate([phrase_reset, dense * self.passage_node_weight])
        ppr = self._scores_from_ppr(reset, trace)
        return SearchResult(rank_scores(g.passage_ids, ppr[g.n_phrases:], k), trace)
