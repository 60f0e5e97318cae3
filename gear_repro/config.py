"""Typed configs: structured-config schemas (dataclasses) of every config group and plain node, registered in Hydra's
ConfigStore; custom resolvers; the start-up validation; secret redaction.

The pattern (docs/ARCHITECTURE.md "Adding a method"): every config group option starts its defaults list
with the group's schema, e.g. ``configs/agent/gear.yaml``::

    defaults:
      - /agent_gear_schema@_here_  # GearAgentSchema below, stored as "agent_gear_schema" (schema_name())
      - _self_

and the plain top-level nodes (``run``, ``graph``, ``extraction``, ``report``) get theirs from
``configs/config.yaml`` (``- /run_schema@run``). The schemas are stored at the ConfigStore's root, in no config
group: ``gear-repro --help`` lists the groups' options, which are the user's choices, and a schema is none. Hydra merges the YAML onto the schema while composing, so a misspelt key or a value
outside an Enum fails at composition with Hydra's own message (naming the full key), before anything runs;
:func:`validate` then checks, through the same schemas, what composition cannot: keys added with ``+``, numeric
ranges (:func:`~gear_repro.utils.settings.num`) and run-level rules. A new method adds a dataclass here
(``_target_`` + its arguments) and one entry in :data:`GROUP_SCHEMAS`.

Choices are :class:`~gear_repro.utils.settings.Choice` Enums declared beside the code that reads them (the method
or module) and imported here; classes that are also built directly (tests, scripts) coerce their arguments with
:func:`~gear_repro.utils.settings.choice`, which raises :class:`ConfigError` naming the setting. A component whose
settings are a dataclass of its own (``BeamConfig``, ``GrieverSettings``) is its schema (or its schema's base): one
declaration of each field.
"""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue, OmegaConfBaseException

from gear_repro.backends.ann import DenseSettings
from gear_repro.backends.es_requests import MAX_WINDOW, BM25Settings, BulkSettings, KnnSettings
from gear_repro.backends.memory import Analyzer, BM25Variant, DenseDtype
from gear_repro.backends.tokenize import Snowball, StopWords
from gear_repro.core.triple_graph import Adjacency, HubPolicy
from gear_repro.data.dataset import MissingGold, Subset
from gear_repro.embedding.precision import Precision, QueryPrecision
from gear_repro.embedding.runtimes import EncoderBackend
from gear_repro.evaluation.metrics import AnswerMetric
from gear_repro.llm.cache import LOCK_TIMEOUT_RANGE, LLMCacheMode
from gear_repro.llm.client import PARAM_RANGES, REPLY_BYTES_RANGE
from gear_repro.llm.server import PROMPT_CACHE_BYTES, PROMPT_CACHE_BYTES_RANGE, PromptCache
from gear_repro.methods.gear.agent import GistDocs, GistEmpty, GistFirstRound, QueryChoice
from gear_repro.methods.gear.beam_search import BeamConfig
from gear_repro.methods.gear.expansion import FusionOrder, OnNoProximal
from gear_repro.methods.griever.retriever import GrieverSettings
from gear_repro.methods.hipporag.phrase_graph import HippoRAGVersion, PhraseNormalisation
from gear_repro.methods.hipporag.retriever import NoEntityFallback, TieOrder
from gear_repro.methods.ircot import IRCoTEmptyThought, IRCoTMerge, IRCoTRetrieverKind, IRCoTThought
from gear_repro.methods.t2rag.settings import (
    T2RAGAnswerParse,
    T2RAGDecomposeParse,
    T2RAGDecomposeRetry,
    T2RAGFuzzyMatch,
    T2RAGOnNoTriplets,
    T2RAGPromptText,
    T2RAGPropositionPassage,
    T2RAGQueryPlaceholders,
    T2RAGQuestionQuery,
    T2RAGRanking,
    T2RAGReading,
    T2RAGResolvedUpdate,
    T2RAGResolveParse,
)
from gear_repro.qa.reader import QAMode
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, cache_dir
from gear_repro.utils.secrets import MASK, is_header_key, is_query_key, is_secret_key, mask_query, redact_text
from gear_repro.utils.settings import Choice, check_number, choice, enum_of, num, refuse_unknown

__all__ = ["GROUP_SCHEMAS", "NODE_SCHEMAS", "choice", "group_config", "num", "redact", "to_container", "validate"]


class Stage(Choice):
    """What a run does (the top-level ``stage``; the runner's start-up)."""

    retrieve = "retrieve"
    index = "index"  # build the indexes only
    extract = "extract"  # offline triple extraction (K.1)


