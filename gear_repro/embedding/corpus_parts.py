"""Resumable corpus encodes: the vectors written in parts, so a killed encode loses at most one part.

:meth:`gear_repro.embedding.embedder.SentenceEmbedder.encode_corpus` encodes a collection of more than
``embedder.cache_chunk_rows`` texts in parts of at most that many rows and at most ``embedder.cache_chunk_s``
seconds of encoding, each saved atomically under ``$GEAR_CACHE/embeddings/<key>.parts/rows-<a>-<b>.npy`` as soon
as it is encoded; an exception, Ctrl-C or SIGTERM saves the batches finished since the last part (a kill -9
loses them). A rerun of the same command loads the finished parts and encodes the rest. At the end the parts are
assembled into the usual ``<key>.npy`` (the same cache key as an encode in one piece) and removed. The rows are
written into a memory map of that file as they are encoded (:func:`mapped_output`), so the encode holds no copy of
the collection in memory: its pages are the kernel's to write back and drop.

Why the vectors are bit-identical to an encode in one piece: the encoder sorts a call's texts by length and
cuts the sorted list into batches of ``batch_size`` (sentence-transformers' ``encode``,
:meth:`gear_repro.embedding.runtimes.RuntimeSentenceModel.encode`); a text's vector depends on the batch it is
padded with (docs/encoders.md), so chunks of the corpus in its own order, each sorted on its own, would form
other batches. Here the whole corpus is put in the encoder's order once (:func:`encode_order`), a part is a
run of whole batches of that order (its rows a multiple of ``batch_size``), and each batch is encoded by a call
of its own: every text meets exactly the batch it meets in one piece (tests/test_embedding_resume.py).
"""

from __future__ import annotations

import errno
import json
import logging
import mmap
import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from gear_repro.utils.io import atomic_open, load_cached

log = logging.getLogger(__name__)

class PartEncoder(Protocol):
    """What :func:`encode_in_parts` uses of :class:`~gear_repro.embedding.embedder.SentenceEmbedder` (a protocol, so
    that the embedder can import this module)."""

    batch_size: int
    show_progress: bool

    @property
    def dim(self) -> int: ...

    def batch_order(self, texts: Sequence[str]) -> np.ndarray: ...

    def autocast(self) -> AbstractContextManager[object]: ...

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...


PLAN = "plan.json"  # the batch grid (batch size, corpus rows, dim): parts of another grid are not reused
PART = re.compile(r"rows-(\d{9})-(\d{9})\.npy")
_clock = time.monotonic  # a part's age (tests step it)


