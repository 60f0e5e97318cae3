"""Typed configs: the registration of every component's settings dataclass in Hydra's ConfigStore, the schemas of
the run-level nodes (``run``, ``extraction``, ``report``), custom resolvers, the start-up validation, secret redaction.

Each component declares its settings once, beside its class (docs/ARCHITECTURE.md "Configs"): one
:class:`~gear_repro.utils.settings.Settings` dataclass (``GearAgentSettings`` in methods/gear/agent.py,
``HippoRAGSettings`` in methods/hipporag/retriever.py, ``LLMClientSettings`` in llm/client.py, ...) that is at once
the config group's Hydra schema, the constructor's settings and what ``describe()`` records. The component's
declaration (gear_repro/registry.py) names it by path; this module reads the registry when it is asked (the
schemas of a config's classes when validating it, all of them when composing: :func:`register_configs`) and
stores each under its schema name, with the run-level nodes' (:data:`NODE_SCHEMAS`). Every config group option
starts its defaults list with its schema, e.g. ``configs/agent/gear.yaml``::

    defaults:
      - /agent_gear_schema@_here_  # GearAgentSettings, stored as "agent_gear_schema" (schema_name())
      - _self_

and the plain top-level nodes get theirs from ``configs/config.yaml`` (``- /run_schema@run``). The dataclass holds
every default (and its range and meaning); a YAML file sets only what its option changes of them
(tests/test_config_defaults.py), so ``gear-repro <overrides> --cfg job`` is where a user reads every value of a run.
The schemas are stored at the ConfigStore's root, in no config group: ``gear-repro --help`` lists the groups' options, which are the user's
choices, and a schema is none. Hydra merges the YAML onto the schema while composing, so a misspelt key or a value
outside an Enum fails at composition with Hydra's own message (naming the full key), before anything runs;
:func:`validate` then checks, through the same dataclasses, what composition cannot: keys added with ``+``, numeric
ranges (:func:`~gear_repro.utils.settings.num`) and run-level rules. A new component adds its settings dataclass
beside its class and its declaration (``COMPONENTS``) in its folder.
"""

from __future__ import annotations

import copy
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf, open_dict, read_write
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue, OmegaConfBaseException

from gear_repro.core.triple_graph import GraphSettings
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, cache_dir
from gear_repro.utils.secrets import MASK, is_header_key, is_query_key, is_secret_key, mask_query, redact_text
from gear_repro.utils.settings import (
    Choice,
    check_number,
    check_renamed_overrides,
    choice,
    enum_of,
    num,
    refuse_unknown,
)

__all__ = ["NODE_SCHEMAS", "choice", "group_config", "group_schemas", "num", "redact", "register_configs",
           "to_container", "validate"]


class Stage(Choice):
    """What a run does (the top-level ``stage``; the runner's start-up)."""

    retrieve = "retrieve"
    index = "index"  # build the indexes only
    extract = "extract"  # offline triple extraction (K.1)


# -- schemas of the run-level nodes (the graph node's is GraphSettings, beside TripleIndex) ------------------------
@dataclass
class RunSchema:
    """``run:`` how a run evaluates, saves and proceeds (pipeline/runner.py, pipeline/question.py)."""

    ks: list[int] = field(default_factory=lambda: [5, 10, 15])  # evaluated recall ranks
    # true: a single-step method whose output depends on k runs once per evaluated k, its base k = that k (Table 2)
    matched_k: bool = True
    # with matched_k=false: the one k every question retrieves at (null = max(ks); a set value must be >= max(ks)).
    # A multi-step method's rounds take their own k (GEAR's agent.base_k)
    fixed_k: int | None = num(None, ge=1)
    save_depth: int = num(100, ge=1)  # ids of the final ranking kept per question in predictions.jsonl
    resume: bool = True  # skip the questions already in predictions.jsonl of the same run dir
    progress: bool = True  # tqdm bars
    fail_fast: bool = False  # true: re-raise a question's error; false: log it and count it in metrics (n_errors)
    allow_errors: bool = False  # false: a run whose questions errored exits 1 (they are scored as misses either way)
    # questions in flight: > 1 overlaps their LLM requests (API / vLLM endpoints); results and their order equal
    # workers=1; requests in flight are capped by llm.concurrency (docs/llm.md, "Concurrency")
    workers: int = num(1, ge=1)
    # a run whose embedding caches need more free disk ($GEAR_CACHE) or memory than the machine has stops at
    # start-up with the estimate (pipeline/capacity.py, docs/scale.md); false: start anyway
    capacity_check: bool = True