# -- schemas of the plain nodes ---------------------------------------------------------------------------
@dataclass
class DatasetSchema:
    name: str = "musique_sample"
    paper_name: str = "MuSiQue"  # the dataset's column name in the paper's tables
    path: str = "data/musique_sample"
    limit: int | None = num(None, ge=1)  # first N questions (the corpus stays whole); the subset size with stratified
    subset: Subset = Subset.first  # first N | stratified (balanced over hop types; data/subset.py)
    subset_seed: int = num(0, ge=0)  # seed of the stratified order (same ids for every method; larger limits extend it)
    limit_passages: int | None = num(None, ge=1)  # first N passages (extraction stage only)
    triples_file: str | None = "triples.jsonl"
    missing_gold: MissingGold = MissingGold.warn
    # a folder whose prepare_stats.json names no known source dataset runs (under this group) only when true
    allow_unknown_source: bool = False
    max_rounds: int = num(4, ge=1)  # GEAR agent rounds (MuSiQue 4, 2Wiki/HotpotQA 2; §6.3)
    # EM/F1 script: musique | hotpotqa | twowiki (2Wiki's); null = from paper_name (others: hotpotqa). docs/readings.md
    answer_metric: AnswerMetric | None = None


@dataclass
class RunSchema:
    ks: list[int] = field(default_factory=lambda: [5, 10, 15])
    matched_k: bool = True  # single-step: base k = evaluated rank (Table 2)
    base_k: int | None = num(None, ge=1)  # base k otherwise (null = max(ks); a set value must be >= max(ks))
    save_depth: int = num(100, ge=1)  # ids of the final ranking kept in predictions.jsonl
    resume: bool = True
    progress: bool = True
    fail_fast: bool = False  # re-raise a question's error instead of logging and counting it
    allow_errors: bool = False  # false: a run with errored questions exits non-zero (they are scored as misses)
    workers: int = num(1, ge=1)  # questions in flight; their LLM waits overlap (docs/llm.md, "Concurrency")
    capacity_check: bool = True  # refuse at start-up a run whose embedding caches exceed free disk/memory


@dataclass
class GraphSchema:
    """``graph:`` -> :class:`gear_repro.core.triple_graph.TripleIndex` (§4.2 entity adjacency)."""

    max_degree: int | None = num(None, ge=1)
    hub_policy: HubPolicy = HubPolicy.truncate
    adjacency: Adjacency = Adjacency.records
    link_empty_entities: bool = False
    hub_slices_min_degree: int | None = num(256, ge=1)  # entity-ordered float16 copies of larger hubs (core/hub_slices.py)


@dataclass
class ExtractionSchema:
    """``extraction:`` (stage=extract, K.1): LLM request params and the progress bar."""

    params: dict[str, Any] = field(default_factory=dict)
    progress: bool | None = None  # null = run.progress


@dataclass
class ReportSchema:
    """``report:`` where a run's rows go in the paper's tables (gear_repro/reporting/runs.py). ``paper`` and
    ``qa_paper`` must name a paper of paper_results.csv (checked at start-up); tables and settings may also name a
    block of our own (e.g. "T2RAG Table 2" for an ablation), so they are free text."""

    table: str | None = None  # recall metrics' table (null: Table 2)
    qa_table: str | None = None  # EM/F1's table (null: Table 3)
    method: str | None = None  # row label (null: the method's own)
    setting: str | None = None  # the paper's setting when its table has several
    paper: str = "GEAR"  # paper whose numbers stand beside ours
    labels: dict[str, str] = field(default_factory=dict)  # retriever name -> that paper's row label
    # config key -> value the paper's row presumes (a preset's ``method``); a run that differs is "<method> on <its base>"
    paper_config: dict[str, Any] = field(default_factory=dict)
    # config keys the preset's rows vary and ``method`` names (Table 4: beam.diversity); any other paper setting a
    # run differs in is added to ``method`` ("w/ diversity (fast scorer)")
    axes: list[str] = field(default_factory=list)
    qa_paper: str | None = None  # paper of the EM/F1 numbers beside ours (null: paper)
    qa_paper_table: str | None = None
    qa_setting: str | None = None


# -- schemas of the instantiated groups (``_target_`` + constructor arguments) ----------------------------
@dataclass
class SingleStepSchema:
    _target_: str = "gear_repro.methods.single.SingleStep"
    name: str = "single"
    output_depth: int | None = num(None, ge=1)
    save_depth: int | None = num(None, ge=0)  # ${run.save_depth}; 0 or null: max(run.ks) (run.save_depth has its own >= 1)


