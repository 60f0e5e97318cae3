"""Typed configs: structured-config schemas (dataclasses with Enums) registered in Hydra's ConfigStore,
custom resolvers, run-level checks and secret redaction.

The pattern (docs/ARCHITECTURE.md "Adding a method"): every config group option starts its defaults list
with the group's schema, e.g. ``configs/agent/gear.yaml``::

    defaults:
      - gear_schema      # GearAgentSchema below, stored as group "agent", name "gear_schema"
      - _self_

and the plain top-level nodes (``run``, ``graph``, ``extraction``) get theirs from ``configs/config.yaml``
(``- schema/run@run: run``). Hydra merges the YAML onto the schema while composing, so a misspelt key or a
value outside an Enum fails at composition with Hydra's own message (naming the full key), before anything
runs. A new method adds a dataclass here (``_target_`` + its arguments, Enums for choices) and one
``cs.store(...)`` line in :func:`register_configs`.

Choices are ``str`` Enums whose member names equal their values, so code compares them with plain strings
and JSON/YAML write the value. Classes that are also built directly (tests, scripts) coerce their arguments
with :func:`choice`, which raises :class:`ConfigError` naming the setting.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, cache_dir
from gear_repro.utils.secrets import MASK, is_header_key, redact_text


# -- choices ----------------------------------------------------------------------------------------------
class _Choice(str, Enum):
    def __str__(self) -> str:
        return self.value


class Stage(_Choice):
    retrieve = "retrieve"
    index = "index"
    extract = "extract"


class MissingGold(_Choice):
    warn = "warn"
    error = "error"


class Subset(_Choice):
    first = "first"
    stratified = "stratified"


class QueryChoice(_Choice):
    """Which question a GEAR step uses: q(n) (rewritten) or q (original)."""

    rewritten = "rewritten"
    original = "original"


class GistDocs(_Choice):
    expanded = "expanded"
    fused = "fused"
    base = "base"


class GistEmpty(_Choice):
    """What the gist read reads when the expanded list C~_q(n) is empty (agent.gist_empty)."""

    skip = "skip"  # nothing: no gist call (the pseudocode reads the empty list, gear.py:52)
    fused = "fused"  # the top gist_k of C_q(n)


class GistFirstRound(_Choice):
    read = "read"
    reuse = "reuse"


class FusionOrder(_Choice):
    base_first = "base_first"
    expanded_first = "expanded_first"


class OnNoProximal(_Choice):
    base = "base"
    naive = "naive"


class NeighbourSelection(_Choice):
    relevance = "relevance"
    order = "order"


class Exists(_Choice):
    previous_step = "previous_step"
    path = "path"
    none = "none"


class DeadEnds(_Choice):
    fallback = "fallback"
    drop = "drop"
    keep = "keep"


class HubPolicy(_Choice):
    truncate = "truncate"
    drop = "drop"


class Adjacency(_Choice):
    records = "records"
    lookup = "lookup"


class AnswerMetric(_Choice):
    """The official answer script of dataset.answer_metric (evaluation/metrics.py); ``2wiki`` is not an
    identifier, so that one member's name differs from its value."""

    musique = "musique"
    hotpotqa = "hotpotqa"
    twowiki = "2wiki"


class QAMode(_Choice):
    retrieved = "retrieved"
    none = "none"
    gold = "gold"


class DenseDtype(_Choice):
    """Dtype of the memory backend's embedding matrices (backend.dense_dtype)."""

    float32 = "float32"
    float16 = "float16"  # halves memory; scores differ in the 3rd decimal


class BM25Variant(_Choice):
    """bm25s scoring variant of the memory backend (backend.bm25.method); ``bm25+`` is not an identifier."""

    lucene = "lucene"
    robertson = "robertson"
    atire = "atire"
    bm25l = "bm25l"
    bm25plus = "bm25+"


class Analyzer(_Choice):
    """The Elasticsearch analyzer the memory backend's BM25 text analysis stands in for (backend.bm25.analyzer)."""

    standard = "standard"  # no stop words, no stemming
    english = "english"    # English stop words + stemming


class DenseIndex(_Choice):
    """The memory backend's dense search (backend.dense.index; backends/ann.py, docs/scale.md)."""

    auto = "auto"    # exact below dense.auto_min_vectors vectors, else dense.auto_index
    exact = "exact"  # numpy float32 products over the whole matrix (no faiss)
    flat = "flat"    # faiss flat scan of the codes (fp32 codes: exact scores)
    hnsw = "hnsw"    # faiss HNSW graph over the codes
    ivf = "ivf"      # faiss inverted file (k-means cells) over the codes