@dataclass
class ExtractionSchema:
    """``extraction:`` (stage=extract, K.1): LLM request params and the progress bar."""

    # extra LLM request params of the extraction calls, e.g. +extraction.params.max_tokens=1024
    params: dict[str, Any] = field(default_factory=dict)
    progress: bool | None = None  # tqdm bar over passages (null = run.progress)


@dataclass
class ReportSchema:
    """``report:`` where a run's rows go in the paper's tables (gear_repro/reporting/runs.py). ``paper`` and
    ``qa_paper`` must name a paper of paper_results.csv (checked by the report CLI); tables and settings may also name a
    block of our own (e.g. "T2RAG Table 2" for an ablation), so they are free text."""

    table: str | None = None  # recall metrics' table (null: Table 2); EM/F1 go to qa_table
    qa_table: str | None = None  # EM/F1's table with qa=true (null: Table 3)
    method: str | None = None  # row label (null: derived, e.g. "Hybrid + SyncGE", "GEAR")
    # the paper's setting to match when its table has several (paper_results.csv "setting"; null: a cell the paper
    # gives under several settings, e.g. Table 9's, has no paper number)
    setting: str | None = None
    paper: str = "GEAR"  # paper whose numbers stand beside ours (paper_results.csv "paper": GEAR | GRIEVER | ...)
    # retriever name -> that paper's row label (e.g. +report.labels.sbert=Dense); {} = ours
    labels: dict[str, str] = field(default_factory=dict)
    # config key -> value the paper's row presumes (a preset's ``method``); a run that differs is "<method> on <its base>"
    paper_config: dict[str, Any] = field(default_factory=dict)
    # config keys the preset's rows vary and ``method`` names (Table 4: beam.diversity); any other paper setting a
    # run differs in is added to ``method`` ("w/ diversity (fast scorer)")
    axes: list[str] = field(default_factory=list)
    qa_paper: str | None = None  # paper of the EM/F1 numbers beside ours (null: paper; T2RAG for agent=t2rag presets)
    qa_paper_table: str | None = None  # that paper's table for EM/F1 (null: qa_table)
    # that paper's setting for EM/F1 (null: its only one; T2RAG Table 1 has two: GPT-4o-mini | Gemini-2.5-flash)
    qa_setting: str | None = None


# -- the registration ---------------------------------------------------------------------------------------
def group_schemas() -> dict[str, dict[str, type]]:
    """group -> {schema name: the components' settings dataclass}, from the registry's declarations (imports every
    declared component's settings); a group option's YAML lists its schema first in its defaults."""
    from gear_repro.registry import components

    out: dict[str, dict[str, type]] = {}
    for c in components():
        out.setdefault(c.group, {})[c.schema] = c.settings_class()
    return out


def __getattr__(name: str) -> Any:
    """``GROUP_SCHEMAS`` (:func:`group_schemas`), made when asked: importing this module imports no component."""
    if name == "GROUP_SCHEMAS":
        return group_schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# plain top-level nodes: configs/config.yaml puts <name>_schema at package <name>
NODE_SCHEMAS: dict[str, type] = {"run": RunSchema, "graph": GraphSettings, "extraction": ExtractionSchema,
                                 "report": ReportSchema}