@dataclass
class GearAgentSchema:
    _target_: str = "gear_repro.methods.gear.agent.GearAgent"
    name: str = "gear"
    base_k: int = num(10, ge=1)
    max_rounds: int = num(MISSING, ge=1)  # ${dataset.max_rounds}
    query_for_base: QueryChoice = QueryChoice.rewritten
    query_for_beam: QueryChoice = QueryChoice.original
    reader_memory: bool = True
    read_with: QueryChoice = QueryChoice.original
    gist_docs: GistDocs = GistDocs.expanded
    gist_first_round: GistFirstRound = GistFirstRound.read
    gist_k: int | None = num(None, ge=1)  # null = the whole list (pseudocode); >= 1 = its top gist_k
    gist_empty: GistEmpty = GistEmpty.skip
    dedupe_memory: bool = False  # Eq. 5 / pseudocode gear.py:11 extend keeps repeats
    reason_last_round: bool = True
    passage_link: bool = True
    passage_link_k: int | None = num(None, ge=1)
    k_rrf: int = num(60, ge=0)
    output_depth: int | None = num(None, ge=1)
    round_ranking_depth: int | None = num(None, ge=1)  # ${run.save_depth}
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class NoExpansionSchema:
    _target_: str = "gear_repro.methods.gear.expansion.NoExpansion"
    name: str = "none"


@dataclass
class NaiveGESchema:
    _target_: str = "gear_repro.methods.gear.expansion.NaiveGE"
    name: str = "naive"
    k_rrf: int = num(60, ge=0)
    output_depth: int | None = num(None, ge=1)
    trace_beams: int | None = num(None, ge=0)
    fusion_order: FusionOrder = FusionOrder.base_first


@dataclass
class SyncGESchema(NaiveGESchema):
    _target_: str = "gear_repro.methods.gear.expansion.SyncGE"
    name: str = "sync"
    prompt: str = "reader"
    memory_prompt: str = "reader_gist"
    max_proximal: int | None = num(None, ge=1)
    on_no_proximal: OnNoProximal = OnNoProximal.base
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMServerSchema:
    model_path: str = "qwen"
    n_threads: int = num(2, ge=1)
    n_ctx: int = num(8192, ge=1)
    host: str = "127.0.0.1"
    port: int | None = num(None, ge=1, le=65535)
    startup_timeout_s: float = num(300.0, gt=0)
    extra_args: list[str] = field(default_factory=list)
    prompt_cache: PromptCache = PromptCache.none  # ram: keep earlier prompts' KV states (llm/server.py)
    prompt_cache_bytes: int = num(PROMPT_CACHE_BYTES, ge=PROMPT_CACHE_BYTES_RANGE["ge"], le=PROMPT_CACHE_BYTES_RANGE["le"])


@dataclass
class LLMSchema:
    _target_: str = "gear_repro.llm.LLMClient"
    model: str = MISSING
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float | None = num(0.0, **PARAM_RANGES["temperature"])  # also the range of a *params temperature
    max_tokens: int | None = num(None, **PARAM_RANGES["max_tokens"])
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = num(120.0, gt=0)
    max_reply_bytes: int | None = num(16 * 2**20, **REPLY_BYTES_RANGE)  # a longer response body fails the call (llm/deadline.py)
    max_retries: int = num(4, ge=0)
    backoff_base_s: float = num(1.0, ge=0)
    backoff_max_s: float = num(30.0, ge=0)
    concurrency: int = num(4, ge=1)  # requests in flight at most (chat_many, run.workers questions)
    cache: bool = True
    cache_dir: str | None = None
    cache_mode: LLMCacheMode = LLMCacheMode.auto  # SQLite journal of the reply cache (llm/cache.py)
    record_prompts: bool = True  # keep each call's messages and reply in predictions.jsonl (the explorer shows them)
    cache_lock_timeout_s: float = num(300.0, **LOCK_TIMEOUT_RANGE)  # one cache access's wait for a lock (llm/cache.py)
    check_endpoint: bool = True  # start-up: a TCP connection to the endpoint (or its proxy) must open (llm/client.py)
    server: LLMServerSchema | None = None
    context_window: int | None = num(None, ge=1)  # model's window in tokens (prompt + reply); null = unknown, no fitting


