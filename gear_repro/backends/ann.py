"""Dense search of the memory backend at scale: faiss flat / HNSW / IVF indexes with exact re-scoring
(``backend.dense``; docs/scale.md "Dense search").

``index`` picks the search (:class:`DenseIndex`): ``exact`` = numpy float32 products over the
whole matrix (``memory.top_k_dense``); ``flat`` / ``hnsw`` / ``ivf`` = a faiss index over the collection's vectors
stored as ``codes`` (fp32 | fp16 | sq8); ``auto`` = exact below ``auto_min_vectors`` vectors, else ``auto_index``.
A faiss index only proposes candidates: the best ``rerank``·k of them are re-scored with the collection's own
vectors (float32 products, as exact search computes them) and ordered by score, ties by row. The scores of a
ranking are therefore the exact cosines, and a ranking equals the exact one whenever the candidates hold the
exact top-k (``benchmarks/bench_scale.py`` reports that recall beside every ANN figure).

Determinism: the build is single-query, seeded and runs on ``threads`` faiss threads (``faiss.omp_set_num_threads``,
default 1: HNSW inserts vectors in row order, so its graph is the same on every build); training samples (sq8
ranges, IVF k-means) are drawn with ``seed``; each query is searched on its own, so its result does not depend on
the other queries of a call. A built index is cached under $GEAR_CACHE/indexes keyed by the vectors' content hash
and every build parameter (search parameters are not part of the key), and used memory-mapped from there.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gear_repro.utils.arrays import as_float32
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_array, hash_obj
from gear_repro.utils.io import atomic_open
from gear_repro.utils.settings import Choice, as_dict, check_fields, num, refuse_unknown

log = logging.getLogger(__name__)


class AnnKind(Choice):
    """A faiss index (backend.dense.auto_index)."""

    flat = "flat"  # a flat scan of the codes (fp32 codes: exact scores)
    hnsw = "hnsw"  # an HNSW graph over the codes
    ivf = "ivf"  # an inverted file (k-means cells) over the codes


class DenseIndex(Choice):
    """The dense search of a collection (backend.dense.index)."""

    auto = "auto"  # exact below dense.auto_min_vectors vectors, else dense.auto_index
    exact = "exact"  # numpy float32 products over the whole matrix (no faiss)
    flat = "flat"
    hnsw = "hnsw"
    ivf = "ivf"


class DenseCodes(Choice):
    """How a faiss index stores the vectors it scans (backend.dense.codes)."""

    fp32 = "fp32"  # 4 bytes per dimension
    fp16 = "fp16"  # 2 bytes
    sq8 = "sq8"  # 1 byte: 8-bit scalar quantiser (per-dimension min/max from a training sample)


@dataclass
class HNSWSettings:
    """``backend.dense.hnsw`` (faiss IndexHNSW)."""

    m: int = num(32, ge=2, le=512)  # graph degree M (2M links per vector at level 0)
    ef_construction: int = num(200, ge=1)  # build beam
    ef_search: int = num(256, ge=1)  # search beam (raised to the number of candidates when that is larger)

    def __post_init__(self) -> None:
        check_fields(self, "backend.dense.hnsw")


@dataclass
class IVFSettings:
    """``backend.dense.ivf`` (faiss IndexIVF)."""

    nlist: int | None = num(None, ge=1)  # k-means cells; null = 4·sqrt(N), at most N/39
    nprobe: int = num(64, ge=1)  # cells scanned per query
    train_size: int = num(200_000, ge=1)  # vectors of the seeded k-means / quantiser training sample

    def __post_init__(self) -> None:
        check_fields(self, "backend.dense.ivf")


@dataclass
class DenseSettings:
    """``backend.dense``: the memory backend's dense search. Also the config schema of that node
    (``gear_repro/config.py``): one declaration of every field, its choices and range."""

    # auto: exact below auto_min_vectors vectors, else auto_index | exact (numpy products over the whole matrix, no
    # faiss) | flat | hnsw | ivf (faiss)
    index: DenseIndex = DenseIndex.auto
    # exact search of 148,793 float16 768-d vectors: 22.7 ms a query, faiss flat 8.6 ms (docs/scale.md)
    auto_min_vectors: int = num(100_000, ge=0)
    auto_index: AnnKind = AnnKind.flat  # what auto uses at or above auto_min_vectors: flat | hnsw | ivf
    codes: DenseCodes = DenseCodes.fp16  # how the faiss index stores the vectors: fp32 | fp16 | sq8
    rerank: int = num(2, ge=1)  # the faiss index proposes rerank·k candidates, re-scored with the collection's vectors
    hnsw: HNSWSettings = field(default_factory=HNSWSettings)
    ivf: IVFSettings = field(default_factory=IVFSettings)
    seed: int = num(0, ge=0)  # training samples (sq8 ranges, IVF k-means)
    threads: int = num(1, ge=1)  # faiss OpenMP threads for build and search; 1 keeps an HNSW build reproducible

    def __post_init__(self) -> None:
        check_fields(self, "backend.dense")

    @classmethod
    def from_config(cls, cfg: Any) -> DenseSettings:
        """``backend.dense`` (a config node, a mapping, None = the defaults, or settings) as checked settings: an
        unknown key, a value outside its Enum or a number outside its range is a ConfigError naming the setting."""
        if isinstance(cfg, cls):
            return cfg
        values = as_dict(cfg)
        nested = {"hnsw": HNSWSettings, "ivf": IVFSettings}
        for path, known, node in (("backend.dense", cls, values),
                                  *((f"backend.dense.{k}", sub, as_dict(values.get(k))) for k, sub in nested.items())):
            refuse_unknown(path, node, known)
        sub = {k: c(**as_dict(values[k])) for k, c in nested.items() if k in values}
        return cls(**{**values, **sub})


def approximation(kind: DenseIndex, settings: DenseSettings) -> str | None:
    """How a search of ``kind`` departs from the exact top-k, for the row label ("ivf kNN (nprobe 1, sq8 codes,
    rerank 1)"); None for exact search and a flat scan of fp32/fp16 codes, whose rerank·k candidates re-scored
    with the collection's own vectors gave the exact top-100 at recall 1.000 (docs/scale.md)."""
    if kind == DenseIndex.exact or (kind == DenseIndex.flat and settings.codes != DenseCodes.sq8):
        return None
    detail = {DenseIndex.hnsw: [f"ef_search {settings.hnsw.ef_search}"],
              DenseIndex.ivf: [f"nprobe {settings.ivf.nprobe}"]}.get(kind, [])
    return f"{kind.value} kNN ({', '.join([*detail, f'{settings.codes.value} codes', f'rerank {settings.rerank}'])})"


