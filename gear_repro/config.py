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

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, cache_dir


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


E = TypeVar("E", bound=_Choice)


def choice(enum: type[E], value: Any, key: str) -> E:
    """``enum(value)``, or a ConfigError naming ``key`` and the allowed values."""
    try:
        return enum(value)
    except ValueError:
        raise ConfigError(f"{key} must be one of {[m.value for m in enum]}, got '{value}'") from None


# -- schemas of the plain nodes ---------------------------------------------------------------------------
@dataclass
class DatasetSchema:
    name: str = "musique_sample"
    paper_name: str = "MuSiQue"  # the dataset's column name in the paper's tables
    path: str = "data/musique_sample"
    limit: int | None = None  # first N questions (the corpus stays whole); the subset size with stratified
    subset: Subset = Subset.first  # first N | stratified (balanced over hop types; data/subset.py)
    subset_seed: int = 0  # seed of the stratified order (same ids for every method; larger limits extend it)
    limit_passages: int | None = None  # first N passages (extraction stage only)
    triples_file: str | None = "triples.jsonl"
    missing_gold: MissingGold = MissingGold.warn
    max_rounds: int = 4  # GEAR agent rounds (MuSiQue 4, 2Wiki/HotpotQA 2; §6.3)
    # EM/F1 script: musique | hotpotqa | 2wiki; null = from paper_name (others: hotpotqa). docs/readings.md
    answer_metric: AnswerMetric | None = None


@dataclass
class RunSchema:
    ks: list[int] = field(default_factory=lambda: [5, 10, 15])
    matched_k: bool = True  # single-step: base k = evaluated rank (Table 2)
    base_k: int | None = None  # base k otherwise (null = max(ks))
    save_depth: int = 100  # ids of the final ranking kept in predictions.jsonl
    resume: bool = True
    progress: bool = True
    fail_fast: bool = False  # re-raise a question's error instead of logging and counting it
    allow_errors: bool = False  # false: a run with errored questions exits non-zero (they are scored as misses)
    workers: int = 1  # questions in flight; their LLM waits overlap (docs/llm.md, "Concurrency")


@dataclass
class GraphSchema:
    """``graph:`` -> :class:`gear_repro.core.triple_graph.TripleIndex` (§4.2 entity adjacency)."""

    max_degree: int | None = None
    hub_policy: HubPolicy = HubPolicy.truncate
    adjacency: Adjacency = Adjacency.records
    link_empty_entities: bool = False


@dataclass
class ExtractionSchema:
    """``extraction:`` (stage=extract, K.1): LLM request params and the progress bar."""

    params: dict[str, Any] = field(default_factory=dict)
    progress: bool | None = None  # null = run.progress


@dataclass
class BeamSchema:
    """``beam:`` -> :class:`gear_repro.methods.gear.beam_search.BeamConfig` (Alg. 1); same fields (tested)."""

    length: int = 2
    width: int = 10
    neighbours: int | None = 100
    neighbour_selection: NeighbourSelection = NeighbourSelection.relevance
    gamma: float | None = None
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
    output_depth: int | None = None


@dataclass
class GearAgentSchema:
    _target_: str = "gear_repro.methods.gear.agent.GearAgent"
    name: str = "gear"
    base_k: int = 10
    max_rounds: int = MISSING  # ${dataset.max_rounds}
    query_for_base: QueryChoice = QueryChoice.rewritten
    query_for_beam: QueryChoice = QueryChoice.original
    reader_memory: bool = True
    read_with: QueryChoice = QueryChoice.original
    gist_docs: GistDocs = GistDocs.expanded
    gist_first_round: GistFirstRound = GistFirstRound.read
    gist_k: int = 10
    dedupe_memory: bool = True
    reason_last_round: bool = True
    passage_link: bool = True
    passage_link_k: int | None = None
    k_rrf: int = 60
    output_depth: int | None = None
    round_ranking_depth: int | None = None  # ${run.save_depth}
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class NoExpansionSchema:
    _target_: str = "gear_repro.methods.gear.expansion.NoExpansion"
    name: str = "none"


@dataclass
class NaiveGESchema:
    _target_: str = "gear_repro.methods.gear.expansion.NaiveGE"
    name: str = "naive"
    k_rrf: int = 60
    output_depth: int | None = None
    trace_beams: int | None = None
    fusion_order: FusionOrder = FusionOrder.base_first


@dataclass
class SyncGESchema(NaiveGESchema):
    _target_: str = "gear_repro.methods.gear.expansion.SyncGE"
    name: str = "sync"
    prompt: str = "reader"
    memory_prompt: str = "reader_gist"
    max_proximal: int | None = None
    on_no_proximal: OnNoProximal = OnNoProximal.base
    llm_params: dict[str, Any] = field(default_factory=dict)


@dataclass
class LLMServerSchema:
    model_path: str = "qwen"
    n_threads: int = 2
    n_ctx: int = 8192
    host: str = "127.0.0.1"
    port: int | None = None
    startup_timeout_s: float = 300.0
    extra_args: list[str] = field(default_factory=list)


@dataclass
class LLMSchema:
    _target_: str = "gear_repro.llm.LLMClient"
    model: str = MISSING
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float | None = 0.0
    max_tokens: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    concurrency: int = 4  # requests in flight at most (chat_many, run.workers questions)
    cache: bool = True
    cache_dir: str | None = None
    server: LLMServerSchema | None = None