def part_rows(chunk_rows: int, batch_size: int) -> int:
    """Rows per part: ``chunk_rows`` rounded up to a whole number of batches (the module docstring's why)."""
    return -(-max(1, chunk_rows) // batch_size) * batch_size


def encode_order(model: object, texts: Sequence[str]) -> np.ndarray:
    """The order in which ``model.encode`` batches ``texts`` in one call: longest first, as the encoder sorts
    them (sentence-transformers' ``_input_length`` (6.x; ``_text_length`` before) and, where it flattens its
    inputs, ``_interleave_sorted_indices``; the ONNX/OpenVINO runtimes: a stable sort by characters)."""
    from gear_repro.embedding.runtimes import RuntimeSentenceModel

    if isinstance(model, RuntimeSentenceModel):
        return np.argsort([-len(t) for t in texts], kind="stable")
    length = getattr(model, "_input_length", None) or getattr(model, "_text_length", None) or len
    order = np.argsort([-length(t) for t in texts])
    flatten = getattr(model, "_can_flatten_inputs", None)
    if flatten is not None and flatten():
        order = model._interleave_sorted_indices(order)
    return np.asarray(order)


def _part_name(a: int, b: int) -> str:
    return f"rows-{a:09d}-{b:09d}.npy"


def _load_part(path: Path, rows: int, dim: int) -> np.ndarray | None:
    """A finished part, or None after removing one that is damaged (truncated, wrong shape, not finite)."""

    def load(p: Path) -> np.ndarray:
        vecs = np.load(p)
        if vecs.shape != (rows, dim) or vecs.dtype != np.float32 or not np.isfinite(vecs).all():
            raise ValueError(f"{vecs.shape} {vecs.dtype} vectors where {rows} x {dim} float32 were written")
        return vecs

    return load_cached(path, load, "corpus embedding part")


def _open_parts(folder: Path, plan: dict) -> None:
    """The parts folder ready for ``plan``: created, left-over temp files of a killed writer removed, and emptied
    when its parts were cut on another grid (another batch size: other batches, other bits)."""
    folder.mkdir(parents=True, exist_ok=True)
    for tmp in folder.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)
    plan_file = folder / PLAN
    try:
        old = json.loads(plan_file.read_text()) if plan_file.is_file() else None
    except (OSError, ValueError):
        old = None
    if old is not None:
        old.pop("part_rows", None)  # the grid of parts of one fixed size: any whole batches are this grid's
    if old != plan:
        if old is not None or any(folder.glob("rows-*.npy")):
            log.warning("%s: parts of another grid (%s, now %s): encoding from the start", folder, old, plan)
        for p in folder.glob("rows-*.npy"):
            p.unlink(missing_ok=True)
        with atomic_open(plan_file) as f:
            json.dump(plan, f)


