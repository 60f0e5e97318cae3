"""Wiring: the one place that turns the run config into objects (docs/ARCHITECTURE.md "Contracts").

Every component takes what it uses as named constructor arguments; this module hands them over. A config node's
``_target_`` class picks its wiring function from :func:`wirings` (the first class of its MRO with an entry, so a
subclass inherits its parent's wiring); the function builds the object as
``instantiate(node, _partial_=True)(**dependencies)``: the node's own settings converted exactly as Hydra does,
the dependencies (retrievers, collections, the LLM, dataset pieces) passed as they are, never copied into a config.
Shared objects come from :class:`~gear_repro.pipeline.resources.Resources` (built lazily, cached); objects the
wiring builds once per run (retrievers, HippoRAG's graph) are cached there too (``Resources.shared``).

Run-level values reach a component by interpolation in its YAML (``max_rounds: ${dataset.max_rounds}``); no
component receives the config or ``Resources``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gear_repro.embedding.embedder import Embedder, SentenceEmbedder
from gear_repro.methods.base import Expansion, Method, MethodOutput
from gear_repro.pipeline.resources import Resources, target_class
from gear_repro.qa.reader import AnswerReader
from gear_repro.retrieval.base import Retriever
from gear_repro.utils.errors import ConfigError

__all__ = ["Method", "MethodOutput", "build_expansion", "build_method", "build_qa_reader", "check_components",
           "hipporag", "locate", "passage_retriever", "target_class", "triple_retriever", "wirings"]

Wiring = Callable[[DictConfig, Resources], Any]  # (the component's config node, the run's resources) -> object


def _make(node: DictConfig, recursive: bool = True, **deps: Any) -> Any:
    """``_target_(**settings of node, **deps)``; the settings converted by Hydra, the dependencies untouched."""
    return instantiate(node, _partial_=True, _recursive_=recursive)(**deps)


def _wire(node: DictConfig, res: Resources, group: str) -> Any:
    cls = target_class(node)
    table = wirings()
    for klass in (cls.__mro__ if cls is not None else ()):
        if klass in table:
            return table[klass](node, res)
    raise ConfigError(f"{group}: no wiring for {node.get('_target_')!r}; subclass gear_repro.api.BaseMethod "
                      "(or BaseExpansion) for a component of your own, or add its class to "
                      "gear_repro/pipeline/wiring.py:wirings()")


# -- the config's classes, checked before any data loads ------------------------------------------------------
# group -> (the class a component of that group must subclass, what it is)
_BASES = {"retriever": ("gear_repro.BaseRetriever", "retriever"), "expansion": ("gear_repro.BaseExpansion", "expansion"),
          "agent": ("gear_repro.BaseMethod", "method"), "qa_reader": ("gear_repro.qa.QAReader", "QA reader")}


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
        table = _retriever_wirings() if group == "retriever" else wirings()
        if not any(klass in table for klass in obj.__mro__):
            base, what = _BASES[group]
            raise ConfigError(f"{key}._target_={path}: {obj.__name__} does not subclass {base}; a {what} of your own "
                              f"must, so the wiring can hand its constructor what it names (gear_repro/pipeline/"
                              f"components.py)")


# -- retrievers ---------------------------------------------------------------------------------------------
def _retriever_node(node: DictConfig) -> DictConfig:
    """The retriever config without its nested ``triple_retriever`` config (see :func:`triple_retriever`)."""
    return OmegaConf.masked_copy(node, [k for k in node if k != "triple_retriever"])


def _base_retriever(node: DictConfig, res: Resources, collection: Any) -> Retriever:
    return _make(_retriever_node(node), collection=collection, embedder=res.embedder)


def _griever_retriever(node: DictConfig, res: Resources, collection: Any) -> Retriever:
    ds = res.dataset
    return _make(_retriever_node(node), collection=collection, embedder=res.embedder, passages=ds.passages,
                 triples=ds.triples, backend=res.backend)


def _user_retriever(node: DictConfig, res: Resources, collection: Any) -> Retriever:
    """A user's retriever (a :class:`~gear_repro.pipeline.components.BaseRetriever`): its constructor's dependencies by
    name, the collection among them), its rankings checked against the collection's ids."""
    from gear_repro.pipeline.components import CheckedRetriever

    return CheckedRetriever(_make(_retriever_node(node), **_dependencies(node, res, collection=collection)),
                            frozenset(collection.ids), collection.name)