class DenseCodes(_Choice):
    """How a faiss dense index stores the vectors it scans (backend.dense.codes)."""

    fp32 = "fp32"  # 4 bytes per dimension
    fp16 = "fp16"  # 2 bytes
    sq8 = "sq8"    # 1 byte: 8-bit scalar quantiser (per-dimension min/max from a training sample)


E = TypeVar("E", bound=_Choice)


def choice(enum: type[E], value: Any, key: str) -> E:
    """``enum(value)``, or a ConfigError naming ``key`` and the allowed values."""
    try:
        return enum(value)
    except ValueError:
        raise ConfigError(f"{key} must be one of {[m.value for m in enum]}, got '{value}'") from None


# -- numeric ranges ---------------------------------------------------------------------------------------
def num(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None) -> Any:
    """A numeric schema field with its allowed range (``ge`` <= v, ``gt`` < v, v <= ``le``; null always allowed),
    checked by :func:`validate` at start-up. Every int/float field of a schema declares one (tested)."""
    return field(default=default, metadata={"range": {"ge": ge, "gt": gt, "le": le}})


def range_text(rng: dict[str, float | None]) -> str:
    """">= 1", "> 0", ">= 0 and <= 2"."""
    parts = [f"{op} {rng[k]:g}" for k, op in (("ge", ">="), ("gt", ">"), ("le", "<=")) if rng.get(k) is not None]
    return " and ".join(parts)


def in_range(value: float, rng: dict[str, float | None]) -> bool:
    ge, gt, le = rng.get("ge"), rng.get("gt"), rng.get("le")
    return (ge is None or value >= ge) and (gt is None or value > gt) and (le is None or value <= le)


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
    max_rounds: int = num(4, ge=1)  # GEAR agent rounds (MuSiQue 4, 2Wiki/HotpotQA 2; §6.3)
    # EM/F1 script: musique | hotpotqa | 2wiki; null = from paper_name (others: hotpotqa). docs/readings.md
    answer_metric: AnswerMetric | None = None


@dataclass
class RunSchema:
    ks: list[int] = field(default_factory=lambda: [5, 10, 15])
    matched_k: bool = True  # single-step: base k = evaluated rank (Table 2)
    base_k: int | None = num(None, ge=1)  # base k otherwise (null = max(ks))
    save_depth: int = num(100, ge=1)  # ids of the final ranking kept in predictions.jsonl
    resume: bool = True
    progress: bool = True
    fail_fast: bool = False  # re-raise a question's error instead of logging and counting it
    allow_errors: bool = False  # false: a run with errored questions exits non-zero (they are scored as misses)
    workers: int = num(1, ge=1)  # questions in flight; their LLM waits overlap (docs/llm.md, "Concurrency")


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
class BeamSchema:
    """``beam:`` -> :class:`gear_repro.methods.gear.beam_search.BeamConfig` (Alg. 1); same fields (tested)."""

    length: int = num(2, ge=1)
    width: int = num(10, ge=1)
    neighbours: int | None = num(100, ge=0)
    neighbour_selection: NeighbourSelection = NeighbourSelection.relevance
    gamma: float | None = num(None, gt=0)
    diversity: bool = True
    exists: Exists = Exists.previous_step
    dead_ends: DeadEnds = DeadEnds.fallback
    scorer: str = "exact"  # open set: register_scorer adds names
    path_separator: str = " "
    scorer_options: dict[str, Any] = field(default_factory=dict)
    path_cache: bool = False
    label: str | None = None


# -- schemas of the instantiated groups (``_target_`` + constructor arguments) ----------------------------
@dataclass
class SingleStepSchema:
    _target_: str = "gear_repro.methods.single.SingleStep"
    name: str = "single"
    output_depth: int | None = num(None, ge=1)


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
    dedupe_memory: bool = True
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


class LLMCacheMode(str, Enum):
    auto = "auto"  # journal when the cache directory is on a network file system (/proc/mounts), else wal
    wal = "wal"  # SQLite write-ahead log: processes of one machine only
    journal = "journal"  # rollback journal + POSIX locks: safe on NFS/Lustre/GPFS shared by several nodes


