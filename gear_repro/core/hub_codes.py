"""8-bit codes of entity hubs, so that Alg. 1 picks a hub's most relevant neighbours exactly at scale (GEAR §4.2;
docs/scale.md "NaiveGE at full size").

A beam extends only with neighbours of its last triple, at most ``beam.neighbours`` of them, picked by cos(q, t) of
the single triple. An entity linked by 100k triples (synthetic full-size corpora have such hubs, the graph has no
hub cap) costs 100k vector rows gathered, converted and multiplied per query. Here every entity with at least
``min_degree`` triples gets its triples' vectors as 8-bit codes, one contiguous faiss ``IndexScalarQuantizer``
(``QT_8bit``) per hub, in one temporary file that is memory-mapped and read by faiss without a copy (file-backed
pages, no anonymous memory). Per hub h, per dimension i: ``x̂_i = lo_h,i + (c_i + 0.5)·w_h,i / 255`` with
``c_i = floor(255 (x_i - lo_h,i) / w_h,i)`` and ``lo``/``w`` the hub's minimum and range (so no value is clipped):
``|x_i - x̂_i| <= w_h,i / 510``.

For a query q the scan returns ``s'(t) = q·x̂_t``; with ``B = Σ_i |q_i| w_h,i / 510`` and ``E`` a bound on the float32
rounding of both products, ``|q·x_t - s'(t)| <= B + E``. Every row of the exact top-m therefore has
``s' >= s'_(m) - 2(B + E)`` (``s'_(m)`` the m-th largest): those rows are the candidates, re-scored exactly by the
caller, and the top-m chosen among them is the exact top-m of the whole hub (ties by row included).
"""

from __future__ import annotations

import logging
import struct
import tempfile
from collections.abc import Mapping

import numpy as np

from gear_repro.utils.arrays import as_float32
from gear_repro.utils.paths import cache_dir

log = logging.getLogger(__name__)

_CHUNK = 16_384  # rows gathered, converted and encoded at a time while building (48 MiB of float32 at 768-d)


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class HubCodes:
    """The 8-bit code indexes of the entities with at least ``min_degree`` rows (see the module docstring).

    Args:
        vectors: the triple matrix (rows aligned with the :class:`TripleIndex`), float32 or float16, also mmapped.
        entity_rows: entity -> its rows, ascending (the adjacency).
        min_degree: entities with at least this many rows get codes.
    """

    def __init__(self, vectors: np.ndarray, entity_rows: Mapping[str, np.ndarray], min_degree: int):
        import faiss

        self.faiss = faiss
        self.dim = int(vectors.shape[1])
        self.hubs = [e for e, rows in entity_rows.items() if rows.size >= min_degree]
        self.rows = {e: entity_rows[e] for e in self.hubs}
        self.lo = np.zeros((len(self.hubs), self.dim), np.float32)
        self.width = np.zeros((len(self.hubs), self.dim), np.float32)
        self.slot = {e: i for i, e in enumerate(self.hubs)}
        spans = []
        # an unlinked temporary file: its pages stay mapped after it is closed and vanish with the process
        with tempfile.TemporaryFile(dir=cache_dir(), prefix="hub-codes-") as f:
            for i, e in enumerate(self.hubs):
                rows = self.rows[e]
                lo = np.full(self.dim, np.inf, np.float32)
                hi = np.full(self.dim, -np.inf, np.float32)
                for a in range(0, rows.size, _CHUNK):  # two passes in chunks: a hub's float32 rows are never whole
                    x = as_float32(vectors[rows[a:a + _CHUNK]])
                    lo, hi = np.minimum(lo, x.min(axis=0)), np.maximum(hi, x.max(axis=0))
                width = np.where(hi > lo, hi - lo, 1.0).astype(np.float32)
                self.lo[i], self.width[i] = lo, width
                start = f.tell()
                f.write(self._header(lo, width, rows.size))
                for a in range(0, rows.size, _CHUNK):
                    x = as_float32(vectors[rows[a:a + _CHUNK]])
                    f.write(np.clip(np.floor((x - lo) * (255.0 / width)), 0, 255).astype(np.uint8).tobytes())
                spans.append((start, f.tell() - start))
            f.flush()
            self._map = np.memmap(f, dtype=np.uint8, mode="r") if spans else np.zeros(0, np.uint8)
        self.index = {e: faiss.read_index(faiss.ZeroCopyIOReader(faiss.swig_ptr(self._map[a:a + n]), n))
                      for e, (a, n) in zip(self.hubs, spans, strict=True)}
        self.bytes = int(sum(n for _, n in spans))
        log.info("hub codes: %d entities with >= %d triples, %.2f GiB of 8-bit codes (memory-mapped)",
                 len(self.hubs), min_degree, self.bytes / 2**30)

    def _header(self, lo: np.ndarray, width: np.ndarray, n: int) -> bytes:
        """The serialised ``IndexScalarQuantizer`` of ``n`` codes up to its codes: fourcc, d, ntotal (int64), ..., the
        trained ranges, the codes' length (uint64). QT_8bit (not QT_8bit_direct, whose inner-product ``search``
        returns wrong distances in faiss 1.15.1 for d >= 32)."""
        index = self.faiss.IndexScalarQuantizer(self.dim, self.faiss.ScalarQuantizer.QT_8bit,
                                                self.faiss.METRIC_INNER_PRODUCT)
        self.faiss.copy_array_to_vector(np.concatenate([lo, width]), index.sq.trained)  # vmin, vdiff
        index.is_trained = True
        empty = self.faiss.serialize_index(index).tobytes()
        return empty[:8] + struct.pack("<q", n) + empty[16:-8] + struct.pack("<Q", n * self.dim)

    def __contains__(self, entity: str) -> bool:
        return entity in self.slot

    def candidates(self, entity: str, qv: np.ndarray, m: int) -> np.ndarray:
        """Rows of hub ``entity`` that can be in the exact top-``m`` by q·x (a superset of it; ascending)."""
        rows = self.rows[entity]
        if m >= rows.size:
            return rows
        i = self.slot[entity]
        q = np.ascontiguousarray(qv, dtype=np.float32)[None]
        self.faiss.omp_set_num_threads(1)  # one short scan per hub and query: a thread team costs more than it saves
        index = self.index[entity]
        gamma = self.dim * 2.0 ** -24 / (1 - self.dim * 2.0 ** -24)
        aq = np.abs(q[0].astype(np.float64))
        bound = float(aq @ self.width[i]) / 510.0
        # float32 rounding of the code scan and of the exact product: each <= gamma·Σ|q_i|·max|x_i| (x3: with margin)
        rounding = 3.0 * gamma * (float(aq @ (self.width[i] + np.abs(self.lo[i]))) + 1.0)
        depth = 8 * m  # the code scan's top-depth must reach below the radius; doubled until it does
        while True:
            dist, ids = index.search(q, min(depth, rows.size))
            radius = float(dist[0, m - 1]) - 2.0 * (bound + rounding)
            if depth >= rows.size or dist[0, -1] < radius:  # faiss's range_search decodes each row: much slower
                return rows[np.sort(ids[0][dist[0] >= radius])]
            depth *= 2
