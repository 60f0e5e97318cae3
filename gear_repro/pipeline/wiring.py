"""Wiring: the one place that turns the run config into objects (docs/ARCHITECTURE.md "Contracts").

Every component takes what it uses as named constructor arguments; this module hands them over. A config node's
``_target_`` class finds its declaration in the registry (:mod:`gear_repro.registry`; the first class of its MRO
declared there, so a subclass is wired as its parent), which says how: a function of the node giving the
dependencies, or the constructor's argument names (:data:`~gear_repro.pipeline.components.DEPENDENCIES`). The
object is built as ``instantiate(node, _partial_=True)(**dependencies)``: the node's own settings converted exactly
as Hydra does, the dependencies (retrievers, collections, the LLM, dataset pieces) passed as they are, never copied
into a config. A user's class of no declaration that subclasses its group's base
(:mod:`gear_repro.pipeline.components`) is built by argument name too. Shared objects come from
:class:`~gear_repro.pipeline.resources.Resources` (built lazily, cached); objects the wiring builds once per run
(retrievers, HippoRAG's graph) are cached there too (``Resources.shared``).

Run-level values reach a component by interpolation in its YAML (``max_rounds: ${dataset.max_rounds}``); no
component receives the config or ``Resources``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gear_repro.methods.base import Expansion, Method, MethodOutput
from gear_repro.pipeline.resources import Resources, target_class
from gear_repro.qa.reader import AnswerReader
from gear_repro.registry import component_for, find
from gear_repro.retrieval.base import Retriever
from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError

__all__ = ["Method", "MethodOutput", "answer_reader", "build", "build_expansion", "carry_over", "provide", "requested", "run_method", "build_method", "build_qa_reader", "build_retriever",
           "check_components", "declaration", "hipporag", "locate", "passage_retriever", "target_class",
           "triple_retriever"]



def _make(node: DictConfig, recursive: bool = True, **deps: Any) -> Any:
    """``_target_(**settings of node, **deps)``; the settings converted by Hydra, the dependencies untouched."""
    return instantiate(node, _partial_=True, _recursive_=recursive)(**deps)


def declaration(cls: type | None) -> Component | None:
    """The registry's declaration of ``cls`` or, for a subclass of a declared class, of the first such class of its
    MRO (a subclass is wired as its parent)."""
    for klass in (cls.__mro__ if cls is not None else ()):
        found = component_for(f"{klass.__module__}.{klass.__qualname__}")
        if found is not None:
            return found
    return None


def build(node: DictConfig, res: Resources, group: str, **given: Any) -> Any:
    """The component a config node names, built from its declaration: its ``wiring`` or its constructor's argument
    names (``given``: dependencies the caller has, e.g. a retriever's collection); a class of no declaration that
    subclasses the group's user base is built by argument name too (a retriever's rankings then checked)."""
    cls = target_class(node)
    found = declaration(cls)
    if found is not None and found.group == group:
        deps = (found.wiring(node, lambda name: _dependency(name, res)) if found.wiring is not None
                else _dependencies(node, res, **given))
        return _make(node, recursive=found.recursive, **{**given, **deps})
    if cls is not None and _user_base(group) is not None and issubclass(cls, _user_base(group)):
        if group == "retriever":
            from gear_repro.pipeline.components import CheckedRetriever

            collection = given["collection"]
            return CheckedRetriever(_make(node, **_dependencies(node, res, **given)), frozenset(collection.ids),
                                    collection.name)
        return _make(node, recursive=False, **_dependencies(node, res))
    base = _BASES.get(group, ("gear_repro.BaseMethod", ""))[0]
    raise ConfigError(f"{group}: no wiring for {node.get('_target_')!r}; subclass {base} for a component of your "
                      "own, or declare its class in the registry (gear_repro/registry.py)")


# the keys of the objects the wiring builds once per run (Resources.shared)
_PASSAGE_RETRIEVER, _TRIPLE_RETRIEVER, _HIPPORAG, _METHOD, _QA_READER = (
    "passage_retriever", "triple_retriever", "hipporag", "method", "qa_reader")


# -- the config's classes, checked before any data loads ------------------------------------------------------
# group -> (the class a component of that group must subclass, what it is)
_BASES = {"retriever": ("gear_repro.BaseRetriever", "retriever"), "expansion": ("gear_repro.BaseExpansion", "expansion"),
          "agent": ("gear_repro.BaseMethod", "method"), "qa_reader": ("gear_repro.qa.QAReader", "QA reader")}


def _user_base(group: str) -> type | None:
    """The base class a user's component of ``group`` subclasses to be wired by argument name (None: the group has
    none: its components are the registry's only)."""
    from gear_repro.pipeline import components

    return {"retriever": components.BaseRetriever, "expansion": components.BaseExpansion,
            "agent": components.BaseMethod}.get(group)