@dataclass
class LLMSchema:
    _target_: str = "gear_repro.llm.LLMClient"
    model: str = MISSING
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float | None = num(0.0, ge=0, le=2)
    max_tokens: int | None = num(None, ge=1)
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = num(120.0, gt=0)
    max_retries: int = num(4, ge=0)
    backoff_base_s: float = num(1.0, ge=0)
    backoff_max_s: float = num(30.0, ge=0)
    concurrency: int = num(4, ge=1)  # requests in flight at most (chat_many, run.workers questions)
    cache: bool = True
    cache_dir: str | None = None
    cache_mode: LLMCacheMode = LLMCacheMode.auto  # SQLite journal of the reply cache (llm/cache.py)
    server: LLMServerSchema | None = field(default=None, metadata={"schema": LLMServerSchema})
    context_window: int | None = num(None, ge=1)  # model's window in tokens (prompt + reply); null = unknown, no fitting


@dataclass
class QAReaderSchema:
    _target_: str = "gear_repro.qa.QAReader"
    top_k: int = num(5, ge=1)
    mode: QAMode = QAMode.retrieved
    prompt: str = "qa"
    prompt_no_passages: str = "qa_no_passages"
    llm_params: dict[str, Any] = field(default_factory=dict)


class HippoRAGVersion(str, Enum):
    v1 = "v1"  # HippoRAG (legacy branch): NER -> phrase linking -> PPR over phrases
    v2 = "v2"  # HippoRAG 2 (main branch): fact linking, passage nodes


class PhraseNormalisation(str, Enum):
    hipporag = "hipporag"  # processing_phrases + GEAR's entity key
    entity = "entity"  # GEAR's entity key only


class NoEntityFallback(str, Enum):
    uniform = "uniform"  # v1 code: 1/N each, descending corpus order (hipporag.py:232-233, :264)
    retriever = "retriever"  # the run's base retriever (as v2's dense fallback)


@dataclass
class HippoRAGSchema:
    """The ``hipporag`` group (configs/hipporag/default.yaml documents each value and its source)."""

    _target_: str = "gear_repro.methods.hipporag.retriever.HippoRAG"
    version: HippoRAGVersion = HippoRAGVersion.v1
    damping: float = num(0.5, ge=0, le=1)
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
    cache: bool = True
    block_rows: int | None = num(None, ge=1)
    encoder: Any = None  # synonym/linking encoder: null = the run's embedder | model name | embedder node


@dataclass
class HNSWSchema:
    """``backend.dense.hnsw`` (faiss IndexHNSW; configs/backend/memory.yaml documents each value)."""

    m: int = num(32, ge=2, le=512)  # graph degree M (2M links per vector at level 0)
    ef_construction: int = num(200, ge=1)  # build beam
    ef_search: int = num(256, ge=1)  # search beam (raised to the number of candidates when that is larger)


@dataclass
class IVFSchema:
    """``backend.dense.ivf`` (faiss IndexIVF)."""

    nlist: int | None = num(None, ge=1)  # k-means cells; null = 4·sqrt(N)
    nprobe: int = num(64, ge=1)  # cells scanned per query
    train_size: int = num(200_000, ge=1)  # vectors of the seeded k-means / quantiser training sample


@dataclass
class DenseSchema:
    """``backend.dense``: the memory backend's dense index (backends/ann.py)."""

    index: DenseIndex = DenseIndex.auto
    auto_min_vectors: int = num(100_000, ge=0)  # auto: exact below this many vectors
    auto_index: DenseIndex = DenseIndex.flat  # auto at or above auto_min_vectors: flat | hnsw | ivf
    codes: DenseCodes = DenseCodes.fp16
    rerank: int = num(2, ge=1)  # rerank·k candidates re-scored with the collection's own vectors
    hnsw: HNSWSchema = field(default_factory=HNSWSchema, metadata={"schema": HNSWSchema})
    ivf: IVFSchema = field(default_factory=IVFSchema, metadata={"schema": IVFSchema})
    seed: int = num(0, ge=0)  # training samples (sq8 ranges, IVF k-means)
    threads: int = num(1, ge=1)  # faiss OpenMP threads for build and search


@dataclass
class MemoryBM25Schema:
    """``backend.bm25`` of the memory backend (bm25s; configs/backend/memory.yaml)."""

    k1: float = num(1.2, ge=0)
    b: float = num(0.75, ge=0, le=1)
    method: BM25Variant = BM25Variant.lucene
    stopwords: str | None = "en"
    stemmer: str | None = "english"
    analyzer: Analyzer | None = None