@dataclass
class QAReaderSchema:
    _target_: str = "gear_repro.qa.QAReader"
    top_k: int = num(5, ge=1)
    mode: QAMode = QAMode.retrieved
    prompt: str = "qa"
    prompt_no_passages: str = "qa_no_passages"
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class HippoRAGSchema:
    """The ``hipporag`` group (configs/hipporag/default.yaml documents each value and its source), placed at the
    top-level ``hipporag`` by agent=hipporag and agent=hipporag_ircot."""

    _target_: str = "gear_repro.methods.hipporag.retriever.HippoRAG"
    version: HippoRAGVersion = HippoRAGVersion.v1
    damping: float = num(0.5, gt=0, lt=1)
    node_specificity: bool = True
    normalisation: PhraseNormalisation = PhraseNormalisation.hipporag
    synonyms: bool = True
    synonym_threshold: float = num(0.8, ge=-1, le=1)
    synonym_top_k: int = num(100, ge=1)
    synonym_min_alnum: int = num(3, ge=0)
    no_entity_fallback: NoEntityFallback = NoEntityFallback.uniform
    linking_top_k: int = num(5, ge=1)
    passage_node_weight: float = num(0.05, ge=0)
    ner_params: dict[str, Any] = field(default_factory=dict)
    ner_json: bool | None = None  # null = auto: JSON mode for an API LLM (llm.server null), off for the local server
    cache: bool = True
    block_rows: int | None = num(None, ge=1)
    # synonym/linking encoder: null = the run's embedder | a model name | an embedder node (checked as one)
    encoder: Any = field(default=None, metadata={"group": "embedder"})
    tie_order: TieOrder = TieOrder.reference


@dataclass
class T2RAGAgentSchema:
    """``configs/agent/t2rag.yaml`` (seed 002, §4.3, Alg. 1-2, §5.2; docs/t2rag.md). Registered in Hydra's
    ConfigStore as ``agent_t2rag_schema`` and named first in that file's defaults list, so a misspelt key or a
    wrong type fails at composition."""

    _target_: str = "gear_repro.methods.t2rag.method.T2RAGAgent"
    name: str = "t2rag"
    k: int = num(5, ge=1)  # unique passages per iteration (§5.2)
    max_iterations: int = num(3, ge=1)  # N (§5.2); 1 = "single round" ablation (Table 2)
    candidate_depth: int = num(200, ge=1)  # propositions per query before the global ranking (Alg. 2)
    with_passages: bool = True  # false = "w/o chunk" ablation (Table 2)
    reading: T2RAGReading = T2RAGReading.code  # which preset set the keys below (a label: t2rag | t2rag_paper)
    # the paper-vs-code keys: each preset gives all of them (code: t2rag.yaml, paper: t2rag_paper.yaml)
    question_query: bool = MISSING  # code true (question as an extra query) | paper false
    question_query_mode: T2RAGQuestionQuery = MISSING  # code substring | paper word
    carry_fuzzy: bool = MISSING  # code false (emptied) | paper true (Step 2.3)
    resolve_without_context: bool = MISSING  # code false (skipped) | paper true (Alg. 1)
    example_propositions_chars: int = num(MISSING, ge=0)  # code 1000 | paper 0 (= whole, App. E)
    decompose_retry: T2RAGDecomposeRetry = MISSING  # code simple | paper none
    on_no_triplets: T2RAGOnNoTriplets = MISSING  # code fail | paper answer
    prompt_text: T2RAGPromptText = MISSING  # code (TRAG.py's decomposition/resolve texts) | paper (App. E)
    decompose_parse: T2RAGDecomposeParse = MISSING  # code (TRAG.py:319-373) | paper lenient (our repairs)
    query_placeholders: T2RAGQueryPlaceholders = MISSING  # code (TRAG.py:466-471, 532) | paper strip
    resolve_parse: T2RAGResolveParse = MISSING  # code (TRAG.py:944-978, strict) | paper lenient (our repairs)
    resolved_update: T2RAGResolvedUpdate = MISSING  # code (TRAG.py:1231) | paper reclassify (by its '?')
    proposition_passage: T2RAGPropositionPassage = MISSING  # code (TRAG.py:196-210, last) | paper own
    fuzzy_match: T2RAGFuzzyMatch = T2RAGFuzzyMatch.placeholder
    stall_stop: bool = True  # stop when nothing is searchable, retrieved or new (stop = "stalled")
    answer: bool = True  # T²RAG's own answer (Step 3); false = qa_reader answers
    answer_parse: T2RAGAnswerParse = T2RAGAnswerParse.code
    ranking: T2RAGRanking = T2RAGRanking.rrf
    k_rrf: int = num(60, ge=0)
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class HippoRAGMethodSchema:
    """``configs/agent/hipporag.yaml`` (HippoRAG as GEAR re-ran it; settings in the ``hipporag`` group)."""

    _target_: str = "gear_repro.methods.hipporag.method.HippoRAGMethod"
    name: str = "hipporag"
    depth: int = num(100, ge=1)  # passages returned per question


