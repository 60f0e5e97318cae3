"""The memory backend's dense index (``backend.dense``, backends/ann.py): exact numpy search, faiss flat / HNSW / IVF
with exact re-scoring, the ``auto`` size switch, settings checks, determinism of the build and the index cache."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import faiss
import numpy as np
import pytest
from omegaconf import OmegaConf

from gear_repro.backends import ann
from gear_repro.backends.ann import DenseSettings
from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryBackend, top_k_dense
from gear_repro.config import group_config, validate
from gear_repro.utils.arrays import as_float32, matrix_scores
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import config_dir
from tests.helpers.doubles import TableEmbedder
from tests.helpers.es_fixtures import gear_cache

N, DIM = 3000, 32
DOCS = [IndexDoc(f"d{i}", f"document number {i}") for i in range(N)]
QUERIES = [f"query {i}" for i in range(20)]


def _table(texts: list[str], seed: int) -> dict[str, np.ndarray]:
    """One seeded Gaussian direction per text (distinct: no ties between documents)."""
    return dict(zip(texts, np.random.default_rng(seed).standard_normal((len(texts), DIM)), strict=True))


@pytest.fixture(scope="module")
def emb() -> TableEmbedder:
    return TableEmbedder(DIM, _table([d.text for d in DOCS] + QUERIES, 0))


def _open(emb: TableEmbedder, cache: bool = False, **dense) -> object:
    return MemoryBackend(cache=cache, dense=dense).open_collection("p", DOCS, emb)


@pytest.fixture(scope="module")
def exact(emb: TableEmbedder) -> list:
    return _open(emb, index="exact").knn(emb.encode(QUERIES), 10)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
@pytest.mark.parametrize("codes", ["fp32", "fp16", "sq8"])
def test_faiss_indexes_return_the_exact_ranking_with_exact_scores(emb, exact, kind: str, codes: str) -> None:
    coll = _open(emb, index=kind, codes=codes, ivf={"nprobe": 76})  # IVF: 76 cells (N/39 at most), all probed
    got = coll.knn(emb.encode(QUERIES), 10)
    assert coll.ann_index().description.startswith({"flat": "", "hnsw": "HNSW32,", "ivf": "IVF76,"}[kind])
    for g, e in zip(got, exact, strict=True):
        assert g.ids == e.ids
        assert g.scores == pytest.approx(e.scores, abs=1e-6)  # re-scored with the collection's vectors


def test_ann_recall_below_one_when_candidates_are_few(emb, exact) -> None:
    """IVF probing 1 of 76 cells misses neighbours: the index is approximate, re-scoring does not hide it."""
    got = _open(emb, index="ivf", ivf={"nprobe": 1}, rerank=1).knn(emb.encode(QUERIES), 10)
    recall = np.mean([len(set(g.ids) & set(e.ids)) / 10 for g, e in zip(got, exact, strict=True)])
    assert 0.05 < recall < 0.8
    for g in got:  # still best first, scores exact
        assert g.scores == sorted(g.scores, reverse=True)


def test_queries_are_searched_one_by_one(emb) -> None:
    coll = _open(emb, index="hnsw", codes="sq8")
    q = emb.encode(QUERIES)
    batch = coll.knn(q, 10)
    assert [r.ids for r in batch] == [coll.knn(q[i], 10)[0].ids for i in range(len(QUERIES))]


def test_auto_is_exact_below_the_threshold(emb) -> None:
    assert _open(emb).dense_kind == "exact"  # default: exact below 100,000 vectors
    assert _open(emb, auto_min_vectors=N).dense_kind == "flat"  # at the threshold: auto_index
    assert _open(emb, auto_min_vectors=N + 1).dense_kind == "exact"
    assert _open(emb, auto_min_vectors=10, auto_index="hnsw").dense_kind == "hnsw"
    assert _open(emb).ann_index() is None


def test_build_is_deterministic(emb) -> None:
    """Two HNSW builds (one faiss thread) and two IVF builds (seeded k-means sample) are byte for byte equal."""
    for dense in ({"index": "hnsw"}, {"index": "ivf", "ivf": {"train_size": 2000}}):
        a, b = (faiss.serialize_index(_open(emb, **dense).ann_index().index) for _ in range(2))
        assert np.array_equal(a, b), dense


def test_reserving_an_index_changes_no_byte_of_it(emb, monkeypatch) -> None:
    """``ann.reserve`` sizes the codes and HNSW links before the adds: the same index, byte for byte, as one grown
    by the adds alone."""
    for dense in ({"index": "hnsw"}, {"index": "flat"}, {"index": "hnsw", "codes": "fp32"}):
        reserved = faiss.serialize_index(_open(emb, **dense).ann_index().index)
        with monkeypatch.context() as m:
            m.setattr(ann, "reserve", lambda index, n: None)
            grown = faiss.serialize_index(_open(emb, **dense).ann_index().index)
        assert np.array_equal(reserved, grown), dense


BUILD_PEAK = """
import sys
import faiss  # noqa: F401  (its libraries are loaded before the baseline)
import numpy as np
from gear_repro.backends import ann
from gear_repro.backends.ann import AnnIndex, DenseIndex, DenseSettings
from gear_repro.utils.memory import proc_bytes
if sys.argv[1] == "grown":
    ann.reserve = lambda index, n: None