def locate(path: str, key: str) -> Any:
    """The object ``path`` (``pkg.module.Class``) names, imported; else a one-line ConfigError naming ``key`` (the
    setting), the path and why (no such module, no such name in it, or the module's own error while importing)."""
    import importlib

    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(f"{e.name}.")):
                continue  # not a module: a shorter prefix may be, the rest then names attributes
            raise ConfigError(f"{key}={path}: importing {module} failed: {type(e).__name__}: {e}") from None
        except Exception as e:  # the user's module itself fails (a syntax error, an exception at import)
            raise ConfigError(f"{key}={path}: importing {module} failed: {type(e).__name__}: {e}") from None
        for j, name in enumerate(parts[i:]):
            if not hasattr(obj, name):
                raise ConfigError(f"{key}={path}: {'.'.join(parts[:i + j])} has no {name!r}") from None
            obj = getattr(obj, name)
        return obj
    raise ConfigError(f"{key}={path}: no module named {parts[0]!r} on the import path (a module of your own: run "
                      "gear-repro from the folder that holds it, install it, or add its folder to PYTHONPATH)")


def _targets(node: Any, key: str = "") -> list[tuple[str, str]]:
    """(setting, path) of every string ``_target_`` in a config container, outside ``hydra``."""
    if isinstance(node, dict):
        found = [(key, node["_target_"])] if isinstance(node.get("_target_"), str) else []
        for k, v in node.items():
            if k != "hydra":
                found += _targets(v, f"{key}.{k}" if key else str(k))
        return found
    if isinstance(node, list):
        return [t for i, v in enumerate(node) for t in _targets(v, f"{key}[{i}]")]
    return []


def check_components(cfg: DictConfig) -> None:
    """Every ``_target_`` of ``cfg`` imports, and each class the wiring builds by its base (retriever, expansion,
    agent, qa_reader) has a wiring: ConfigError of one line naming the setting, the path and the base class to
    subclass. Run at start-up, before the data loads (a bad path otherwise failed after it, in a traceback)."""
    for key, path in _targets(OmegaConf.to_container(cfg, resolve=False)):
        if "${" in path:
            continue
        obj = locate(path, f"{key}._target_")
        group = "retriever" if key == "retriever.triple_retriever" else key
        if group not in _BASES or not isinstance(obj, type):
            continue
        found = declaration(obj)
        base = _user_base(group)
        if not (found is not None and found.group == group) and not (base is not None and issubclass(obj, base)):
            base, what = _BASES[group]
            raise ConfigError(f"{key}._target_={path}: {obj.__name__} does not subclass {base}; a {what} of your own "
                              f"must, so the wiring can hand its constructor what it names (gear_repro/pipeline/"
                              f"components.py)")


# -- retrievers ---------------------------------------------------------------------------------------------
def _retriever_node(node: DictConfig) -> DictConfig:
    """The retriever config without its nested ``triple_retriever`` config (see :func:`triple_retriever`)."""
    return OmegaConf.masked_copy(node, [k for k in node if k != "triple_retriever"])


def build_retriever(node: DictConfig, res: Resources, collection: Any) -> Retriever:
    """A retriever config over ``collection`` (passages or triples)."""
    return build(_retriever_node(node), res, "retriever", collection=collection)


def passage_retriever(res: Resources) -> Retriever:
    """h_base over the passages C: the ``retriever`` group (built once per run)."""
    return res.shared(_PASSAGE_RETRIEVER, lambda: build_retriever(res.cfg.retriever, res, res.passages))


def triple_retriever(res: Resources) -> Retriever:
    """h_base over T for tripleLink/passageLink: the retriever config itself, or its nested ``triple_retriever``
    config when it has one (GRIEVER retrieves passages only; its YAML names the hybrid retriever for T)."""
    rcfg = res.cfg.retriever
    node = rcfg.triple_retriever if rcfg.get("triple_retriever") else rcfg
    return res.shared(_TRIPLE_RETRIEVER, lambda: build_retriever(node, res, res.triples))


def hipporag(res: Resources) -> Any:
    """The run's HippoRAG retriever (``hipporag`` group; built once, described in run.json)."""
    node = res.cfg.get("hipporag")
    if node is None:
        raise ConfigError("this run needs HippoRAG but no `hipporag` config is selected (agent=hipporag|hipporag_ircot)")
    return res.shared(_HIPPORAG, lambda: build(node, res, "hipporag"), provenance=True)