@dataclass
class IRCoTAgentSchema:
    """``configs/agent/ircot.yaml`` and ``hipporag_ircot.yaml`` (IRCoT as HippoRAG runs it; docs/baselines.md)."""

    _target_: str = "gear_repro.methods.ircot.IRCoTAgent"
    name: str = "ircot"
    retriever: IRCoTRetrieverKind = IRCoTRetrieverKind.base
    top_k: int = num(10, ge=1)
    max_rounds: int = num(4, ge=1)
    demo_files: dict[str, str] = field(default_factory=dict)  # dataset paper name -> prompts/ircot_demos file
    demos: str = "musique"
    num_demo: int | None = num(1, ge=0)
    thought: IRCoTThought = IRCoTThought.full
    merge: IRCoTMerge = IRCoTMerge.raw
    demo_budget: int | None = num(None, ge=1)  # tokens; null = no budget (ircot_hipporag.py), 15000 = baselines/ircot.py
    cot_params: dict[str, Any] = field(default_factory=dict)
    round_ranking_depth: int | None = num(None, ge=1)
    empty_thought: IRCoTEmptyThought = IRCoTEmptyThought.retrieve
    title_prefixes: dict[str, str] = field(default_factory=dict)  # dataset paper name -> prefix of passage titles
    paper_name: str = "MuSiQue"


# -- retriever group: h_base (configs/retriever/) --------------------------------------------------------------
@dataclass
class BM25RetrieverSchema:
    _target_: str = "gear_repro.retrieval.BM25Retriever"
    name: str = "bm25"


@dataclass
class DenseRetrieverSchema:
    _target_: str = "gear_repro.retrieval.DenseRetriever"
    name: str = "sbert"


@dataclass
class HybridRetrieverSchema:
    _target_: str = "gear_repro.retrieval.HybridRetriever"
    name: str = "hybrid"
    fusion_depth: int = num(100, ge=1)  # depth of each list before fusion; >= max(run.ks) (validate)
    k_rrf: int = num(60, ge=0)


@dataclass
class ComposedRetrieverSchema:
    _target_: str = "gear_repro.retrieval.ComposedRetriever"
    name: str = "composed"
    candidates: int = num(100, ge=1)  # BM25 candidates re-scored densely (GRIEVER §4.2.2); >= max(run.ks) (validate)


@dataclass
class GrieverRetrieverSchema(GrieverSettings):
    """``configs/retriever/griever*.yaml``: GRIEVER's settings (declared once, by ``GrieverSettings``), the retriever
    keys, and the retriever config of tripleLink/passageLink (checked as an option of the retriever group)."""

    _target_: str = "gear_repro.methods.griever.GrieverRetriever"
    name: str = "griever"
    triple_retriever: Any = field(default=None, metadata={"group": "retriever"})


# -- backend group: index engines (configs/backend/) -----------------------------------------------------------
@dataclass
class MemoryBM25Schema:
    k1: float = num(1.2, ge=0)
    b: float = num(0.75, ge=0, le=1)
    method: BM25Variant = BM25Variant.lucene
    # null, null = Elasticsearch's default standard analyzer (GEAR App. B.1), the default of every method
    stopwords: StopWords | None = None  # bm25s stop-word list (null: keep every token)
    stemmer: Snowball | None = None  # Snowball language (PyStemmer); null: no stemming
    analyzer: Analyzer | None = None  # null: stopwords/stemmer above; set: replaces them


@dataclass
class MemoryBackendSchema:
    _target_: str = "gear_repro.backends.memory.MemoryBackend"
    bm25: MemoryBM25Schema = field(default_factory=MemoryBM25Schema)
    dense_dtype: DenseDtype = DenseDtype.float32
    dense: DenseSettings = field(default_factory=DenseSettings)  # exact | faiss flat/hnsw/ivf (backends/ann.py)
    cache: bool = True


