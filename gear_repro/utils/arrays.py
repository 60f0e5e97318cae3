"""Array helpers shared by the backends and the triple graph."""

from __future__ import annotations

import warnings

import numpy as np


def as_float32(a: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``a`` as a float32 array, written into ``out`` (a float32 array of ``a``'s shape) where given. float16
    (e.g. rows of a memory-mapped matrix) is converted by torch: numpy's float16 cast is scalar code, torch's is
    vectorised (F16C), ~8x faster on these CPUs; the values are the same (every float16 is exactly a float32)."""
    if a.dtype != np.float16:
        if out is None:
            return np.asarray(a, dtype=np.float32)
        out[...] = a
        return out
    import torch

    with warnings.catch_warnings():  # a read-only memory map: torch only reads it
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        src = torch.from_numpy(np.ascontiguousarray(a))
        if out is None:
            return src.float().numpy()
        torch.from_numpy(out).copy_(src)
        return out


def matrix_scores(matrix: np.ndarray, q: np.ndarray, block: int = 16384) -> np.ndarray:
    """``matrix @ q`` in float32. A float16 matrix (also memory-mapped) is converted a block of rows at a time into
    one reused float32 buffer: numpy has no fast float16 product, and a mixed product would first copy the whole
    matrix to float32 (7.1 GiB for 2Wiki's 5M triples at 384 dimensions). The blocks are large because each
    conversion and product hands the cores from torch's threads to BLAS's and back: at 2,048 rows that hand-over
    cost ~8x the work on two cores (``benchmarks/bench_float16_scores.py``). The scores are deterministic for a
    matrix and a block size; another block size may round a row in the last place (BLAS splits each block among
    its threads), so ``block`` is not a setting."""
    q = np.asarray(q, dtype=np.float32)
    if matrix.dtype == np.float32:
        return matrix @ q
    n = matrix.shape[0]
    out = np.empty(n, np.float32)
    buf = np.empty((min(block, n), matrix.shape[1]), np.float32)
    for a in range(0, n, block):
        rows = min(block, n - a)
        np.matmul(as_float32(matrix[a:a + rows], out=buf[:rows]), q, out=out[a:a + rows])
    return out


def row_dots(matrix: np.ndarray, rows: np.ndarray, q: np.ndarray, block: int = 4096) -> np.ndarray:
    """q·x of the given rows of ``matrix`` in float64: the products of float32 (or float16) values are exact in
    float64 and each row is summed on its own (numpy's pairwise sum along the row), so a row's score depends only
    on the row and q, never on which other rows are scored with it (a BLAS product may round a row differently by
    its position in the block: identical rows can then score apart). ``block`` bounds the float64 copy."""
    q64 = np.asarray(q, dtype=np.float32).astype(np.float64)
    out = np.empty(len(rows), dtype=np.float64)
    for a in range(0, len(rows), block):
        x = as_float32(matrix[rows[a:a + block]]).astype(np.float64)
        x *= q64
        out[a:a + block] = x.sum(axis=1)
    return out


def top_k_row(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores of ``row``, best first; ties (also at the k-th place) by lowest index.

    O(n): partition to find the k-th score v, keep every index above v, fill with the lowest-index
    rows scoring exactly v.
    """
    n = row.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    if k < n:
        v = row[np.argpartition(-row, k - 1)[k - 1]]
        above = np.flatnonzero(row > v)
        tied = np.flatnonzero(row == v)[: k - above.size]
        part = np.concatenate([above, tied])
    else:
        part = np.arange(n)
    return part[np.lexsort((part, -row[part]))]
