"""Lazily built objects shared by one run: dataset, indexes, retrievers, LLM (docs/ARCHITECTURE.md).

Nothing is built until a method asks for it, so a BM25-only run never loads an embedder and a
run without graph expansion never indexes triples.
"""

from __future__ import annotations

import logging
from functools import cached_property
from typing import Any

from hydra.utils import get_object, instantiate
from omegaconf import DictConfig, OmegaConf

from gear_repro.backends.base import Backend, Collection, IndexDoc
from gear_repro.data import Dataset, load_dataset
from gear_repro.utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)


class Resources:
    def __init__(self, cfg: DictConfig, dataset: Dataset | None = None):
        self.cfg = cfg
        if dataset is not None:
            self.__dict__["dataset"] = dataset

    @cached_property
    def dataset(self) -> Dataset:
        d = self.cfg.dataset
        return load_dataset(d.path, name=d.name, limit=d.get("limit"), triples_file=d.get("triples_file"),
                            missing_gold=d.get("missing_gold", "warn"), subset=d.get("subset", "first"),
                            subset_seed=d.get("subset_seed", 0))

    @cached_property
    def backend(self) -> Backend:
        return instantiate(self.cfg.backend)

    @cached_property
    def embedder(self) -> Any:
        return instantiate(self.cfg.embedder)

    @property
    def needs_vectors(self) -> bool:
        """Whether collections are embedded: asked of the classes the run uses (retriever, expansion, agent, hipporag;
        each has ``needs_vectors``). False for plain BM25 runs (an ES index then holds no vectors)."""
        from gear_repro.pipeline.wiring import target_class

        classes = [target_class(self.cfg.get(group)) for group in ("retriever", "expansion", "agent", "hipporag")]
        return any(getattr(c, "needs_vectors", True) for c in classes if c is not None)

    @cached_property
    def passages(self) -> Collection:
        docs = [IndexDoc(p.id, p.content) for p in self.dataset.passages]
        return self.backend.open_collection("passages", docs, self.embedder if self.needs_vectors else None)

    def _retriever(self, rcfg: DictConfig, collection: Collection):
        """Instantiate a retriever config over ``collection``. A retriever class with ``needs_resources``
        (GRIEVER: dataset triples, backend) also gets ``resources=self``; the optional nested
        ``triple_retriever`` config is not a constructor argument (see :attr:`triple_retriever`)."""
        node = OmegaConf.masked_copy(rcfg, [k for k in rcfg if k != "triple_retriever"])
        extra = {"resources": self} if getattr(get_object(rcfg._target_), "needs_resources", False) else {}
        return instantiate(node, collection=collection, embedder=self.embedder, **extra)

    @cached_property
    def passage_retriever(self):
        return self._retriever(self.cfg.retriever, self.passages)

    @cached_property
    def triples(self) -> Collection:
        from gear_repro.core.triple_graph import triple_docs

        if not self.dataset.triples:
            raise DataError(
                f"dataset '{self.dataset.name}' has no triples ({self.dataset.path}/triples.jsonl): run "
                "`gear-repro stage=extract` or import OpenIE triples with gear-repro-prepare --triples-hipporag")
        return self.backend.open_collection("triples", triple_docs(self.dataset.triples),
                                            self.embedder if self.needs_vectors else None)

    @cached_property
    def triple_retriever(self):
        """h_base over T for tripleLink/passageLink: the retriever config itself, or its nested
        ``triple_retriever`` config when it has one (GRIEVER retrieves passages only; its YAML names the
        hybrid retriever for T)."""
        rcfg = self.cfg.retriever
        return self._retriever(rcfg.triple_retriever if rcfg.get("triple_retriever") else rcfg, self.triples)

    @cached_property
    def triple_index(self):
        from gear_repro.core.triple_graph import TripleIndex

        graph_cfg = OmegaConf.to_container(self.cfg.get("graph", {}), resolve=True) or {}
        return TripleIndex(self.triples, self.dataset.triples, **graph_cfg)

    @cached_property
    def hipporag(self):
        """HippoRAG retriever over the dataset's triples (configs/hipporag/; gear_repro/methods/hipporag/retriever.py)."""
        if self.cfg.get("hipporag") is None:
            raise ConfigError("this run needs HippoRAG but no `hipporag` config is selected (agent=hipporag|hipporag_ircot)")
        return instantiate(self.cfg.hipporag, resources=self, _recursive_=False)

    @cached_property
    def llm(self):
        if "llm" not in self.cfg or self.cfg.llm is None:
            raise ConfigError("this run needs an LLM but no `llm=` config group is selected")
        return instantiate(self.cfg.llm)

    def close(self) -> None:
        llm = self.__dict__.get("llm")
        if llm is not None and hasattr(llm, "close"):
            llm.close()