@dataclass
class ElasticsearchBackendSchema:
    _target_: str = "gear_repro.backends.elasticsearch.ElasticsearchBackend"
    url: str | None = None
    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    ca_certs: str | None = None
    verify_certs: bool = True
    request_timeout: float = num(60, gt=0)
    max_retries: int = num(3, ge=0)
    index_prefix: str = "gear"
    shards: int = num(1, ge=1)
    replicas: int = num(0, ge=0)
    check_version: bool = True
    search_batch: int = num(64, ge=1)
    lookup_batch: int = num(1000, ge=1)
    lookup_page: int = num(MAX_WINDOW, ge=1, le=MAX_WINDOW)
    bm25: BM25Settings = field(default_factory=BM25Settings)
    knn: KnnSettings = field(default_factory=KnnSettings)
    bulk: BulkSettings = field(default_factory=BulkSettings)


# -- embedder group (configs/embedder/) ---------------------------------------------------------------------------
@dataclass
class SentenceEmbedderSchema:
    _target_: str = "gear_repro.embedding.SentenceEmbedder"
    model: str = "all-mpnet-base-v2"  # hub id, alias or local folder
    batch_size: int = num(32, ge=1)
    device: str = "cpu"  # a torch device: cpu | cuda | cuda:1 | mps
    normalize: bool = True
    max_seq_length: int | None = num(None, ge=1)
    cache: bool = True
    num_threads: int | None = num(None, ge=1)
    show_progress: bool = True
    backend: EncoderBackend = EncoderBackend.torch
    precision: Precision = Precision.fp32  # fp32 | bf16 | auto (docs/encoders.md)
    query_precision: QueryPrecision = QueryPrecision.fp32  # fp32 | same: the query side when precision runs bf16
    cache_chunk_rows: int | None = num(4096, ge=1)  # resumable corpus-encode parts (embedding/corpus_parts.py)


# group -> {schema name: dataclass}; a group option's YAML lists its schema first in its defaults
GROUP_SCHEMAS: dict[str, dict[str, type]] = {
    "agent": {"single_schema": SingleStepSchema, "gear_schema": GearAgentSchema, "t2rag_schema": T2RAGAgentSchema,
              "hipporag_schema": HippoRAGMethodSchema, "ircot_schema": IRCoTAgentSchema},
    "expansion": {"none_schema": NoExpansionSchema, "naive_schema": NaiveGESchema, "sync_schema": SyncGESchema},
    "beam": {"beam_schema": BeamConfig},
    "retriever": {"bm25_schema": BM25RetrieverSchema, "sbert_schema": DenseRetrieverSchema,
                  "hybrid_schema": HybridRetrieverSchema, "composed_schema": ComposedRetrieverSchema,
                  "griever_schema": GrieverRetrieverSchema},
    "backend": {"memory_schema": MemoryBackendSchema, "elasticsearch_schema": ElasticsearchBackendSchema},
    "embedder": {"embedder_schema": SentenceEmbedderSchema},
    "hipporag": {"hipporag_schema": HippoRAGSchema},
    "llm": {"llm_schema": LLMSchema},
    "dataset": {"dataset_schema": DatasetSchema},
    "qa_reader": {"qa_reader_schema": QAReaderSchema},
}
# plain top-level nodes: configs/config.yaml puts <name>_schema at package <name>
NODE_SCHEMAS: dict[str, type] = {"run": RunSchema, "graph": GraphSchema, "extraction": ExtractionSchema,
                                 "report": ReportSchema}


def schema_name(group: str, name: str) -> str:
    """The ConfigStore name of a group's schema, which its options name as ``/<that>@_here_``: ``llm_schema`` for
    the llm group's ``llm_schema``, ``agent_gear_schema`` for the agent group's ``gear_schema``."""
    return name if name == f"{group}_schema" else f"{group}_{name}"


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent; called on import of this module), at its root: a
    schema in a config group would be listed by ``gear-repro --help`` among that group's options."""
    cs = ConfigStore.instance()
    for group, schemas in GROUP_SCHEMAS.items():
        for name, node in schemas.items():
            cs.store(name=schema_name(group, name), node=node)
    for name, node in NODE_SCHEMAS.items():
        cs.store(name=f"{name}_schema", node=node)


def group_config(group: str, option: str, overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """One config group option composed through Hydra (schema, defaults list and all), e.g.
    ``instantiate(group_config("llm", "tiny"))`` in scripts and tests that build a single component."""
    from hydra import compose, initialize_config_dir

    from gear_repro.utils.paths import config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"{group}={option}", *overrides])
    return cfg[group]