def _retriever_wirings() -> dict[type, Callable[[DictConfig, Resources, Any], Retriever]]:
    from gear_repro.methods.griever.retriever import GrieverRetriever
    from gear_repro.pipeline.components import BaseRetriever
    from gear_repro.retrieval.base import BM25Retriever, ComposedRetriever, DenseRetriever, HybridRetriever

    return {BM25Retriever: _base_retriever, DenseRetriever: _base_retriever, HybridRetriever: _base_retriever,
            ComposedRetriever: _base_retriever, GrieverRetriever: _griever_retriever, BaseRetriever: _user_retriever}


def build_retriever(node: DictConfig, res: Resources, collection: Any) -> Retriever:
    """A retriever config over ``collection`` (passages or triples)."""
    cls = target_class(node)
    table = _retriever_wirings()
    for klass in (cls.__mro__ if cls is not None else ()):
        if klass in table:
            return table[klass](node, res, collection)
    raise ConfigError(f"retriever: no wiring for {node.get('_target_')!r}; subclass gear_repro.api.BaseRetriever "
                      "for a retriever of your own, or add its class to gear_repro/pipeline/wiring.py:_retriever_wirings()")


def passage_retriever(res: Resources) -> Retriever:
    """h_base over the passages C: the ``retriever`` group (built once per run)."""
    return res.shared("passage_retriever", lambda: build_retriever(res.cfg.retriever, res, res.passages))


def triple_retriever(res: Resources) -> Retriever:
    """h_base over T for tripleLink/passageLink: the retriever config itself, or its nested ``triple_retriever``
    config when it has one (GRIEVER retrieves passages only; its YAML names the hybrid retriever for T)."""
    rcfg = res.cfg.retriever
    node = rcfg.triple_retriever if rcfg.get("triple_retriever") else rcfg
    return res.shared("triple_retriever", lambda: build_retriever(node, res, res.triples))


def _phrase_encoder(setting: Any) -> Embedder | None:
    """``hipporag.encoder``: None (the run's embedder), a model name, or an embedder config node."""
    if setting is None:
        return None
    if isinstance(setting, str):
        return SentenceEmbedder(model=setting, show_progress=False)
    return instantiate(setting)


def hipporag(res: Resources) -> Any:
    """The run's HippoRAG retriever (``hipporag`` group; built once, described in run.json)."""
    node = res.cfg.get("hipporag")
    if node is None:
        raise ConfigError("this run needs HippoRAG but no `hipporag` config is selected (agent=hipporag|hipporag_ircot)")

    def build() -> Any:  # the node went through HippoRAGSettings: every setting is present, with its default
        v2 = node.version == "v2"
        fallback = node.no_entity_fallback == "retriever"
        ds = res.dataset
        return _make(node, recursive=False, passages=ds.passages, triples=ds.triples, embedder=res.embedder,
                     llm=None if v2 else res.llm, fallback_retriever=passage_retriever(res) if fallback else None,
                     passage_collection=res.passages if v2 else None, triple_collection=res.triples if v2 else None,
                     encoder=_phrase_encoder(node.get("encoder")))

    return res.shared("hipporag", build, provenance=True)


# -- expansions and methods ---------------------------------------------------------------------------------
def _no_expansion(node: DictConfig, res: Resources) -> Expansion:
    return _make(node)


def _graph_expansion(node: DictConfig, res: Resources) -> Expansion:
    return _make(node, triple_index=res.triple_index, embedder=res.embedder, beam=res.cfg.get("beam"))


def _sync_expansion(node: DictConfig, res: Resources) -> Expansion:
    return _make(node, triple_index=res.triple_index, embedder=res.embedder, beam=res.cfg.get("beam"),
                 triple_retriever=triple_retriever(res), llm=res.llm, passage_by_id=res.dataset.passage_by_id)


def _single_step(node: DictConfig, res: Resources) -> Method:
    return _make(node, recursive=False, retriever=passage_retriever(res), expansion=build_expansion(res))


def _gear(node: DictConfig, res: Resources) -> Method:
    return _make(node, recursive=False, retriever=passage_retriever(res), triple_retriever=triple_retriever(res),
                 triple_index=res.triple_index, llm=res.llm, passage_by_id=res.dataset.passage_by_id,
                 expansion=build_expansion(res))


def _hipporag_method(node: DictConfig, res: Resources) -> Method:
    return _make(node, recursive=False, hipporag=hipporag(res))


def _ircot(node: DictConfig, res: Resources) -> Method:
    via_hipporag = node.retriever == "hipporag"  # IRCoTAgentSettings: always set
    return _make(node, recursive=False, llm=res.llm, passage_by_id=res.dataset.passage_by_id,
                 question_ids=[q.id for q in res.dataset.questions],
                 base_retriever=None if via_hipporag else passage_retriever(res),
                 hipporag=hipporag(res) if via_hipporag else None)


