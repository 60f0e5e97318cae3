"""Several processes building the same cached artifact at once (hydra/launcher=joblib sweeps, issue 11 §4)."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryCollection
from gear_repro.embedding.embedder import SentenceEmbedder

DOCS = [IndexDoc(str(i), f"passage {i} about topic {i % 7} and city {i % 5}") for i in range(300)]


def _build_bm25(cache: str) -> list[str]:
    os.environ["GEAR_CACHE"] = cache
    return MemoryCollection("p", DOCS).bm25(["topic 3 city 4"], 5)[0].ids


class _Const(SentenceEmbedder):
    """The real cache path of encode_corpus with a trivial encoder (no model)."""

    def _encode(self, texts, progress=False):
        return np.full((len(texts), 4), float(len(texts)), dtype=np.float32)


def _build_vectors(cache: str) -> float:
    os.environ["GEAR_CACHE"] = cache
    return float(_Const("const").encode_corpus([d.text for d in DOCS]).sum())


def test_concurrent_builds_of_one_bm25_index_and_embedding_file(tmp_path):
    with mp.get_context("fork").Pool(4) as pool:
        rankings = pool.map(_build_bm25, [str(tmp_path)] * 4)
        sums = pool.map(_build_vectors, [str(tmp_path)] * 4)
    assert all(r == rankings[0] for r in rankings) and len(rankings[0]) == 5
    assert sums == [300 * 4 * 300.0] * 4
    assert [p.name.startswith("bm25-p-") for p in sorted((tmp_path / "indexes").iterdir())] == [True]
    assert len(list((tmp_path / "embeddings").iterdir())) == 1  # one file, no temp files left behind