def register_resolvers() -> None:
    """``${repo:}`` = repository root, ``${cache:}`` = $GEAR_CACHE, ``${diversity_label:<bool>}`` = Table 4's row
    label of a beam.diversity value."""
    if not OmegaConf.has_resolver("repo"):
        OmegaConf.register_new_resolver("repo", lambda: str(REPO_DIR))
    if not OmegaConf.has_resolver("cache"):
        OmegaConf.register_new_resolver("cache", lambda: str(cache_dir()))
    if not OmegaConf.has_resolver("diversity_label"):  # Table 4's row label follows beam.diversity, however it is set
        OmegaConf.register_new_resolver("diversity_label", lambda d: "w/ diversity" if d else "w/o diversity")


register_resolvers()
register_configs()

# depths that must reach max(run.ks), and what a smaller one would do: a method's list cut below k (null: no cut),
# a base retriever's lists (hybrid's before fusion, composed's BM25 candidates) shorter than k
_MEASURED_ON = "R@{k} would be measured on {d} passages"
_DEPTHS_BELOW_K = {
    "agent.output_depth": (", or null", _MEASURED_ON), "agent.round_ranking_depth": (", or null", _MEASURED_ON),
    "expansion.output_depth": (", or null", _MEASURED_ON), "expansion.round_ranking_depth": (", or null", _MEASURED_ON),
    "retriever.fusion_depth": ("", "R@{k} would fuse BM25 and SBERT lists of {d} passages each"),
    "retriever.candidates": ("", "R@{k} would re-rank {d} BM25 candidates"),
}


def validate(cfg: DictConfig) -> DictConfig:
    """The start-up check of a composed config (before anything runs): every node's settings through its schema
    (:func:`check_settings`), then the run-level rules no schema can express."""
    check_settings(cfg)
    choice(Stage, cfg.get("stage", "retrieve"), "stage")
    name = str(OmegaConf.select(cfg, "dataset.name", default="") or "")
    if "/" in name or "\\" in name or name in (".", ".."):  # it names the run dir (hydra.run.dir): never a path
        raise ConfigError(f"dataset.name must be a name, not a path: {name!r} (the data folder is dataset.path)")
    if not isinstance(cfg.get("qa", False), bool):  # `qa=yes` would be a truthy string
        raise ConfigError(f"qa must be true or false, got {cfg.get('qa')!r}")
    if "report" in cfg:
        from gear_repro.reporting.paper import check_papers

        check_papers(cfg.report)
    if not cfg.run.ks or any(k <= 0 for k in cfg.run.ks):
        raise ConfigError(f"run.ks must be positive ranks, got {list(cfg.run.ks)}")
    twice = sorted({k for k in cfg.run.ks if list(cfg.run.ks).count(k) > 1})
    if twice:  # a k-dependent method would run each repeated rank's pass again, for the same numbers
        raise ConfigError(f"run.ks lists {', '.join(map(str, twice))} more than once ({list(cfg.run.ks)}): each rank is "
                          f"evaluated once; use run.ks={sorted(set(cfg.run.ks))}")
    if cfg.run.save_depth < max(cfg.run.ks):  # a shorter saved ranking would silently truncate recall@k
        raise ConfigError(f"run.save_depth ({cfg.run.save_depth}) must be >= max(run.ks) ({max(cfg.run.ks)})")
    base_k = cfg.run.get("base_k")
    if base_k is not None and base_k < max(cfg.run.ks):  # R@k of a list shorter than k, under R@k's name
        raise ConfigError(f"run.base_k ({base_k}) must be >= max(run.ks) ({max(cfg.run.ks)}), or null: R@"
                          f"{max(cfg.run.ks)} would be measured on {base_k} passages")
    k = max(cfg.run.ks)
    for key, (or_null, why) in _DEPTHS_BELOW_K.items():
        depth = OmegaConf.select(cfg, key, default=None)
        if isinstance(depth, int) and depth < k:
            raise ConfigError(f"{key} ({depth}) must be >= max(run.ks) ({k}){or_null}: {why.format(k=k, d=depth)}")
    llm = cfg.get("llm")
    if isinstance(llm, DictConfig) and "api_key_env" in llm:
        from gear_repro.llm.client import check_env_name

        check_env_name(llm.api_key_env)
    return cfg


def schema_of(key: str, node: Any) -> type | None:
    """The schema of a config node at ``key`` (a plain node or a config group): the plain node's, or the group
    option's whose ``_target_`` the node names (the group's only schema for a node without ``_target_``); None for
    a class no schema names (a user's own component: its constructor checks it)."""
    if key in NODE_SCHEMAS:
        return NODE_SCHEMAS[key]
    options = list(GROUP_SCHEMAS.get(key, {}).values())
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if target is None:
        return options[0] if len(options) == 1 else None
    return next((sc for sc in options if getattr(sc, "_target_", None) == target), None)