@dataclass
class QAReaderSchema:
    _target_: str = "gear_repro.qa.QAReader"
    top_k: int = 5
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
    retriever = "retriever"  # the run's base retriever (as v2's dense fallback)
    uniform = "uniform"  # v1: uniform scores, i.e. corpus order


@dataclass
class HippoRAGSchema:
    """The ``hipporag`` group (configs/hipporag/default.yaml documents each value and its source)."""

    _target_: str = "gear_repro.methods.hipporag.retriever.HippoRAG"
    version: HippoRAGVersion = HippoRAGVersion.v1
    damping: float = 0.5
    node_specificity: bool = True
    normalisation: PhraseNormalisation = PhraseNormalisation.hipporag
    synonyms: bool = True
    synonym_threshold: float = 0.8
    synonym_top_k: int = 100
    synonym_min_alnum: int = 3
    no_entity_fallback: NoEntityFallback = NoEntityFallback.retriever
    linking_top_k: int = 5
    passage_node_weight: float = 0.05
    ner_params: dict[str, Any] = field(default_factory=dict)
    cache: bool = True
    block_rows: int | None = None


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
    k: int = 5  # unique passages per iteration (§5.2)
    max_iterations: int = 3  # N (§5.2); 1 = "single round" ablation (Table 2)
    candidate_depth: int = 200  # propositions per query before the global ranking (Alg. 2)
    with_passages: bool = True  # false = "w/o chunk" ablation (Table 2)
    reading: T2RAGReading = T2RAGReading.code  # the default of the five keys below (null = the reading's value)
    question_query: bool | None = None  # code true (question as an extra query) | paper false
    question_query_mode: T2RAGQuestionQuery | None = None  # code substring | paper word
    carry_fuzzy: bool | None = None  # code false (emptied) | paper true (Step 2.3)
    resolve_without_context: bool | None = None  # code false (skipped) | paper true (Alg. 1)
    example_propositions_chars: int | None = None  # code 1000 | paper 0 (= whole, App. E); >= 0
    decompose_retry: T2RAGDecomposeRetry | None = None  # code simple | paper none
    fuzzy_match: T2RAGFuzzyMatch = T2RAGFuzzyMatch.placeholder
    stall_stop: bool = True  # stop when nothing is searchable, retrieved or new (stop = "stalled")
    answer: bool = True  # T²RAG's own answer (Step 3); false = qa_reader answers
    answer_parse: T2RAGAnswerParse = T2RAGAnswerParse.code
    ranking: T2RAGRanking = T2RAGRanking.rrf
    k_rrf: int = 60
    llm_params: dict[str, Any] = field(default_factory=dict)


class IRCoTRetrieverKind(str, Enum):
    """Where IRCoT retrieves from (agent.retriever)."""

    base = "base"            # the run's `retriever` group ("IRCoT (BM25)" with retriever=bm25)
    hipporag = "hipporag"    # HippoRAG (HippoRAG w/ IRCoT)


class IRCoTThought(str, Enum):
    """What of the LLM's reply becomes the next thought (agent.thought)."""

    full = "full"                      # the whole reply (HippoRAG's ircot_hipporag.py)
    first_sentence = "first_sentence"  # its first sentence (the IRCoT paper)


@dataclass
class HippoRAGMethodSchema:
    """``configs/agent/hipporag.yaml`` (HippoRAG as GEAR re-ran it; settings in the ``hipporag`` group)."""

    _target_: str = "gear_repro.methods.hipporag.method.HippoRAGMethod"
    name: str = "hipporag"
    depth: int = 100  # passages returned per question


@dataclass
class IRCoTAgentSchema:
    """``configs/agent/ircot.yaml`` and ``hipporag_ircot.yaml`` (IRCoT as HippoRAG runs it; docs/baselines.md)."""

    _target_: str = "gear_repro.methods.ircot.IRCoTAgent"
    name: str = "ircot"
    retriever: IRCoTRetrieverKind = IRCoTRetrieverKind.base
    top_k: int = 10
    max_rounds: int = 4
    demo_files: dict[str, str] = field(default_factory=dict)
    demos: str = "musique"
    num_demo: int | None = 1
    thought: IRCoTThought = IRCoTThought.full
    cot_params: dict[str, Any] = field(default_factory=dict)
    round_ranking_depth: int | None = None


# group -> {schema name: dataclass}; a group option's YAML lists its schema first in its defaults
GROUP_SCHEMAS: dict[str, dict[str, type]] = {
    "agent": {"single_schema": SingleStepSchema, "gear_schema": GearAgentSchema, "t2rag_schema": T2RAGAgentSchema,
              "hipporag_schema": HippoRAGMethodSchema, "ircot_schema": IRCoTAgentSchema},
    "expansion": {"none_schema": NoExpansionSchema, "naive_schema": NaiveGESchema, "sync_schema": SyncGESchema},
    "beam": {"beam_schema": BeamSchema},
    "llm": {"llm_schema": LLMSchema},
    "dataset": {"dataset_schema": DatasetSchema},
    "qa_reader": {"qa_reader_schema": QAReaderSchema},
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
    return cfg


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
    """A copy of a plain config container with secret-looking values replaced by '***'."""
    if isinstance(obj, dict):
        return {k: ("***" if _secret(k, v) else redact(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def to_container(cfg: DictConfig, resolve: bool = True) -> dict:
    """Resolved, redacted plain dict (what is written to disk); Enum values as their strings."""
    return redact(OmegaConf.to_container(cfg, resolve=resolve, throw_on_missing=False, enum_to_str=True))