def _finished_parts(folder: Path, n: int, bs: int) -> list[tuple[int, int]]:
    """The parts in ``folder`` that are runs of whole batches of ``n`` rows, by first row; a part overlapping an
    earlier one (two writers' grids) is removed."""
    spans = []
    for p in folder.glob("rows-*.npy"):
        m = PART.fullmatch(p.name)
        if m is None:
            continue
        a, b = int(m[1]), int(m[2])
        if a % bs == 0 and a < b <= n and (b % bs == 0 or b == n):
            spans.append((a, b))
        else:
            p.unlink(missing_ok=True)
    kept: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if kept and a < kept[-1][1]:
            (folder / _part_name(a, b)).unlink(missing_ok=True)
        else:
            kept.append((a, b))
    return kept


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """Inside the block a SIGTERM raises SystemExit(143) in the main thread, so the encode loop saves the rows it
    finished before the process ends (by default SIGTERM ends it at once). A second SIGTERM ends it at once. Only
    where SIGTERM has its default action: a handler someone installed, or an ignored SIGTERM, is kept."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def encode_in_parts(embedder: PartEncoder, texts: Sequence[str], folder: Path, chunk_rows: int,
                    desc: str = "", chunk_s: float | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """Encode ``texts`` part by part into ``folder`` (reusing finished parts) and return the assembled vectors:
    ``out`` (len(texts) x dim float32, e.g. a memory map of the file they are assembled in) filled, else a new
    array.

    A part is written once it holds ``chunk_rows`` rows (rounded up to whole batches) or, at the end of a batch,
    once it is ``chunk_s`` seconds old (None: no time bound); an exception, Ctrl-C or SIGTERM writes the rows of
    the batches finished so far before it goes on. Parts are runs of whole batches of one order, so a part of any
    size is reused by a rerun with other part settings. One tqdm bar over the whole collection (rate and ETA),
    started at the rows already done. The folder is left in place: the caller removes it once the assembled
    matrix is saved."""
    from tqdm import tqdm

    texts = list(texts)
    n, bs = len(texts), int(embedder.batch_size)
    rows = part_rows(chunk_rows, bs)
    dim = int(embedder.dim)
    order = embedder.batch_order(texts)
    _open_parts(folder, {"rows": n, "batch_size": bs, "dim": dim})
    out = np.empty((n, dim), dtype=np.float32) if out is None else out
    if out.shape != (n, dim) or out.dtype != np.float32:
        raise ValueError(f"encode_in_parts: out is {out.shape} {out.dtype}, the encode gives {n} x {dim} float32")
    todo: list[tuple[int, int]] = []  # the spans no finished part covers
    reused = parts = start = 0
    for a, b in _finished_parts(folder, n, bs):
        part = _load_part(folder / _part_name(a, b), b - a, dim)
        if part is None:
            continue
        if start < a:
            todo.append((start, a))
        out[order[a:b]] = part
        release(out)
        reused, parts, start = reused + b - a, parts + 1, b
    if start < n:
        todo.append((start, n))
    if reused:
        log.info("%s: %d of %d rows already encoded in %d parts; encoding the other %d", folder, reused, n, parts,
                 n - reused)
    bar = tqdm(total=n, initial=reused, desc=f"embedding {desc}".strip(), unit="text", unit_scale=True,
               smoothing=0.05, disable=not embedder.show_progress)

    def save(a: int, b: int) -> None:
        with atomic_open(folder / _part_name(a, b), "wb") as f:  # a kill leaves a temp file, never a part
            np.save(f, out[order[a:b]])
        release(out)

    first = done = 0  # the part being encoded: rows [first, done) finished
    try:
        # one autocast context around the batches: its cast cache then lives across them (an exit per call of
        # _encode would clear it), and nested contexts do not change what each batch computes
        with _sigterm_raises(), embedder.autocast():
            for a, b in todo:
                first = done = a
                born = _clock()
                for s in range(a, b, bs):
                    batch = order[s:min(b, s + bs)]
                    out[batch] = embedder._encode([texts[i] for i in batch])
                    done = s + len(batch)
                    bar.update(len(batch))
                    if done - first >= rows or done == b or (chunk_s is not None and _clock() - born >= chunk_s):
                        save(first, done)
                        first, born = done, _clock()
    except BaseException:
        if done > first:  # the batches finished since the last part: a rerun starts after them
            save(first, done)
            log.warning("%s: encoding stopped; rows %d-%d saved as a part, the same command goes on from there",
                        folder, first, done)
        raise
    finally:
        bar.close()
    return out


def release(out: np.ndarray) -> None:
    """Write a memory map's dirty pages to its file and drop them from the process (``MADV_DONTNEED``; the file
    keeps every value, a later read maps them again); nothing for an array in memory. The encode writes its rows
    in the longest-first order, all over the map, so without this every page of the file stayed resident until
    the end: 12.7 GiB of T²RAG's 19.6 GiB peak RSS at 2Wiki size were these pages (docs/scale.md), which the
    kernel could reclaim only after writing them back."""
    mm = getattr(out, "_mmap", None)
    if mm is None or not hasattr(mmap, "MADV_DONTNEED"):
        return
    out.flush()
    mm.madvise(mmap.MADV_DONTNEED)


def mapped_output(target: Path | BinaryIO, rows: int, dim: int) -> np.memmap:
    """A writable ``rows`` x ``dim`` float32 memory map: an ``.npy`` file at ``target`` (a path; a plain map of a
    file object), its blocks allocated first (``posix_fallocate``), so that a full disk is an OSError here, not a
    SIGBUS when a written page finds no block."""
    if isinstance(target, Path):
        mm = np.lib.format.open_memmap(target, mode="w+", dtype=np.float32, shape=(rows, dim))
        size = target.stat().st_size
        with open(target, "r+b") as f:
            _allocate(f.fileno(), size)
        return mm
    _allocate(target.fileno(), rows * dim * 4)
    return np.memmap(target, dtype=np.float32, mode="w+", shape=(rows, dim))


def _allocate(fd: int, size: int) -> None:
    if size == 0:
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a file system without fallocate: written as it comes
            raise


def remove_parts(folder: Path) -> None:
    """Remove a parts folder once its assembled matrix is saved."""
    shutil.rmtree(folder, ignore_errors=True)