# -- expansions and methods ---------------------------------------------------------------------------------
def _dependency(name: str, res: Resources) -> Any:
    """The object a user component's constructor argument ``name`` asks for (pipeline/components.py:DEPENDENCIES)."""
    ds = res.dataset
    build: dict[str, Callable[[], Any]] = {
        "retriever": lambda: passage_retriever(res), "triple_retriever": lambda: triple_retriever(res),
        "expansion": lambda: build_expansion(res), "llm": lambda: res.llm, "embedder": lambda: res.embedder,
        "backend": lambda: res.backend, "passages": lambda: ds.passages, "triples": lambda: ds.triples,
        "passage_by_id": lambda: ds.passage_by_id, "passage_collection": lambda: res.passages,
        "triple_collection": lambda: res.triples, "triple_index": lambda: res.triple_index,
        "question_ids": lambda: [q.id for q in ds.questions], "beam": lambda: res.cfg.get("beam"),
        "hipporag": lambda: hipporag(res)}
    return build[name]()


def _asked(node: DictConfig, given: Any = ()) -> list[str]:
    """The constructor arguments of ``node``'s class that its config node does not set and the wiring hands over:
    those in ``given`` (what the caller has) and :data:`~gear_repro.pipeline.components.DEPENDENCIES`' names (a
    retriever's ``collection`` is always given, never built)."""
    import inspect

    from gear_repro.pipeline.components import DEPENDENCIES

    cls = target_class(node)
    params = inspect.signature(cls.__init__).parameters if cls is not None else {}
    return [n for n in params if n != "self" and n not in node
            and (n in given or (n in DEPENDENCIES and n != "collection"))]


def _dependencies(node: DictConfig, res: Resources, **given: Any) -> dict[str, Any]:
    """The dependencies a user component's constructor names and its config node does not set: only those are
    built (a BM25-only component never loads the embedder)."""
    return {n: given[n] if n in given else _dependency(n, res) for n in _asked(node, given)}


def build_expansion(res: Resources) -> Expansion:
    """The run's graph expansion (``expansion`` group with the ``beam`` group); the ``none`` option's class when
    unset."""
    node = res.cfg.get("expansion")
    if not node:
        return locate(find("expansion", "none_schema").target, "expansion._target_")()
    return build(node, res, "expansion")


def build_method(cfg: DictConfig, res: Resources) -> Method:
    """A method from ``cfg.agent`` (``res.cfg`` is the config the resources build from; ``cfg`` is kept for the
    callers' symmetry and must be the same run's); :func:`run_method` is the run's, built once."""
    return build(cfg.agent, res, "agent")


def run_method(res: Resources) -> Method:
    """The run's method: the one handed to :func:`provide`, else built from ``agent`` once."""
    return res.shared(_METHOD, lambda: build_method(res.cfg, res))


def answer_reader(res: Resources) -> AnswerReader:
    """The ``qa_reader`` config's reader, built once, whether or not the run has ``qa=true`` (the API's one-off
    answers)."""
    return res.shared(_QA_READER, lambda: build(res.cfg.qa_reader, res, "qa_reader"))


def provide(res: Resources, *, retriever: Retriever | None = None, triple_retriever: Retriever | None = None,
            method: Method | None = None) -> None:
    """Objects of the caller's own in place of the config's passage retriever, triple retriever or method (the
    Python API's ``retriever=``/``method=``), before anything is built from ``res``. A retriever of your own is
    handed over as it is: wrap it in :class:`~gear_repro.pipeline.components.CheckedRetriever` to have its rankings
    checked."""
    for key, value in ((_PASSAGE_RETRIEVER, retriever), (_TRIPLE_RETRIEVER, triple_retriever), (_METHOD, method)):
        if value is not None:
            res.shared(key, lambda value=value: value)


def carry_over(old: Resources, new: Resources, *, method: bool) -> None:
    """Hand ``new`` (the same config over other questions) the retrievers ``old`` built (an index built once) and,
    with ``method``, its method."""
    provide(new, retriever=old.built(_PASSAGE_RETRIEVER), triple_retriever=old.built(_TRIPLE_RETRIEVER),
            method=old.built(_METHOD) if method else None)


def requested(cfg: DictConfig) -> frozenset[str]:
    """The shared objects (:data:`~gear_repro.pipeline.components.DEPENDENCIES`' names) a retrieval run of ``cfg``
    asks for, found by walking the wiring without building anything: a component's declared ``wiring`` called with a
    dependency that records the names, else its constructor's argument names, as :func:`build` hands them over. A
    retriever searches ``passage_collection`` (the triple retriever ``triple_collection``), the triple graph reads
    ``triple_collection``. The capacity check counts the collections a run embeds by it."""
    return _walk(cfg)[0]


