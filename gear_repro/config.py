"""Structured-config schemas, custom resolvers, validation and secret redaction for Hydra configs.

Schemas type-check the plain (non-``_target_``) groups at run start, so a misspelt key or a wrong
type fails with the setting's name instead of being ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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


SCHEMAS: dict[str, Any] = {"dataset": DatasetSchema, "run": RunSchema}
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
        if key not in cfg:
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
