"""Hub vectors laid out by entity, so that Alg. 1 picks a hub's most relevant neighbours exactly at scale (GEAR §4.2;
docs/scale.md "NaiveGE at full size").

A beam extends only with neighbours of its last triple, at most ``beam.neighbours`` of them, picked by cos(q, t) of
the single triple. An entity linked by 100k triples (synthetic full-size corpora have such hubs, the graph has no
hub cap) costs 100k scattered vector rows gathered, converted and multiplied per query. Here the triples of every
entity with at least ``min_degree`` of them get a contiguous float16 copy of their vectors, one faiss
``IndexScalarQuantizer`` (``QT_fp16``) per hub, in one temporary file that is memory-mapped and read by faiss without
a copy (file-backed pages, no anonymous memory); faiss scans it with SIMD float16 -> float32 products.

The scan's score ``s'(t)`` differs from the exact ``q·x_t`` only by the float16 rounding of x (none when the matrix is
float16 already: ``B = Σ_i |q_i| e_i``, ``e_i`` the hub's largest rounding error in dimension i) and the float32
rounding of the scan's products (``E <= 3 γ_d Σ_i |q_i| max|x_i|``; the caller's exact score,
:func:`~gear_repro.utils.arrays.row_dots`, sums exact products in float64, far inside that). Every row of the exact top-m therefore has
``s' >= s'_(m) - 2(B + E)`` (``s'_(m)`` the m-th largest scan score): those rows are the candidates, re-scored
exactly by the caller, and the top-m chosen among them is the exact top-m of the whole hub (ties by row included).
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

_CHUNK = 16_384  # rows gathered and copied at a time while building


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


class HubSlices:
    """The contiguous float16 copies of the entities with at least ``min_degree`` rows (see the module docstring).

    Args:
        vectors: the triple matrix (rows aligned with the :class:`TripleIndex`), float32 or float16, also mmapped.
        hubs: entity -> its rows, ascending, for the entities that get a copy (``graph.hub_slices_min_degree``).
        min_degree: the degree that made them hubs (for the log line).
    """

    def __init__(self, vectors: np.ndarray, hubs: Mapping[str, np.ndarray], min_degree: int):
        import faiss

        self.faiss = faiss
        self.dim = int(vectors.shape[1])
        self.hubs = list(hubs)
        self.rows = dict(hubs)
        self.slot = {e: i for i, e in enumerate(self.hubs)}
        self.err = np.zeros((len(self.hubs), self.dim), np.float32)  # largest float16 rounding error per dimension
        self.amax = np.zeros((len(self.hubs), self.dim), np.float32)  # largest |x_i| per dimension
        empty = faiss.serialize_index(faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_fp16,
                                                                 faiss.METRIC_INNER_PRODUCT)).tobytes()
        spans = []
        # an unlinked temporary file: its pages stay mapped after it is closed and vanish with the process
        with tempfile.TemporaryFile(dir=cache_dir(), prefix="hub-slices-") as f:
            for i, e in enumerate(self.hubs):
                rows = self.rows[e]
                start = f.tell()
                # serialised IndexScalarQuantizer: fourcc + d, ntotal (int64), ..., the codes' length (uint64), codes
                f.write(empty[:8] + struct.pack("<q", rows.size) + empty[16:-8]
                        + struct.pack("<Q", rows.size * 2 * self.dim))
                for a in range(0, rows.size, _CHUNK):
                    part = vectors[rows[a:a + _CHUNK]]
                    half = part.astype(np.float16)
                    x = as_float32(half)
                    if part.dtype != np.float16:
                        self.err[i] = np.maximum(self.err[i], np.abs(as_float32(part) - x).max(axis=0))
                    self.amax[i] = np.maximum(self.amax[i], np.abs(x).max(axis=0) + self.err[i])
                    f.write(half.tobytes())
                spans.append((start, f.tell() - start))
            f.flush()
            self._map = np.memmap(f, dtype=np.uint8, mode="r") if spans else np.zeros(0, np.uint8)
        self.index = {e: faiss.read_index(faiss.ZeroCopyIOReader(faiss.swig_ptr(self._map[a:a + n]), n))
                      for e, (a, n) in zip(self.hubs, spans, strict=True)}
        self.bytes = int(sum(n for _, n in spans))
        log.info("hub slices: %d entities with >= %d triples, %.2f GiB of float16 rows (memory-mapped)",
                 len(self.hubs), min_degree, self.bytes / 2**30)

    def __contains__(self, entity: str) -> bool:
        return entity in self.slot

    def candidates(self, entity: str, qv: np.ndarray, m: int) -> np.ndarray:
        """Rows of hub ``entity`` that can be in the exact top-``m`` by q·x (a superset of it; ascending)."""
        rows = self.rows[entity]
        if m >= rows.size:
            return rows
        i = self.slot[entity]
        q = np.ascontiguousarray(qv, dtype=np.float32)[None]
        aq = np.abs(q[0].astype(np.float64))
        gamma = self.dim * 2.0 ** -24 / (1 - self.dim * 2.0 ** -24)
        # float16 rounding of x, then float32 rounding of the scan and of the exact product (x3: with margin)
        margin = 2.0 * (float(aq @ self.err[i]) + 3.0 * gamma * (float(aq @ self.amax[i]) + 1.0))
        self.faiss.omp_set_num_threads(1)  # one short scan per hub and query: a thread team costs more than it saves
        index = self.index[entity]
        depth = m + 32  # the scan's top-depth must reach below the radius; doubled until it does
        while True:
            dist, ids = index.search(q, min(depth, rows.size))
            radius = float(dist[0, m - 1]) - margin
            if depth >= rows.size or dist[0, -1] < radius:
                return rows[np.sort(ids[0][dist[0] >= radius])]
            depth *= 2