def _walk(cfg: DictConfig) -> tuple[frozenset[str], frozenset[str]]:
    """:func:`requested`'s names, and those a component asks for by name itself (not the collection under a
    retriever or the triple graph)."""
    seen: set[str] = set()
    own: set[str] = set()

    def asks(node: Any, group: str, given: tuple[str, ...] = ()) -> list[str]:
        cls = target_class(node)
        found = declaration(cls)
        if found is not None and found.group == group and found.wiring is not None:
            names: list[str] = []
            found.wiring(node, lambda name: names.append(name))
        else:
            names = [n for n in _asked(node, given) if n not in given]
        own.update(names)
        return names

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        more: list[str] = {"triple_index": ["triple_collection"],
                           "retriever": ["passage_collection"], "triple_retriever": ["triple_collection"]}.get(name, [])
        if name in ("retriever", "triple_retriever"):
            more += asks(_retriever_config(cfg, name == "triple_retriever"), "retriever", ("collection",))
        elif name == "expansion" and cfg.get("expansion"):
            more += asks(cfg.expansion, "expansion")
        elif name == "hipporag" and cfg.get("hipporag") is not None:
            more += asks(cfg.hipporag, "hipporag")
        for m in more:
            visit(m)

    for name in asks(cfg.agent, "agent") + (asks(cfg.qa_reader, "qa_reader") if cfg.get("qa") else []):
        visit(name)
    return frozenset(seen), frozenset(own)


def _retriever_config(cfg: DictConfig, triples: bool) -> DictConfig | None:
    """The config of the run's passage retriever, or with ``triples`` of its triple retriever (``triple_retriever``
    where set, else the passage retriever's kind)."""
    rcfg = cfg.get("retriever")
    if triples and rcfg is not None and rcfg.get("triple_retriever"):
        return rcfg.triple_retriever
    return _retriever_node(rcfg) if rcfg is not None else None


def _searched(cfg: DictConfig, asked: frozenset[str] | None, searches: str, own: str | None = None) -> frozenset[str]:
    """The collections under a ``retriever`` or ``triple_retriever`` among the ``asked`` dependencies whose class
    has the attribute ``searches`` (default true), and the collections a component names in its attribute
    ``own``."""
    asked = requested(cfg) if asked is None else asked
    found = {name for name, dep in (("passages", "retriever"), ("triples", "triple_retriever"))
             if dep in asked and getattr(target_class(_retriever_config(cfg, name == "triples")), searches, True)}
    for key in ("agent", "expansion", "hipporag") if own else ():
        found |= getattr(target_class(cfg.get(key)), own, frozenset())
    return frozenset(found)


def knn_searched(cfg: DictConfig, asked: frozenset[str] | None = None) -> frozenset[str]:
    """The collections (``"passages"``, ``"triples"``) a retrieval run of ``cfg`` searches by kNN, the ones whose
    faiss index it builds (on the first search: ``backends/memory.py``): those under a ``retriever`` or
    ``triple_retriever`` that searches by kNN (its class's ``searches_knn``) among the ``asked`` dependencies
    (:func:`requested`), and those a component searches with a retriever of its own (its class's
    ``knn_collections``: T²RAG's propositions). The triple graph and HippoRAG 2 read a collection's vectors whole."""
    return _searched(cfg, asked, "searches_knn", "knn_collections")


def vectors_read(cfg: DictConfig) -> frozenset[str]:
    """The collections whose vectors a retrieval run reads, and so embeds (a collection encodes its vectors on the
    first read: ``DocCollection.vectors``): those under a retriever or triple retriever whose class
    ``needs_vectors`` (not BM25's), the triples under the triple graph (NaiveGE, SyncGE and GEAR score their
    vectors), and a collection a component asks for itself (T²RAG's propositions, HippoRAG 2's passages and facts).
    BM25 + NaiveGE searches the passages by BM25 alone, so it never embeds them."""
    asked, own = _walk(cfg)
    found = set(_searched(cfg, asked, "needs_vectors"))
    found |= {"triples"} if "triple_index" in asked else set()
    return frozenset(found | {name for name, dep in (("passages", "passage_collection"),
                                                     ("triples", "triple_collection")) if dep in own})


def bm25_searched(cfg: DictConfig, asked: frozenset[str] | None = None) -> frozenset[str]:
    """The collections a retrieval run of ``cfg`` searches by BM25, the ones whose BM25 index it builds (on the
    first search): those under a retriever whose class's ``searches_bm25`` is true (not SBERT's dense retriever).
    T²RAG, HippoRAG 2 and NaiveGE read or search the triples by their vectors only."""
    return _searched(cfg, asked, "searches_bm25")


def build_qa_reader(cfg: DictConfig, res: Resources) -> AnswerReader | None:
    """The K.3 QA reader when ``qa=true`` (else None)."""
    return build(cfg.qa_reader, res, "qa_reader") if cfg.get("qa") else None
