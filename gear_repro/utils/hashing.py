"""Content hashes that key every cached artifact (embeddings, indexes, triples, LLM replies)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np


def stable_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces) so equal objects hash equally."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def hash_obj(obj: Any, n: int = 16) -> str:
    """Short sha256 of an object's canonical JSON."""
    return hashlib.sha256(stable_json(obj).encode("utf-8")).hexdigest()[:n]


def hash_texts(items: Iterable[str], n: int = 16) -> str:
    """Order-sensitive sha256 over a sequence of strings."""
    h = hashlib.sha256()
    for s in items:
        b = s.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()[:n]


def hash_file(path: str | Path, n: int = 16) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:n]


_SAMPLE = 1 << 20  # bytes read at each of a file's start, middle and end by files_identity


def files_identity(path: str | Path, n: int = 16) -> str:
    """Identity of a model file or folder by content, cheap for multi-GB weights: every file's relative path, size
    and sha256 of its first, middle and last MiB (a retrained or re-quantised model changes bytes everywhere; a
    copy or a move keeps its identity). Keys what a path alone cannot (two ``.../model`` folders, a model retrained
    in place)."""
    root = Path(path).expanduser()
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    h = hashlib.sha256()
    for f in files:
        size = f.stat().st_size
        h.update(f"{f.relative_to(root).as_posix() if root.is_dir() else ''}\0{size}\0".encode())
        with open(f, "rb") as fh:
            for at in sorted({0, max(0, size // 2 - _SAMPLE // 2), max(0, size - _SAMPLE)}):
                fh.seek(at)
                h.update(fh.read(_SAMPLE))
    return h.hexdigest()[:n]


_IDENTITIES: dict[tuple[str, tuple[tuple[str, int, int], ...]], str] = {}  # model_path_identity's, per process


def model_path_identity(model: str | Path | None) -> str | None:
    """:func:`files_identity` of a model given by path (an existing file or folder), None for a hub name, a bundled
    model's alias or no model. The keys of vectors, replies and runs take it; computed once per process for a
    path whose files keep their sizes and modification times (a bf16 embedder and its fp32 query twin, the run
    fingerprint and the LLM client read a multi-GB model once)."""
    if not model:
        return None
    root = Path(str(model)).expanduser()
    if not root.exists():
        return None
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    stats = tuple((f.relative_to(root).as_posix(), (st := f.stat()).st_size, st.st_mtime_ns) for f in files)
    key = (str(root.resolve()), stats)
    if key not in _IDENTITIES:
        _IDENTITIES[key] = files_identity(root)
    return _IDENTITIES[key]


def hash_array(a: np.ndarray, n: int = 16, block_rows: int = 65_536) -> str:
    """sha256 of an array's dtype, shape and values (row blocks: a memory-mapped matrix is read once, never
    copied whole)."""
    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    a = np.atleast_1d(a)
    for i in range(0, a.shape[0], block_rows):
        h.update(np.ascontiguousarray(a[i:i + block_rows]).tobytes())
    return h.hexdigest()[:n]