def check_settings(cfg: DictConfig) -> None:
    """The one validation path of settings: for every top-level node with a schema, a ConfigError naming the
    setting for a key its schema does not have (``+retriever.foo=1``), a value outside an Enum (a config whose
    group file does not list its schema) or a number outside its range (``hipporag.damping=1``); nested nodes
    through their own schema (``llm.server``, ``backend.bm25``, GRIEVER's ``triple_retriever``, HippoRAG's
    ``encoder``)."""
    for key in cfg:
        node = cfg.get(key)
        schema = schema_of(str(key), node) if isinstance(node, DictConfig) else None
        if schema is not None:
            _check_node(str(key), node, schema)


def _check_node(path: str, node: DictConfig, schema: type) -> None:
    known = {f.name: f for f in fields(schema)}
    target = getattr(schema, "_target_", None)
    refuse_unknown(path, node, schema, target.rsplit(".", 1)[-1] if target else "")
    hints = typing.get_type_hints(schema)
    for name, f in known.items():
        if name not in node or OmegaConf.is_missing(node, name):
            continue
        try:
            value = node.get(name)
        except OmegaConfBaseException:
            continue  # an interpolation that cannot resolve yet: reported where it is used, naming it
        key = f"{path}.{name}"
        enum, nested = enum_of(hints[name]), _dataclass_of(hints[name])
        if "range" in f.metadata:
            check_number(key, value, f.metadata["range"])
        elif enum is not None and value is not None:
            choice(enum, value, key)
        elif isinstance(value, DictConfig) and (nested or f.metadata.get("group")):
            sub = nested or schema_of(f.metadata["group"], value)
            if sub is not None:
                _check_node(key, value, sub)


def _dataclass_of(annotation: Any) -> type | None:
    """The dataclass of a field annotation (``X`` or ``X | None``), else None."""
    args = typing.get_args(annotation) or (annotation,)
    return next((a for a in args if isinstance(a, type) and is_dataclass(a)), None)


def _secret(key: Any, value: Any) -> bool:
    """A value to hide: under a secret-looking key, or a key given by mistake as ``*_env`` (a variable name)."""
    if value in (None, ""):
        return False
    if is_secret_key(key):
        return True
    if str(key).endswith("_env"):
        from gear_repro.llm.client import looks_like_env_name

        return not looks_like_env_name(value)
    return False


def redact(obj: Any) -> Any:
    """A copy of a plain config container with secrets replaced by '***': secret-looking keys, every value under
    a ``*headers`` key, URL userinfo and registered secret values in any string (gear_repro/utils/secrets.py)."""
    if isinstance(obj, dict):
        return {k: (MASK if _secret(k, v) else _mask_headers(v) if is_header_key(k)
                    else redact(mask_query(v)) if is_query_key(k) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def _mask_headers(headers: Any) -> Any:
    """Header names kept, every value masked (a bare string or list of headers is masked whole)."""
    if isinstance(headers, dict):
        return {k: MASK if v not in (None, "") else v for k, v in headers.items()}
    return MASK if headers not in (None, "", [], {}) else headers


def resolved(cfg: DictConfig, enum_to_str: bool = True) -> dict:
    """``cfg`` resolved to a plain dict, a value that is (or interpolates to) a mandatory ``???`` left as ``???``: a
    preset's value that only some of its jobs need (``table7.gear_prompt_triples``) does not stop the others from
    recording their config; the job that reads it fails there, naming it."""
    out = copy.deepcopy(cfg)

    def walk(node: DictConfig | ListConfig) -> None:
        for key in (list(node.keys()) if isinstance(node, DictConfig) else range(len(node))):
            try:
                value = node[key]
            except (InterpolationToMissingValueError, MissingMandatoryValue):
                node[key] = MISSING
                continue
            if isinstance(value, DictConfig | ListConfig):
                walk(value)

    with read_write(out), open_dict(out):
        walk(out)
    return OmegaConf.to_container(out, resolve=True, throw_on_missing=False,  # type: ignore[return-value]
                                  enum_to_str=enum_to_str)


def to_container(cfg: DictConfig, resolve: bool = True) -> dict:
    """Resolved (:func:`resolved`), redacted plain dict (what is written to disk); Enum values as their strings."""
    return redact(resolved(cfg) if resolve else OmegaConf.to_container(cfg, resolve=False, enum_to_str=True))