@dataclass
class MemoryBackendSchema:
    """``configs/backend/memory.yaml``: bm25s + numpy/faiss in process (backends/memory.py)."""

    _target_: str = "gear_repro.backends.memory.MemoryBackend"
    bm25: MemoryBM25Schema = field(default_factory=MemoryBM25Schema, metadata={"schema": MemoryBM25Schema})
    dense_dtype: DenseDtype = DenseDtype.float32
    dense: DenseSchema = field(default_factory=DenseSchema, metadata={"schema": DenseSchema})
    cache: bool = True


# plain nodes merged onto their schema by validate() (not in a config group)
SCHEMAS: dict[str, Any] = {"hipporag": HippoRAGSchema}


class T2RAGRanking(str, Enum):
    """How T²RAG's iteration lists become the method's ranking (agent.ranking)."""

    rrf = "rrf"        # RRF of the iteration lists (as GEAR fuses its rounds, Eq. 9)
    concat = "concat"  # iteration lists in order, de-duplicated


class T2RAGReading(str, Enum):
    """Which reading sets T²RAG's five paper-vs-code behaviours (agent.reading; docs/readings.md)."""

    code = "code"    # rockcor/T2RAG src/TRAG.py, behind the published numbers (default, DESIGN.md)
    paper = "paper"  # the paper's prose (Alg. 1-2, §4.3, App. E)


class T2RAGQuestionQuery(str, Enum):
    """How question words are removed from the extra question query (agent.question_query_mode)."""

    substring = "substring"  # the code: lower-cased, removed as substrings (TRAG.py:481-485)
    word = "word"            # on word boundaries


class T2RAGDecomposeRetry(str, Enum):
    """What follows a decomposition with no parsable triplet (agent.decompose_retry)."""

    simple = "simple"  # the code: one retry with the simpler prompt, at most 3 triplets (TRAG.py:375-383)
    none = "none"      # the paper: no retry; answered from no clues


class T2RAGFuzzyMatch(str, Enum):
    """How a new clue fills a fuzzy triplet in Step 2.3 (agent.fuzzy_match)."""

    placeholder = "placeholder"  # bound named placeholders, position and known entities (predicate reworded ok)
    words = "words"              # every known part, the predicate included, agrees word by word


class T2RAGAnswerParse(str, Enum):
    """How T²RAG's answer is read off the reply (agent.answer_parse)."""

    code = "code"      # after the last "Answer:", else the whole reply (TRAG.py:1117-1119)
    reader = "reader"  # the K.3 reader's first non-empty line (qa.reader.extract_answer)


@dataclass
class T2RAGAgentSchema:
    """``configs/agent/t2rag.yaml`` (seed 002, §4.3, Alg. 1-2, §5.2; docs/t2rag.md). Registered in Hydra's
    ConfigStore as ``agent/t2rag_schema`` and named first in that file's defaults list, so a misspelt key or a
    wrong type fails at composition."""

    _target_: str = "gear_repro.methods.t2rag.method.T2RAGAgent"
    name: str = "t2rag"
    k: int = num(5, ge=1)  # unique passages per iteration (§5.2)
    max_iterations: int = num(3, ge=1)  # N (§5.2); 1 = "single round" ablation (Table 2)
    candidate_depth: int = num(200, ge=1)  # propositions per query before the global ranking (Alg. 2)
    with_passages: bool = True  # false = "w/o chunk" ablation (Table 2)
    reading: T2RAGReading = T2RAGReading.code  # the default of the five keys below (null = the reading's value)
    question_query: bool | None = None  # code true (question as an extra query) | paper false
    question_query_mode: T2RAGQuestionQuery | None = None  # code substring | paper word
    carry_fuzzy: bool | None = None  # code false (emptied) | paper true (Step 2.3)
    resolve_without_context: bool | None = None  # code false (skipped) | paper true (Alg. 1)
    example_propositions_chars: int | None = num(None, ge=0)  # code 1000 | paper 0 (= whole, App. E)
    decompose_retry: T2RAGDecomposeRetry | None = None  # code simple | paper none
    fuzzy_match: T2RAGFuzzyMatch = T2RAGFuzzyMatch.placeholder
    stall_stop: bool = True  # stop when nothing is searchable, retrieved or new (stop = "stalled")
    answer: bool = True  # T²RAG's own answer (Step 3); false = qa_reader answers
    answer_parse: T2RAGAnswerParse = T2RAGAnswerParse.code
    ranking: T2RAGRanking = T2RAGRanking.rrf
    k_rrf: int = num(60, ge=0)
    llm_params: dict[str, Any] = field(default_factory=dict)


