"""Structured-config schemas, custom resolvers, validation and secret redaction for Hydra configs.

Schemas type-check the plain (non-``_target_``) groups at run start, so a misspelt key or a wrong
type fails with the setting's name instead of being ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, cache_dir


@dataclass
class DatasetSchema:
    name: str = "musique_sample"
    paper_name: str = "MuSiQue"  # the dataset's column name in the paper's tables
    path: str = "data/musique_sample"
    limit: int | None = None  # first N questions (the corpus stays whole); the subset size with subset=stratified
    subset: str = "first"  # first (the first `limit` questions) | stratified (balanced over hop types; data/subset.py)
    subset_seed: int = 0  # seed of the stratified order (same ids for every method; larger limits extend it)
    limit_passages: int | None = None  # first N passages (extraction stage only)
    triples_file: str | None = "triples.jsonl"
    missing_gold: str = "warn"  # warn | error
    max_rounds: int = 4  # GEAR agent rounds (MuSiQue 4, 2Wiki/HotpotQA 2; §6.3)


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

    _target_: str = "gear_repro.retrieval.hipporag.HippoRAG"
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


SCHEMAS: dict[str, Any] = {"dataset": DatasetSchema, "run": RunSchema, "hipporag": HippoRAGSchema}


class T2RAGRanking(str, Enum):
    """How T²RAG's iteration lists become the method's ranking (agent.ranking)."""

    rrf = "rrf"        # RRF of the iteration lists (as GEAR fuses its rounds, Eq. 9)
    concat = "concat"  # iteration lists in order, de-duplicated


@dataclass
class T2RAGAgentSchema:
    """``configs/agent/t2rag.yaml`` (seed 002, §4.3, Alg. 1-2, §5.2; docs/t2rag.md). Registered in Hydra's
    ConfigStore as ``agent/t2rag_schema`` and named first in that file's defaults list, so a misspelt key or a
    wrong type fails at composition."""

    _target_: str = "gear_repro.agent.t2rag.T2RAGAgent"
    name: str = "t2rag"
    k: int = 5  # unique passages per iteration (§5.2)
    max_iterations: int = 3  # N (§5.2); 1 = "single round" ablation (Table 2)
    candidate_depth: int = 200  # propositions per query before the global ranking (Alg. 2)
    with_passages: bool = True  # false = "w/o chunk" ablation (Table 2)
    carry_fuzzy: bool = True  # paper (Step 2.3); false = the authors' code
    question_query: bool = False  # true = the authors' code (question as an extra query)
    resolve_without_context: bool = True  # paper (Alg. 1); false = the authors' code
    example_propositions_chars: int | None = None  # None = whole (App. E); the code: 1000
    answer: bool = True  # T²RAG's own answer (Step 3); false = qa_reader answers
    ranking: T2RAGRanking = T2RAGRanking.rrf
    k_rrf: int = 60
    llm_params: dict[str, Any] = field(default_factory=dict)


def register_schemas() -> None:
    """Structured schemas of config groups, in Hydra's ConfigStore (``group/<name>_schema``)."""
    ConfigStore.instance().store(group="agent", name="t2rag_schema", node=T2RAGAgentSchema)


register_schemas()

_SECRET = re.compile(r"(api[_-]?key|password|secret|token)$", re.IGNORECASE)


def register_resolvers() -> None:
    """``${repo:}`` = repository root, ``${cache:}`` = $GEAR_CACHE."""
    if not OmegaConf.has_resolver("repo"):
        OmegaConf.register_new_resolver("repo", lambda: str(REPO_DIR))
    if not OmegaConf.has_resolver("cache"):
        OmegaConf.register_new_resolver("cache", lambda: str(cache_dir()))


register_resolvers()


def validate(cfg: DictConfig) -> DictConfig:
    """Merge each schema'd group onto its schema; unknown keys or bad types raise ConfigError."""
    for key, schema in SCHEMAS.items():
        if cfg.get(key) is None:
            continue
        try:
            merged = OmegaConf.merge(OmegaConf.structured(schema), cfg[key])
        except OmegaConfBaseException as e:
            raise ConfigError(f"config group '{key}': {e.msg if hasattr(e, 'msg') else e}") from e
        with open_dict(cfg):
            cfg[key] = merged
    if cfg.dataset.missing_gold not in ("warn", "error"):
        raise ConfigError(f"dataset.missing_gold must be 'warn' or 'error', got '{cfg.dataset.missing_gold}'")
    if cfg.get("stage", "retrieve") not in ("retrieve", "index", "extract"):
        raise ConfigError(f"stage must be one of retrieve, index, extract; got '{cfg.stage}'")
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
    """Resolved, redacted plain dict (what is written to disk)."""
    return redact(OmegaConf.to_container(cfg, resolve=resolve, throw_on_missing=False))