_FAISS_CODES = {DenseCodes.fp32: "Flat", DenseCodes.fp16: "SQfp16", DenseCodes.sq8: "SQ8"}
_BLOCK = 65_536  # rows converted to float32 at a time while adding to an index


def resolve_kind(settings: DenseSettings, n: int) -> DenseIndex:
    """The search a collection of ``n`` vectors uses: ``auto`` is exact below ``auto_min_vectors``."""
    if settings.index == DenseIndex.auto:
        return DenseIndex.exact if n < settings.auto_min_vectors else DenseIndex(settings.auto_index.value)
    return settings.index


CODE_BYTES = {DenseCodes.fp32: 4, DenseCodes.fp16: 2, DenseCodes.sq8: 1}  # bytes per dimension of a stored vector


def index_bytes(settings: DenseSettings, n: int, dim: int) -> int:
    """Memory of the faiss index a collection of ``n`` vectors of ``dim`` gets (0 with exact search): its codes,
    plus HNSW's 2M level-0 links of 4 bytes or IVF's 8-byte ids per vector (the capacity check counts it)."""
    kind = resolve_kind(settings, n)
    if kind == DenseIndex.exact:
        return 0
    per_row = CODE_BYTES[settings.codes] * dim
    per_row += 8 * settings.hnsw.m if kind == DenseIndex.hnsw else 8 if kind == DenseIndex.ivf else 0
    return n * per_row


def import_faiss() -> Any:
    """faiss, or a ConfigError saying how to install it (``make install`` does; pip extra ``ann``)."""
    try:
        import faiss
    except ImportError:
        raise ConfigError("backend.dense.index needs faiss (pip install 'gear-repro[ann]'; make install installs "
                          "it), or set backend.dense.index=exact") from None
    return faiss


def factory_string(kind: DenseIndex, settings: DenseSettings, n: int) -> str:
    """The faiss ``index_factory`` description of the index to build over ``n`` vectors."""
    codes = _FAISS_CODES[settings.codes]
    if kind == DenseIndex.flat:
        return codes
    if kind == DenseIndex.hnsw:
        return f"HNSW{settings.hnsw.m},{codes}"
    return f"IVF{ivf_nlist(settings, n)},{codes}"