class IRCoTRetrieverKind(str, Enum):
    """Where IRCoT retrieves from (agent.retriever)."""

    base = "base"            # the run's `retriever` group ("IRCoT (BM25)" with retriever=bm25)
    hipporag = "hipporag"    # HippoRAG (HippoRAG w/ IRCoT)


class IRCoTThought(str, Enum):
    """What of the LLM's reply becomes the next thought (agent.thought)."""

    full = "full"                      # the whole reply (HippoRAG's ircot_hipporag.py)
    first_sentence = "first_sentence"  # its first sentence (the IRCoT paper)


class IRCoTMerge(str, Enum):
    """How retrievals are merged across steps (agent.merge)."""

    raw = "raw"                # max raw score per passage (ircot_hipporag.py:242-251, baselines/ircot.py:270-279)
    normalised = "normalised"  # each step's scores / that step's best, then the max


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
    demo_files: dict[str, str] = field(default_factory=dict)
    demos: str = "musique"
    num_demo: int | None = num(1, ge=0)
    thought: IRCoTThought = IRCoTThought.full
    merge: IRCoTMerge = IRCoTMerge.raw
    demo_budget: int | None = num(None, ge=1)  # tokens; null = no budget (ircot_hipporag.py), 15000 = baselines/ircot.py
    cot_params: dict[str, Any] = field(default_factory=dict)
    round_ranking_depth: int | None = num(None, ge=1)


# group -> {schema name: dataclass}; a group option's YAML lists its schema first in its defaults
GROUP_SCHEMAS: dict[str, dict[str, type]] = {
    "agent": {"single_schema": SingleStepSchema, "gear_schema": GearAgentSchema, "t2rag_schema": T2RAGAgentSchema,
              "hipporag_schema": HippoRAGMethodSchema, "ircot_schema": IRCoTAgentSchema},
    "expansion": {"none_schema": NoExpansionSchema, "naive_schema": NaiveGESchema, "sync_schema": SyncGESchema},
    "beam": {"beam_schema": BeamSchema},
    "llm": {"llm_schema": LLMSchema},
    "dataset": {"dataset_schema": DatasetSchema},
    "qa_reader": {"qa_reader_schema": QAReaderSchema},
    "backend": {"memory_schema": MemoryBackendSchema},  # the Elasticsearch option is untyped (UNTYPED_GROUPS)
}
# plain top-level nodes: configs/config.yaml puts schema/<name> at package <name>
NODE_SCHEMAS: dict[str, type] = {"run": RunSchema, "graph": GraphSchema, "extraction": ExtractionSchema}


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent; called on import of this module)."""
    cs = ConfigStore.instance()
    for group, schemas in GROUP_SCHEMAS.items():
        for name, node in schemas.items():
            cs.store(group=group, name=name, node=node)
    for name, node in NODE_SCHEMAS.items():
        cs.store(group="schema", name=name, node=node)


def group_config(group: str, option: str, overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """One config group option composed through Hydra (schema, defaults list and all), e.g.
    ``instantiate(group_config("llm", "tiny"))`` in scripts and tests that build a single component."""
    from hydra import compose, initialize_config_dir

    from gear_repro.utils.paths import config_dir

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"{group}={option}", *overrides])
    return cfg[group]


def register_resolvers() -> None:
    """``${repo:}`` = repository root, ``${cache:}`` = $GEAR_CACHE."""
    if not OmegaConf.has_resolver("repo"):
        OmegaConf.register_new_resolver("repo", lambda: str(REPO_DIR))
    if not OmegaConf.has_resolver("cache"):
        OmegaConf.register_new_resolver("cache", lambda: str(cache_dir()))


register_resolvers()
register_configs()

_SECRET = re.compile(r"(api[_-]?key|password|secret|token)$", re.IGNORECASE)


def validate(cfg: DictConfig) -> DictConfig:
    """Merge the plain schema'd nodes (SCHEMAS) and run checks the schemas cannot express."""
    for key, schema in SCHEMAS.items():
        if cfg.get(key) is None:
            continue
        try:
            merged = OmegaConf.merge(OmegaConf.structured(schema), cfg[key])
        except OmegaConfBaseException as e:
            raise ConfigError(f"config group '{key}': {e.msg if hasattr(e, 'msg') else e}") from e
        with open_dict(cfg):
            cfg[key] = merged
    choice(Stage, cfg.get("stage", "retrieve"), "stage")
    if not cfg.run.ks or any(k <= 0 for k in cfg.run.ks):
        raise ConfigError(f"run.ks must be positive ranks, got {list(cfg.run.ks)}")
    if cfg.run.save_depth < max(cfg.run.ks):  # a shorter saved ranking would silently truncate recall@k
        raise ConfigError(f"run.save_depth ({cfg.run.save_depth}) must be >= max(run.ks) ({max(cfg.run.ks)})")
    if cfg.dataset.limit is not None and cfg.dataset.limit <= 0:
        raise ConfigError(f"dataset.limit must be a positive number of questions or null (all), got "
                          f"{cfg.dataset.limit}")
    llm = cfg.get("llm")
    if isinstance(llm, DictConfig) and "api_key_env" in llm:
        from gear_repro.llm.client import check_env_name

        check_env_name(llm.api_key_env)
    check_settings(cfg)
    return cfg