m = np.random.default_rng(0).standard_normal((17 * 65_536, 64), dtype=np.float32)  # no larger temporary
before = proc_bytes("/proc/self/status", "VmRSS")
with open("/proc/self/clear_refs", "w") as f:  # VmHWM from here (ru_maxrss would keep the parent's from the fork)
    f.write("5")
AnnIndex.build(m, DenseIndex.flat, DenseSettings(index=DenseIndex.flat))
print((proc_bytes("/proc/self/status", "VmHWM") - before) / (len(m) * 64 * 2))
"""


def test_a_flat_index_is_built_without_copying_its_codes() -> None:
    """Adding a collection a block at a time grows faiss's codes vector by doubling, a copy each time, so the
    build peaked at 1.7x its 3.6 GiB of codes at 2Wiki's triples (docs/scale.md); reserved, the peak is the codes
    and one block. 17 blocks of fp16 codes: grown, the last doubling holds 16 blocks twice (~1.9x)."""
    import subprocess

    def ratio(how: str) -> float:
        out = subprocess.run([sys.executable, "-c", BUILD_PEAK, how], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent.parent)
        return float(out.stdout.split()[-1])

    assert ratio("reserved") < 1.2
    assert ratio("grown") > 1.6  # the doubling this guards against is still what faiss does


def test_index_cache_keyed_by_vectors_and_build_parameters(emb, tmp_path: Path, monkeypatch) -> None:
    with gear_cache(tmp_path):
        first = _open(emb, cache=True, index="hnsw").knn(emb.encode(QUERIES), 10)
        files = sorted((tmp_path / "indexes").glob("ann-p-*.faiss"))
        assert len(files) == 1

        def no_build(*a, **k):
            raise AssertionError("built again")

        monkeypatch.setattr(ann.AnnIndex, "build", no_build)
        again = _open(emb, cache=True, index="hnsw", hnsw={"ef_search": 64})  # search setting: same file
        assert [r.ids for r in again.knn(emb.encode(QUERIES), 10)] == [r.ids for r in first]
        monkeypatch.undo()
        _open(emb, cache=True, index="hnsw", hnsw={"m": 16}).ann_index()  # build setting: new file
        other = TableEmbedder(DIM, {**emb.table, "document number 0": [1.0] * DIM}, model_id="table-v2")
        MemoryBackend(cache=True, dense={"index": "hnsw"}).open_collection("p", DOCS, other).ann_index()
        assert len(list((tmp_path / "indexes").glob("ann-p-*.faiss"))) == 3  # other vectors: new file


@pytest.mark.parametrize("dense, msg", [
    ({"index": "annoy"}, r"backend\.dense\.index must be one of \['auto', 'exact', 'flat', 'hnsw', 'ivf'\]"),
    ({"hnsw": {"m": 1}}, r"backend\.dense\.hnsw\.m must be >= 2 and <= 512 \(got 1\)"),
    ({"rerank": 0}, r"backend\.dense\.rerank must be >= 1"),
    ({"auto_index": "exact"}, r"backend\.dense\.auto_index must be one of \['flat', 'hnsw', 'ivf'\]"),
    ({"efsearch": 10}, r"backend\.dense\.efsearch is not a setting of backend\.dense"),
    ({"ivf": {"probes": 3}}, r"backend\.dense\.ivf\.probes is not a setting of backend\.dense\.ivf"),
])
def test_bad_settings_name_the_setting(dense: dict, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        MemoryBackend(dense=dense)


def test_missing_faiss_is_a_config_error(emb, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(ConfigError, match=r"pip install 'gear-repro\[ann\]'"):
        _open(emb, index="hnsw")
    assert _open(emb, index="exact").knn(emb.encode(QUERIES[:1]), 3)[0].ids  # exact search needs no faiss


def test_yaml_documents_the_schema_defaults() -> None:
    node = group_config("backend", "memory").dense
    assert OmegaConf.to_container(node) == OmegaConf.to_container(OmegaConf.structured(DenseSettings))
    assert DenseSettings.from_config(node) == DenseSettings()


@pytest.mark.parametrize("override, msg", [
    ("backend.dense.index=annoy", r"Invalid value 'annoy'"),  # composition: Hydra's own message
    ("backend.dense.hnsw.m=1", r"backend\.dense\.hnsw\.m must be >= 2 and <= 512 \(got 1\)"),  # start-up check
    ("backend.dense.ivf.nprobe=0", r"backend\.dense\.ivf\.nprobe must be >= 1 \(got 0\)"),
])
def test_config_refuses_bad_dense_settings(override: str, msg: str) -> None:
    from hydra import compose, initialize_config_dir

    from gear_repro.config import register_configs

    register_configs()
    with pytest.raises(Exception) as e, initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        validate(compose("config", overrides=["backend=memory", override]))
    chain, err = [], e.value
    while err is not None:
        chain.append(str(err))
        err = err.__cause__
    assert any(re.search(msg, m) for m in chain), chain


def test_float16_matrix_exact_and_ann_agree(emb) -> None:
    coll = MemoryBackend(cache=False, dense_dtype="float16", dense={"index": "flat", "codes": "sq8"}) \
        .open_collection("p", DOCS, emb)
    q = emb.encode(QUERIES)
    ref = top_k_dense(coll.vectors(), q, 10)
    for got, (rows, scores) in zip(coll.knn(q, 10), ref, strict=True):
        assert got.ids == [DOCS[r].id for r in rows]
        assert got.scores == pytest.approx(scores.tolist(), abs=1e-6)


def test_float16_scores_are_made_a_block_at_a_time() -> None:
    """``matrix_scores`` (exact search, HippoRAG 2's fact and passage scores) never copies a float16 matrix whole
    to float32, as numpy's mixed product would (7.1 GiB at 2Wiki's triples); each block's scores are its rows'."""
    import tracemalloc

    rng = np.random.default_rng(0)
    half = rng.standard_normal((20_000, 128)).astype(np.float16)
    q = rng.standard_normal(128).astype(np.float32)
    tracemalloc.start()
    try:
        got = matrix_scores(half, q, block=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 0.1 * half.size * 4, peak
    want = np.concatenate([as_float32(half[a:a + 1000]) @ q for a in range(0, len(half), 1000)])
    assert got.dtype == np.float32 and np.array_equal(got, want)
    assert got == pytest.approx(half.astype(np.float32) @ q, rel=1e-5, abs=1e-4)
    assert matrix_scores(half[:0], q).shape == (0,)
    full = half.astype(np.float32)
    assert np.array_equal(matrix_scores(full, q), full @ q)  # float32: one product, as before


def test_as_float32_converts_every_float16_exactly() -> None:
    every = np.arange(2**16, dtype=np.uint16).view(np.float16).reshape(256, 256)
    got = as_float32(every)
    assert got.dtype == np.float32
    assert np.array_equal(got, every.astype(np.float32), equal_nan=True)
    assert np.array_equal(np.signbit(got), np.signbit(every))  # -0.0 stays -0.0
    buf = np.full(every.shape, 7.0, np.float32)
    assert as_float32(every, out=buf) is buf  # into a caller's buffer (matrix_scores' blocks): the same values
    assert np.array_equal(buf, got, equal_nan=True) and np.array_equal(np.signbit(buf), np.signbit(every))
    assert np.array_equal(as_float32(got[:2], out=buf[:2]), got[:2], equal_nan=True)  # float32 is copied in


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_cached_matrix_is_narrowed_a_block_at_a_time(tmp_path: Path, monkeypatch, dtype: str) -> None:
    """``backend.dense_dtype=float16`` reads the float32 cache file in blocks: the same values as one ``astype``,
    without the float32 matrix whole in memory beside its copy (at 2Wiki size 7.1 GiB beside 3.6)."""
    import tracemalloc

    from gear_repro.embedding import embedder as embedder_mod
    from tests.helpers.doubles import HashEmbedder

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(embedder_mod, "COPY_ROWS", 1000)
    docs = [IndexDoc(f"d{i}", f"document {i} about topic {i % 97} and {i % 13}") for i in range(12_000)]
    emb = HashEmbedder(dim=256)
    want = emb.encode_corpus([d.text for d in docs]).astype(dtype)  # encoded and cached
    coll = MemoryBackend(cache=False, dense_dtype=dtype).open_collection("p", docs, emb)
    tracemalloc.start()
    try:
        got = coll.vectors()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.dtype == np.dtype(dtype) and got.flags.c_contiguous and np.array_equal(got, want)
    float32_bytes = len(docs) * 256 * 4
    if dtype == "float16":
        assert peak < 0.75 * float32_bytes, peak  # the copy (half) and one block, never the float32 matrix
    else:
        assert peak >= float32_bytes  # float32 is held in memory as before