def schema_name(group: str, name: str) -> str:
    """The ConfigStore name of a group's schema, which its options name as ``/<that>@_here_``: ``llm_schema`` for
    the llm group's ``llm_schema``, ``agent_gear_schema`` for the agent group's ``gear_schema``."""
    return name if name == f"{group}_schema" else f"{group}_{name}"


_REGISTERED: set[tuple[str, str]] = set()  # (group, schema) of the schemas stored so far


def register_configs() -> None:
    """Store every schema in Hydra's ConfigStore, at its root (a schema in a config group would be listed by
    ``gear-repro --help`` among that group's options); imports every declared component's settings. Every composer
    calls it before composing: the CLI, ``api.compose``, :func:`group_config`, and scripts and tests composing with
    Hydra's API. Idempotent; a component registered since (``registry.register``) is stored on the next call."""
    from gear_repro.registry import components

    cs = ConfigStore.instance()
    for c in components():
        if (c.group, c.schema) not in _REGISTERED:
            cs.store(name=schema_name(c.group, c.schema), node=c.settings_class())
            _REGISTERED.add((c.group, c.schema))
    for name, node in NODE_SCHEMAS.items():
        cs.store(name=f"{name}_schema", node=node)


def group_config(group: str, option: str, overrides: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """One config group option composed through Hydra (schema, defaults list and all), e.g.
    ``instantiate(group_config("llm", "tiny"))`` in scripts and tests that build a single component."""
    from hydra import compose, initialize_config_dir

    from gear_repro.utils.paths import config_dir

    register_configs()
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


register_resolvers()  # the schemas are stored by register_configs(), when a composer asks: importing this module
# imports no component

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
    if not cfg.run.ks or any(k <= 0 for k in cfg.run.ks):
        raise ConfigError(f"run.ks must be positive ranks, got {list(cfg.run.ks)}")
    twice = sorted({k for k in cfg.run.ks if list(cfg.run.ks).count(k) > 1})
    if twice:  # a k-dependent method would run each repeated rank's pass again, for the same numbers
        raise ConfigError(f"run.ks lists {', '.join(map(str, twice))} more than once ({list(cfg.run.ks)}): each rank is "
                          f"evaluated once; use run.ks={sorted(set(cfg.run.ks))}")
    if cfg.run.save_depth < max(cfg.run.ks):  # a shorter saved ranking would silently truncate recall@k
        raise ConfigError(f"run.save_depth ({cfg.run.save_depth}) must be >= max(run.ks) ({max(cfg.run.ks)})")
    fixed_k = cfg.run.get("fixed_k")
    if fixed_k is not None and fixed_k < max(cfg.run.ks):  # R@k of a list shorter than k, under R@k's name
        raise ConfigError(f"run.fixed_k ({fixed_k}) must be >= max(run.ks) ({max(cfg.run.ks)}), or null: R@"
                          f"{max(cfg.run.ks)} would be measured on {fixed_k} passages")
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
    a class no schema names (a user's own component: its constructor checks it). Only the named class's declaration
    and settings are imported (:func:`gear_repro.registry.node_component`)."""
    from gear_repro.registry import node_component

    if key in NODE_SCHEMAS:
        return NODE_SCHEMAS[key]
    found = node_component(key, node)
    return found.settings_class() if found is not None else None


def check_settings(cfg: DictConfig) -> None:
    """The one validation path of settings: for every top-level node with a schema, a ConfigError naming the
    setting for a key its schema does not have (``+retriever.foo=1``), a value outside an Enum (a config whose
    group file does not list its schema) or a number outside its range (``hipporag.damping=1``); nested nodes
    through their own schema (``llm.server``, ``backend.bm25``, GRIEVER's ``triple_retriever``, HippoRAG's
    ``encoder``)."""
    for key in cfg:
        node = cfg.get(key)
        if isinstance(node, DictConfig):  # a config that records a renamed key (one loaded from an old run folder)
            check_renamed_overrides([f"{key}.{k}" for k in node])
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