def _t2rag(node: DictConfig, res: Resources) -> Method:
    ds = res.dataset
    return _make(node, recursive=False, llm=res.llm, embedder=res.embedder, triple_collection=res.triples,
                 triples=ds.triples, passage_by_id=ds.passage_by_id)


def _dependency(name: str, res: Resources) -> Any:
    """The object a user component's constructor argument ``name`` asks for (pipeline/components.py:DEPENDENCIES)."""
    ds = res.dataset
    build: dict[str, Callable[[], Any]] = {
        "retriever": lambda: passage_retriever(res), "triple_retriever": lambda: triple_retriever(res),
        "expansion": lambda: build_expansion(res), "llm": lambda: res.llm, "embedder": lambda: res.embedder,
        "backend": lambda: res.backend, "passages": lambda: ds.passages, "triples": lambda: ds.triples,
        "passage_by_id": lambda: ds.passage_by_id, "passage_collection": lambda: res.passages,
        "triple_collection": lambda: res.triples, "triple_index": lambda: res.triple_index,
        "question_ids": lambda: [q.id for q in ds.questions]}
    return build[name]()


def _dependencies(node: DictConfig, res: Resources, **given: Any) -> dict[str, Any]:
    """The dependencies a user component's constructor names and its config node does not set: only those are
    built (a BM25-only component never loads the embedder)."""
    import inspect

    from gear_repro.pipeline.components import DEPENDENCIES

    cls = target_class(node)
    params = inspect.signature(cls.__init__).parameters if cls is not None else {}
    out = {}
    for name in params:
        if name in node or name == "self":
            continue
        if name in given:
            out[name] = given[name]
        elif name in DEPENDENCIES and name != "collection":
            out[name] = _dependency(name, res)
    return out


def _user_component(node: DictConfig, res: Resources) -> Any:
    """A user's method or expansion (:mod:`gear_repro.pipeline.components` base classes): dependencies by name."""
    return _make(node, recursive=False, **_dependencies(node, res))


def _qa_reader(node: DictConfig, res: Resources) -> AnswerReader:
    return _make(node, recursive=False, llm=res.llm, passage_by_id=res.dataset.passage_by_id)


@cache
def wirings() -> dict[type, Wiring]:
    """Component class -> its wiring function: every class a config's ``_target_`` may name (methods, expansions,
    the QA reader). A new method of the harness adds one entry here; a user's own method or expansion subclasses
    :class:`~gear_repro.pipeline.components.BaseMethod` / ``BaseExpansion`` and is found by that base class."""
    from gear_repro.methods.gear.agent import GearAgent
    from gear_repro.methods.gear.expansion import GraphExpansion, NoExpansion, SyncGE
    from gear_repro.methods.hipporag.method import HippoRAGMethod
    from gear_repro.methods.ircot import IRCoTAgent
    from gear_repro.methods.single import SingleStep
    from gear_repro.methods.t2rag.method import T2RAGAgent
    from gear_repro.pipeline.components import BaseExpansion, BaseMethod
    from gear_repro.qa.reader import QAReader

    return {NoExpansion: _no_expansion, GraphExpansion: _graph_expansion, SyncGE: _sync_expansion,
            SingleStep: _single_step, GearAgent: _gear, HippoRAGMethod: _hipporag_method, IRCoTAgent: _ircot,
            T2RAGAgent: _t2rag, QAReader: _qa_reader, BaseMethod: _user_component, BaseExpansion: _user_component}


def build_expansion(res: Resources) -> Expansion:
    """The run's graph expansion (``expansion`` group with the ``beam`` group); NoExpansion when unset."""
    from gear_repro.methods.gear.expansion import NoExpansion

    node = res.cfg.get("expansion")
    if not node:
        return NoExpansion()
    return _wire(node, res, "expansion")


def build_method(cfg: DictConfig, res: Resources) -> Method:
    """The run's method from ``cfg.agent`` (``res.cfg`` is the config the resources build from; ``cfg`` is kept
    for the callers' symmetry and must be the same run's)."""
    return _wire(cfg.agent, res, "agent")


def build_qa_reader(cfg: DictConfig, res: Resources) -> AnswerReader | None:
    """The K.3 QA reader when ``qa=true`` (else None)."""
    return _wire(cfg.qa_reader, res, "qa_reader") if cfg.get("qa") else None