def ivf_nlist(settings: DenseSettings, n: int) -> int:
    """IVF cells: ``ivf.nlist``, else 4·sqrt(N) (faiss's guideline); at most N/39 so k-means has 39 points a cell."""
    nlist = settings.ivf.nlist or round(4 * math.sqrt(n))
    return max(1, min(nlist, n // 39 or 1))


def training_sample(matrix: np.ndarray, size: int, seed: int) -> np.ndarray:
    """float32 rows for training (sq8 ranges, IVF k-means): all rows up to ``size``, else a seeded sample in row
    order."""
    n = matrix.shape[0]
    rows = np.arange(n) if n <= size else np.sort(np.random.default_rng(seed).choice(n, size, replace=False))
    return np.ascontiguousarray(as_float32(matrix[rows]))


def reserve(index: Any, n: int) -> None:
    """Size an empty faiss index's growing arrays for ``n`` vectors before they are added a block at a time: a flat
    index's codes (also HNSW's storage) and HNSW's links are vectors that grow by doubling, each growth a copy
    while the old array is still held, so adding 4.98M fp16 vectors of 384 dimensions peaked at 6.0 GiB for 3.6
    GiB of codes (docs/scale.md, T²RAG at 2Wiki size). Resizing up and back to empty keeps the capacity (a
    vector never shrinks its storage on a resize), so the adds then grow in place. HNSW's links are reserved for
    level 0's 2M a vector and ~1 more on average above it (a vector reaches level l with probability M^-l)."""
    faiss = import_faiss()
    if isinstance(index, faiss.IndexHNSW):
        _reserve_vector(index.hnsw.neighbors, n * (2 * index.hnsw.nb_neighbors(1) + 2))
        index = faiss.downcast_index(index.storage)
    if isinstance(index, faiss.IndexFlatCodes):
        _reserve_vector(index.codes, n * index.code_size)


def _reserve_vector(vec: Any, size: int) -> None:
    """Give an empty faiss vector (a MaybeOwnedVector) the capacity of ``size`` items."""
    if vec.size() == 0 and size > 0:
        vec.resize(size)
        vec.resize(0)


class AnnIndex:
    """A faiss index over a collection's matrix (rows aligned with its ids) and the matrix it re-scores with."""

    def __init__(self, index: Any, matrix: np.ndarray, kind: DenseIndex, settings: DenseSettings, description: str):
        self.index = index
        self.matrix = matrix
        self.kind = kind
        self.settings = settings
        self.description = description

    @classmethod
    def build(cls, matrix: np.ndarray, kind: DenseIndex, settings: DenseSettings) -> AnnIndex:
        """Train (sq8 ranges, IVF cells) on a seeded sample and add every row in order."""
        faiss = import_faiss()
        faiss.omp_set_num_threads(settings.threads)
        n, d = matrix.shape
        desc = factory_string(kind, settings, n)
        index = faiss.index_factory(d, desc, faiss.METRIC_INNER_PRODUCT)
        if kind == DenseIndex.hnsw:
            index.hnsw.efConstruction = settings.hnsw.ef_construction
        if kind == DenseIndex.ivf:
            faiss.extract_index_ivf(index).cp.seed = settings.seed
        if not index.is_trained:
            index.train(training_sample(matrix, settings.ivf.train_size, settings.seed))
        reserve(index, n)
        for a in range(0, n, _BLOCK):
            index.add(np.ascontiguousarray(as_float32(matrix[a:a + _BLOCK])))
        return cls(index, matrix, kind, settings, desc)

    @classmethod
    def open(cls, matrix: np.ndarray, kind: DenseIndex, settings: DenseSettings, cache_root: Path | None,
             name: str) -> AnnIndex:
        """The index from the cache (``cache_root``/ann-<name>-<key>.faiss) or built (and saved there)."""
        if cache_root is None:
            return cls.build(matrix, kind, settings)
        faiss = import_faiss()
        key = hash_obj({"vectors": hash_array(matrix), "factory": factory_string(kind, settings, matrix.shape[0]),
                        "ef_construction": settings.hnsw.ef_construction if kind == DenseIndex.hnsw else None,
                        "train": [settings.ivf.train_size, settings.seed], "threads": settings.threads,
                        "faiss": faiss.__version__, "v": 1})
        path = cache_root / f"ann-{name}-{key}.faiss"
        if not path.exists():
            built = cls.build(matrix, kind, settings)
            with atomic_open(path, "wb") as f:  # concurrent builders each write a temp file; the last rename wins
                faiss.write_index(built.index, faiss.PyCallbackIOWriter(f.write))
            del built
        faiss.omp_set_num_threads(settings.threads)
        # memory-mapped: the index's vectors and graph are file-backed pages, not the process's anonymous memory
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC)
        return cls(index, matrix, kind, settings, factory_string(kind, settings, matrix.shape[0]))

    def search_params(self, depth: int) -> Any:
        """Per-call faiss search parameters (no index state is changed): HNSW efSearch >= depth, IVF nprobe."""
        faiss = import_faiss()
        if self.kind == DenseIndex.hnsw:
            return faiss.SearchParametersHNSW(efSearch=max(self.settings.hnsw.ef_search, depth))
        if self.kind == DenseIndex.ivf:
            return faiss.SearchParametersIVF(nprobe=self.settings.ivf.nprobe)
        return None

    def search(self, queries: np.ndarray, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-k rows per query, best first, with exact scores (see the module docstring); ties by row."""
        n = self.matrix.shape[0]
        k = min(k, n)
        if k <= 0:
            return [(np.zeros(0, np.int64), np.zeros(0, np.float32)) for _ in range(queries.shape[0])]
        depth = min(n, self.settings.rerank * k)
        params = self.search_params(depth)
        import_faiss().omp_set_num_threads(self.settings.threads)
        out = []
        for q in np.ascontiguousarray(queries, dtype=np.float32):  # one query per call: batch-independent
            _, ids = self.index.search(q[None], depth, params=params)
            rows = np.sort(ids[0][ids[0] >= 0])
            scores = as_float32(self.matrix[rows]) @ q
            order = np.lexsort((rows, -scores))[:k]
            out.append((rows[order], scores[order]))
        return out
