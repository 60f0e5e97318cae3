"""Lazily built objects shared by one run: dataset, index engine, embedder, collections, triple graph, LLM
(docs/ARCHITECTURE.md "Contracts").

Nothing is built until the wiring asks for it, so a BM25-only run never loads an embedder and a run without
graph expansion never indexes triples. ``Resources`` is handed to the wiring (:mod:`gear_repro.pipeline.wiring`)
and the runner only; components receive the objects themselves as constructor arguments. Tests and scripts
inject doubles through the constructor: ``Resources(cfg, llm=ScriptedLLM(), embedder=HashEmbedder())``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig

from gear_repro.backends.base import Backend, Collection, IndexDoc
from gear_repro.core.triple_graph import TripleIndex
from gear_repro.data import Dataset, load_dataset
from gear_repro.data.dataset import prepared_as, prepared_from
from gear_repro.embedding.embedder import Embedder
from gear_repro.llm.base import LLM
from gear_repro.utils.errors import ConfigError, DataError
from gear_repro.utils.settings import as_dict

log = logging.getLogger(__name__)

_UNSET: Any = object()


def target_class(node: Any) -> type | None:
    """The class a config node's ``_target_`` names (None for an absent node or one without ``_target_``)."""
    if node is None or not hasattr(node, "get") or not node.get("_target_"):
        return None
    return get_class(str(node["_target_"]))


class Resources:
    """The run's shared objects, each built on first access and cached.

    Args:
        cfg: the run config.
        dataset, backend, embedder, passages, triples, triple_index, llm: objects to use instead of building
            them from the config (tests: doubles; scripts: objects shared across runs). ``embedder=None`` is a
            value: the run has no embedder (a BM25 run that must not embed).
    """

    def __init__(self, cfg: DictConfig, *, dataset: Dataset | None = _UNSET, backend: Backend = _UNSET,
                 embedder: Embedder | None = _UNSET, passages: Collection = _UNSET, triples: Collection = _UNSET,
                 triple_index: TripleIndex = _UNSET, llm: LLM = _UNSET):
        self.cfg = cfg
        given = {"dataset": dataset, "backend": backend, "embedder": embedder, "passages": passages,
                 "triples": triples, "triple_index": triple_index, "llm": llm}
        for name, value in given.items():
            if value is not _UNSET and not (name == "dataset" and value is None):
                self.__dict__[name] = value  # the cached_property's slot: the given object is the built one
        self._shared: dict[str, Any] = {}
        self._provenance: list[str] = []

    # -- what is built --------------------------------------------------------------------------------
    def built(self, name: str) -> Any | None:
        """The object ``name`` if it was built (or given), else None; never builds it."""
        return self.__dict__.get(name, self._shared.get(name))

    def shared(self, key: str, build: Callable[[], Any], *, provenance: bool = False) -> Any:
        """The object ``key``, built once by ``build`` (the wiring's objects shared within a run: retrievers, the
        HippoRAG graph). With ``provenance`` its ``describe()`` goes to run.json under ``key``."""
        if key not in self._shared:
            self._shared[key] = build()
            if provenance:
                self._provenance.append(key)
        return self._shared[key]

    def provenance(self) -> dict[str, Any]:
        """``describe()`` of the shared objects registered with ``provenance=True`` (run.json)."""
        return {key: self._shared[key].describe() for key in self._provenance}

    # -- the shared objects -----------------------------------------------------------------------------
    @cached_property
    def dataset(self) -> Dataset:
        d = self.cfg.dataset
        recorded = prepared_from(d.path)
        if recorded is not None and prepared_as(d.path) is None and not d.get("allow_unknown_source", False):
            raise ConfigError(  # an unknown source would be accepted under any group: its numbers in any column
                f"dataset.path={d.path}: its prepare_stats.json records the source dataset as '{recorded}', none of "
                f"musique, hotpotqa, 2wikimultihopqa, so the run cannot tell whether it belongs under "
                f"dataset.paper_name={d.get('paper_name')} (that column, answer script and rounds). Re-prepare it with "
                f"gear-repro-prepare --dataset {{musique,hotpotqa,2wikimultihopqa}}, or, for a dataset that is none "
                f"of these, set dataset.allow_unknown_source=true")
        prepared, group = prepared_as(d.path) or (None, None)
        if prepared is not None and prepared != d.get("paper_name"):  # its numbers beside another paper column
            raise ConfigError(
                f"dataset.path={d.path} was prepared from {prepared} data (its prepare_stats.json) but "
                f"dataset.paper_name is {d.get('paper_name')} (from the dataset group): the tables would put it "
                f"under {d.get('paper_name')}, with that dataset's answer script and rounds. Use the matching group: "
                f"dataset={group} dataset.path={d.path}")
        return load_dataset(d.path, name=d.name, limit=d.get("limit"), triples_file=d.get("triples_file"),
                            missing_gold=d.get("missing_gold", "warn"), subset=d.get("subset", "first"),
                            subset_seed=d.get("subset_seed", 0), progress=self.cfg.run.progress)

    @cached_property
    def backend(self) -> Backend:
        return instantiate(self.cfg.backend)

    @cached_property
    def embedder(self) -> Embedder:
        return instantiate(self.cfg.embedder)

    @property
    def needs_vectors(self) -> bool:
        """Whether collections are embedded: asked of the classes the run uses (retriever, expansion, agent, hipporag;
        each has ``needs_vectors``). False for plain BM25 runs (an ES index then holds no vectors)."""
        classes = [target_class(self.cfg.get(group)) for group in ("retriever", "expansion", "agent", "hipporag")]
        return any(c.needs_vectors for c in classes if c is not None)

    @cached_property
    def passages(self) -> Collection:
        docs = [IndexDoc(p.id, p.content) for p in self.dataset.passages]
        return self.backend.open_collection("passages", docs, self.embedder if self.needs_vectors else None)

    @cached_property
    def triples(self) -> Collection:
        from gear_repro.core.triple_graph import triple_docs

        if not self.dataset.triples:
            raise DataError(
                f"dataset '{self.dataset.name}' has no triples ({self.dataset.path}/triples.jsonl): run "
                "`gear-repro stage=extract` or import OpenIE triples with gear-repro-prepare --triples-hipporag")
        t0 = time.perf_counter()
        log.info("opening the triple collection (%d triples)", len(self.dataset.triples))
        collection = self.backend.open_collection("triples", triple_docs(self.dataset.triples),
                                                  self.embedder if self.needs_vectors else None)
        log.info("triple collection open in %.1f s", time.perf_counter() - t0)
        return collection

    @cached_property
    def triple_index(self) -> TripleIndex:
        collection = self.triples
        t0 = time.perf_counter()  # ~15 s at MuSiQue's full size without a bar: the log says what the wait is
        index = TripleIndex(collection, self.dataset.triples, **as_dict(self.cfg.get("graph")))
        log.info("triple graph over %d triples built in %.1f s", len(index.ids), time.perf_counter() - t0)
        return index

    @cached_property
    def llm(self) -> LLM:
        if "llm" not in self.cfg or self.cfg.llm is None:
            raise ConfigError("this run needs an LLM but no `llm=` config group is selected")
        return instantiate(self.cfg.llm)

    def close(self) -> None:
        llm = self.built("llm")
        if llm is not None:
            llm.close()