# groups (or group options: backend=elasticsearch) without a schema: every number in them must be >= 0 (their YAML
# files document each value)
UNTYPED_GROUPS = ("retriever", "backend", "embedder")
_NON_NEGATIVE = {"ge": 0.0, "gt": None, "le": None}


def schema_of(key: str, node: Any) -> type | None:
    """The schema of a top-level config node: its plain-node schema, or its group option's (matched on
    ``_target_``); None for untyped groups and for a ``_target_`` no schema names."""
    if key in NODE_SCHEMAS or key in SCHEMAS:
        return NODE_SCHEMAS.get(key) or SCHEMAS[key]
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    options = GROUP_SCHEMAS.get(key, {}).values()
    return next((sc for sc in options if target is None or getattr(sc, "_target_", None) == target), None)


def check_settings(cfg: DictConfig) -> None:
    """ConfigError naming the setting for a key its schema does not have (``+run.foo=1``) or a number outside its
    range (``beam.neighbours=-1``); in the untyped groups every number must be >= 0."""
    for key in cfg:
        node = cfg.get(key)
        if not isinstance(node, DictConfig):
            continue
        schema = schema_of(str(key), node)
        if schema is not None:
            check_node(str(key), node, schema)
        elif key in UNTYPED_GROUPS:
            _check_numbers(str(key), node)


def _check_number(path: str, value: Any, rng: dict[str, float | None]) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and not (
            math.isfinite(value) and in_range(value, rng)):
        raise ConfigError(f"{path} must be {range_text(rng)} (got {value})")


def check_node(path: str, node: DictConfig, schema: type) -> None:
    """ConfigError naming ``path.<key>`` for a key ``schema`` does not have or a number outside its range (nested
    schemas too)."""
    known = {f.name: f for f in fields(schema)}
    unknown = [str(k) for k in node if k not in known]
    if unknown:
        raise ConfigError(f"{path}.{unknown[0]} is not a setting of {path} (its settings: {', '.join(sorted(known))})")
    for name, f in known.items():
        if not ({"range", "schema"} & f.metadata.keys()) or OmegaConf.is_missing(node, name):
            continue
        try:
            value = node.get(name)
        except OmegaConfBaseException:
            continue  # an interpolation that cannot resolve yet: reported where it is used, naming it
        if "range" in f.metadata:
            _check_number(f"{path}.{name}", value, f.metadata["range"])
        elif "schema" in f.metadata and isinstance(value, DictConfig):
            check_node(f"{path}.{name}", value, f.metadata["schema"])


def _check_numbers(path: str, node: Any) -> None:
    if isinstance(node, DictConfig):
        for k in node:
            try:
                value = None if OmegaConf.is_missing(node, k) else node.get(k)
            except OmegaConfBaseException:
                continue
            _check_numbers(f"{path}.{k}", value)
    else:
        _check_number(path, node, _NON_NEGATIVE)


def is_secret_key(key: Any) -> bool:
    """A config key whose value is a secret (api_key, password, secret, token)."""
    return bool(_SECRET.search(str(key)))


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
        return {k: (MASK if _secret(k, v) else _mask_headers(v) if is_header_key(k) else redact(v))
                for k, v in obj.items()}
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


def to_container(cfg: DictConfig, resolve: bool = True) -> dict:
    """Resolved, redacted plain dict (what is written to disk); Enum values as their strings."""
    return redact(OmegaConf.to_container(cfg, resolve=resolve, throw_on_missing=False, enum_to_str=True))
