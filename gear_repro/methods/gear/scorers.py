"""score(q, path) of the diverse triple beam search (GEAR §4.2, Alg. 1 lines 3 and 13) and the path-vector store.

The paper scores a path by the cosine of SBERT(q) and SBERT(path text), the path text being the concatenation
of its triples' "s p o" texts (DESIGN.md): :class:`ExactScorer`. The others trade exactness for speed:

* ``sum``  (:class:`SumScorer`): cosine of q and the normalised sum of the triples' pre-computed vectors;
* ``mean`` (:class:`MeanScorer`): mean of the single-triple cosines;
* ``fast`` (:class:`CascadeScorer`, ``beam=fast``): the cheap ``sum`` score for every candidate, exact SBERT
  encoding only for the few candidates that can reach the top-b of a step, path vectors memoised per text
  across the k-passes and rounds of a run (docs/graph_expansion.md).

A scorer is chosen by ``beam.scorer`` (``scorer_for``); new ones are added with :func:`register_scorer`.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gear_repro.core.triple_graph import TripleIndex
from gear_repro.embedding.embedder import LENGTH_STEP
from gear_repro.embedding.word_pieces import PieceTable
from gear_repro.utils.arrays import as_float32, row_dots
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_texts
from gear_repro.utils.io import atomic_open
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, check_fields, num, refuse_unknown

DEFAULT_PATH_ROWS = 8  # rows of the exact scorer's fixed-shape path batches (docs/graph_expansion.md)
# ... where the embedder runs on CUDA: the graphs' passes are host-bound, fastest at 32 rows (docs/encoders.md)
DEFAULT_CUDA_PATH_ROWS = 32
OPTIONS_KEY = "beam.scorer_options"


class ApproxScore(Choice):
    """The cascade's cheap first-stage score (beam.scorer_options.approx)."""

    sum = "sum"  # cosine of q and the normalised sum of the path's triple vectors
    mean = "mean"  # mean cosine of q and the path's triples


@dataclass
class NoOptions:
    """``beam.scorer_options`` of a scorer that has none (``sum``, ``mean``)."""


@dataclass
class ExactOptions:
    """``beam.scorer_options`` of ``exact``: its schema, declared once (types, defaults, ranges)."""

    # rows of a fixed-shape path batch where the embedder does not run on CUDA (the CPU); null: each path alone
    batch_size: int | None = num(DEFAULT_PATH_ROWS, ge=1)
    cuda_batch_size: int | None = num(DEFAULT_CUDA_PATH_ROWS, ge=1)  # ... where it runs on CUDA
    reuse_triple_vectors: bool = True  # B0's one-triple paths read the triple collection's vectors
    # a path's word pieces joined from its triples' (tokenised once per run) instead of tokenising its text: the
    # same ids (the tokenizer's structure, and the first call's paths checked); null = where the embedder runs on
    # CUDA, whose passes it leaves host-bound (docs/encoders.md). Fixed-shape batches with a whitespace separator
    triple_pieces: bool | None = None

    def __post_init__(self) -> None:
        check_fields(self, OPTIONS_KEY)


@dataclass
class CascadeOptions(ExactOptions):
    """``beam.scorer_options`` of ``fast`` (:class:`CascadeScorer`): the exact stage's, and the cascade's own."""

    # the cheap first-stage score: sum (normalised sum of triple vectors) | mean (mean triple cosine)
    approx: ApproxScore = ApproxScore.sum
    # candidates per step scored exactly, best by s + cheap score (10 = b; 0 = cheap only)
    rescore: int = num(10, ge=0)
    memo_size: int = num(50_000, ge=1)  # exact path vectors memoised per text (LRU)
    # also rescore every candidate whose cheap s + score is within margin of the last one rescored (0 = off) ...
    margin: float = num(0.0, ge=0)
    rescore_max: int = num(100, ge=0)  # ... up to this many in all (100 = GEAR's neighbour budget)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.rescore_max < self.rescore:
            raise ConfigError(f"{OPTIONS_KEY}: need rescore_max >= rescore (got {self.rescore_max} < {self.rescore})")


def cosines(vectors: np.ndarray, rows: np.ndarray, qv: np.ndarray) -> np.ndarray:
    """q · v for the given rows of a unit-vector matrix (:func:`~gear_repro.utils.arrays.row_dots`: each row on
    its own, so two triples of one text score exactly alike on every instruction set and their tie is broken by
    row, not by where a BLAS kernel placed them)."""
    return row_dots(vectors, np.asarray(rows, dtype=np.int64), qv)


def on_cuda(embedder) -> bool:
    """Whether ``embedder`` runs on a CUDA device, where some of the exact scorer's defaults differ."""
    return str(getattr(embedder, "device", "cpu")).startswith("cuda")


class PathScorer(Protocol):
    """score(q, ·) of Alg. 1. Paths are tuples of triple rows of the :class:`TripleIndex`."""

    name: str

    def query_vector(self, query: str) -> np.ndarray:
        """Unit embedding of q."""
        ...

    def single(self, qv: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """score(q, [t]) for each row (B0, line 3)."""
        ...

    def paths(self, qv: np.ndarray, paths: Sequence[tuple[int, ...]], prior: np.ndarray | None = None) -> np.ndarray:
        """score(q, T∘t) for each path (line 13). ``prior`` holds the accumulated score s of the beam each
        path extends (Alg. 1 line 13's s); scorers that spend effort only where it can change the top-b
        (:class:`CascadeScorer`) use it, the others ignore it."""
        ...


class _VectorScorer:
    """Shared parts: q is encoded with the embedder; single triples use the index's triple vectors."""

    name = "base"

    def __init__(self, index: TripleIndex, embedder, options: NoOptions | None = None):
        """``options``: the :class:`NoOptions` ``make_scorer`` hands every factory; ``sum`` and ``mean`` take none."""
        self.index = index
        self.embedder = embedder
        self.stats: dict[str, int] = {"paths_scored": 0, "paths_encoded": 0}

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self.embedder.encode([query])[0], dtype=np.float32)

    def single(self, qv: np.ndarray, rows: np.ndarray) -> np.ndarray:
        v = self.index.vectors()
        return cosines(v, np.asarray(rows, dtype=np.int64), qv).astype(np.float64)


class PathVectorStore:
    """Append-only disk memo of encoded path texts for one embedder ($GEAR_CACHE/path_vectors/<model_id>/).

    Each batch of newly encoded paths is one ``.npz`` shard (texts + float32 vectors), written atomically,
    so concurrent runs only ever add files. Shards present when the store opens are loaded; vectors are the
    embedder's own, so scores are unchanged; it only skips re-encoding across runs (k-passes, Table 2/4 rows).
    """

    def __init__(self, model_id: str, root: str | os.PathLike | None = None):
        self.dir = (cache_dir() / "path_vectors" if root is None else Path(root)) / str(model_id)
        self.vectors: dict[str, np.ndarray] = {}
        if self.dir.is_dir():
            for f in sorted(self.dir.glob("*.npz")):
                try:
                    with np.load(f) as z:
                        for t, v in zip(z["texts"].tolist(), z["vecs"], strict=True):
                            self.vectors[t] = v
                except (OSError, ValueError, KeyError):  # a torn or foreign file: ignore it
                    continue

    def put(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        for t, v in zip(texts, vecs, strict=True):
            self.vectors[t] = v
        path = self.dir / f"{hash_texts(texts)}.npz"
        if path.exists():
            return
        with atomic_open(path, "wb") as f:
            np.savez(f, texts=np.asarray(list(texts), dtype=str), vecs=np.asarray(vecs, dtype=np.float32))


def _missing(paths: Sequence[tuple[int, ...]], texts: list[str],
             held: Mapping[str, Any]) -> tuple[list[tuple[int, ...]], list[str]]:
    """The distinct texts of ``texts`` that ``held`` lacks, in order, with a path of each (``paths`` the texts'
    paths; paths of one text have equal triple texts, so equal word pieces)."""
    path_of: dict[str, tuple[int, ...]] = {}
    for path, text in zip(paths, texts, strict=True):
        if text not in held:
            path_of.setdefault(text, path)
    return list(path_of.values()), list(path_of)


class ExactScorer(_VectorScorer):
    """The paper's score: cosine of SBERT(q) and SBERT(path text), path text = triple texts joined by
    ``separator`` (§4.2, DESIGN.md). A one-triple path's text is the triple text itself, whose vector the
    triple collection already holds (same model, same text), so B0 reuses it (``reuse_triple_vectors``).
    Longer paths are encoded in batches of one fixed shape per text (``batch_size`` rows, ``cuda_batch_size`` on
    CUDA, × the text's token count rounded up; ``embedder.encode_fixed``), so a path's vector does not depend on the other paths of the
    step; ``batch_size: null`` encodes each path alone (the vectors of runs before fixed-shape batches; ~1.7×
    the CPU time per path in fp32, docs/graph_expansion.md). The embedder de-duplicates and memoises them in its LRU (shared across queries and the k-passes of
    a run); with ``path_cache`` they also persist on disk (:class:`PathVectorStore`, keyed by the embedder's
    ``model_id`` and the batch shape) for later runs."""

    name = "exact"

    def __init__(self, index: TripleIndex, embedder, options: ExactOptions | None = None, separator: str = " ",
                 path_cache: bool = False):
        options = options or ExactOptions()
        super().__init__(index, embedder)
        self.separator = separator
        self.reuse_triple_vectors = options.reuse_triple_vectors
        self.batch_size = batch_size = options.cuda_batch_size if on_cuda(embedder) else options.batch_size
        key = embedder.model_id
        if batch_size is not None:  # fixed-shape vectors differ from lone ones in the last bits: their own store
            key += f"-rows{batch_size}x{LENGTH_STEP}"
        self.store = PathVectorStore(key) if path_cache else None
        self.triple_pieces = options.triple_pieces

    def path_text(self, path: Sequence[int]) -> str:
        return self.separator.join(self.index.text(self.index.ids[r]) for r in path)

    @cached_property
    def _pieces(self) -> tuple[PieceTable, np.ndarray] | None:
        """The triples' word pieces and the separator's (``triple_pieces``), built on the first encode that can use
        them; None where paths are tokenised: the option off (null: off unless the embedder runs on CUDA), each
        path alone, a separator without whitespace at both ends, or a tokenizer that does not join."""
        on = self.triple_pieces
        if on is None:
            on = on_cuda(self.embedder)
        table = getattr(self.embedder, "piece_table", None)
        sep = self.separator
        if not (on and table is not None and self.batch_size is not None and sep[:1].isspace()
                and sep[-1:].isspace()):
            return None
        triples = table([self.index.text(i) for i in self.index.ids])
        between = table([sep.strip()]) if triples is not None else None
        return None if between is None else (triples, between.ids)

    def _encode(self, paths: Sequence[tuple[int, ...]], texts: list[str]) -> np.ndarray:
        """The vectors of ``paths`` (``texts`` their path texts): from the disk store when enabled, else encoded
        through the embedder (which de-duplicates and memoises them in its LRU)."""
        if self.store is None:
            return self._embed(paths, texts)
        stored = self.store.vectors
        missing_paths, missing = _missing(paths, texts, stored)
        if missing:
            self.store.put(missing, self._embed(missing_paths, missing))
        self.stats["paths_from_disk"] = self.stats.get("paths_from_disk", 0) + len(texts) - len(missing)
        return np.stack([stored[t] for t in texts])

    def _embed(self, paths: Sequence[tuple[int, ...]], texts: list[str]) -> np.ndarray:
        """Path vectors from the shared embedder (whose settings are never changed here), batch-independent
        either way: fixed-shape batches of ``batch_size`` rows (``encode_fixed``; the word pieces of a text it
        encodes joined from its path's triples' where :attr:`_pieces` holds them), or each text alone
        (``encode_alone``, ``batch_size`` null); in ``embedder.precision``, like the corpus."""
        before = self.embedder.stats["encoded"]
        if self.batch_size is None:
            vecs = self.embedder.encode_alone(texts)
        elif self._pieces is not None:
            table, between = self._pieces
            path_of = dict(zip(texts, paths, strict=True))
            vecs = self.embedder.encode_fixed(texts, self.batch_size, lambda t: table.joined(path_of[t], between))
        else:
            vecs = self.embedder.encode_fixed(texts, self.batch_size)
        self.stats["paths_encoded"] += self.embedder.stats["encoded"] - before
        return np.asarray(vecs, dtype=np.float32)

    def single(self, qv: np.ndarray, rows: np.ndarray) -> np.ndarray:
        if self.reuse_triple_vectors:
            return super().single(qv, rows)
        return ExactScorer.paths(self, qv, [(int(r),) for r in rows])

    def paths(self, qv: np.ndarray, paths: Sequence[tuple[int, ...]], prior: np.ndarray | None = None) -> np.ndarray:
        if not paths:
            return np.zeros(0)
        self.stats["paths_scored"] += len(paths)
        vecs = self._encode(paths, [self.path_text(p) for p in paths])
        return row_dots(vecs, np.arange(len(vecs)), qv)


class SumScorer(_VectorScorer):
    """Approximation: the path's vector is the normalised sum of its triples' unit vectors (no encoding
    at query time beyond q). For unit vectors this equals the normalised mean."""

    name = "sum"

    def paths(self, qv: np.ndarray, paths: Sequence[tuple[int, ...]], prior: np.ndarray | None = None) -> np.ndarray:
        if not paths:
            return np.zeros(0)
        self.stats["paths_scored"] += len(paths)
        v = self.index.vectors()
        lengths = {len(p) for p in paths}
        out = np.empty(len(paths), dtype=np.float64)
        for n in lengths:  # vectorised per path length
            sel = [i for i, p in enumerate(paths) if len(p) == n]
            rows = np.asarray([paths[i] for i in sel], dtype=np.int64)  # (m, n)
            summed = as_float32(v[rows]).sum(axis=1)  # (m, d)
            norms = np.linalg.norm(summed, axis=1)
            norms[norms == 0] = 1.0
            out[sel] = row_dots(summed, np.arange(len(summed)), qv) / norms
        return out


class MeanScorer(_VectorScorer):
    """Approximation: the mean of the path's single-triple cosines (no path vector, no encoding beyond q).
    On the MuSiQue sample it keeps NaiveGE's R@15 within 0.4 points of ``exact`` (docs/graph_expansion.md)."""

    name = "mean"

    def paths(self, qv: np.ndarray, paths: Sequence[tuple[int, ...]], prior: np.ndarray | None = None) -> np.ndarray:
        if not paths:
            return np.zeros(0)
        self.stats["paths_scored"] += len(paths)
        v = self.index.vectors()
        out = np.empty(len(paths), dtype=np.float64)
        for n in {len(p) for p in paths}:  # vectorised per path length
            sel = [i for i, p in enumerate(paths) if len(p) == n]
            rows = np.asarray([paths[i] for i in sel], dtype=np.int64)  # (m, n)
            sims = cosines(v, rows.ravel(), qv)
            out[sel] = sims.reshape(rows.shape).astype(np.float64).mean(axis=1)
        return out


class CascadeScorer(ExactScorer):
    """``beam=fast``: the exact score where it matters, a cheap one elsewhere (a two-stage cascade).

    1. Every candidate gets the cheap score of ``approx`` (``sum`` or ``mean``: pre-computed triple vectors,
       no encoding).
    2. The ``rescore`` candidates with the highest cheap accumulated score ``s + approx`` (the quantity the
       global top-b of Alg. 1 line 20 ranks; ``prior`` = s) are scored exactly as :class:`ExactScorer`
       does (SBERT of the path text); with ``margin`` > 0 also every further candidate whose cheap total is
       within ``margin`` of the last of those (at most ``rescore_max`` in all): an adaptive rescoring set
       that covers candidates the cheap score's error could still lift into the top-b. Candidates left with a cheap score are shifted by the median
       (exact - cheap) difference of the rescored ones, so both kinds of scores are on one scale.
    3. Exact path vectors are memoised per text (LRU of ``memo_size``), so the k-passes of a question and
       the rounds of GEAR encode a path once; with ``path_cache`` they persist on disk as well.

    With ``rescore`` >= the number of candidates it returns the exact scores. The rescored texts are encoded as
    :class:`ExactScorer` encodes them (fixed-shape batches), so a score does not depend on which other paths were
    encoded with it. Agreement with ``exact`` on the MuSiQue sample:
    docs/graph_expansion.md (``benchmarks/bench_expansion.py``).
    """

    name = "fast"

    def __init__(self, index: TripleIndex, embedder, options: CascadeOptions | None = None, separator: str = " ",
                 path_cache: bool = False):
        options = options or CascadeOptions()
        super().__init__(index, embedder, options, separator=separator, path_cache=path_cache)
        self.margin = options.margin
        self.rescore_max = options.rescore_max
        self.approx = _SCORERS[options.approx.value].factory(index, embedder, NoOptions())
        self.rescore = options.rescore
        self.memo: OrderedDict[str, np.ndarray] = OrderedDict()
        self.memo_size = options.memo_size
        self.stats.update(paths_rescored=0, paths_memo_hits=0)

    def clear(self) -> None:
        """Forget memoised path vectors (benchmarks measuring cold questions)."""
        self.memo.clear()

    def _memo_encode(self, paths: Sequence[tuple[int, ...]]) -> np.ndarray:
        texts = [self.path_text(p) for p in paths]
        missing_paths, missing = _missing(paths, texts, self.memo)
        self.stats["paths_memo_hits"] += len(texts) - len(missing)
        if missing:
            for t, v in zip(missing, self._encode(missing_paths, missing), strict=True):
                self.memo[t] = v
        out = np.stack([self.memo[t] for t in texts])
        for t in texts:
            self.memo.move_to_end(t)
        while len(self.memo) > self.memo_size:
            self.memo.popitem(last=False)
        return out

    def paths(self, qv: np.ndarray, paths: Sequence[tuple[int, ...]], prior: np.ndarray | None = None) -> np.ndarray:
        if not paths:
            return np.zeros(0)
        cheap = self.approx.paths(qv, paths)
        self.stats["paths_scored"] += len(paths)
        total = cheap if prior is None else cheap + np.asarray(prior, dtype=np.float64)
        order = np.argsort(-total, kind="stable")
        pick = order[: self.rescore]
        if self.margin > 0 and pick.size:
            # adaptive: also every candidate whose cheap total is within `margin` of the last one rescored
            near = int(np.count_nonzero(total >= total[pick[-1]] - self.margin))
            pick = order[: max(pick.size, min(near, self.rescore_max))]
        if pick.size == 0:
            return cheap
        vecs = self._memo_encode([paths[i] for i in pick])
        exact = row_dots(vecs, np.arange(len(vecs)), qv)
        self.stats["paths_rescored"] += int(pick.size)
        out = cheap + float(np.median(exact - cheap[pick]))
        out[pick] = exact
        return out


@dataclass(frozen=True)
class ScorerSpec:
    """A scorer of ``beam.scorer``: ``factory(index, embedder, options, **path_text_settings)`` and the dataclass of
    its ``beam.scorer_options`` (the schema the options are checked against at start-up)."""

    factory: Callable[..., PathScorer]
    options: type = NoOptions


_SCORERS: dict[str, ScorerSpec] = {"exact": ScorerSpec(ExactScorer, ExactOptions), "sum": ScorerSpec(SumScorer),
                                   "mean": ScorerSpec(MeanScorer), "fast": ScorerSpec(CascadeScorer, CascadeOptions)}


def register_scorer(name: str, factory: Callable[..., PathScorer], options: type = NoOptions) -> None:
    """Add a scorer: ``factory(index, embedder, options)`` returning a :class:`PathScorer`, ``options`` the
    dataclass of its ``beam.scorer_options`` (an instance is what the factory receives)."""
    _SCORERS[name] = ScorerSpec(factory, options)


def scorer_options(name: str, options: Mapping[str, Any] | None = None) -> Any:
    """The options object of scorer ``name`` from ``beam.scorer_options``; a ConfigError naming the setting for an
    unknown scorer, a key the scorer does not take, or a value of the wrong kind or out of range (checked at run
    start-up, before any question)."""
    if name not in _SCORERS:
        raise ConfigError(f"beam.scorer '{name}' is unknown; known: {sorted(_SCORERS)}")
    schema = _SCORERS[name].options
    given = dict(options or {})
    refuse_unknown(OPTIONS_KEY, given, schema, f"the '{name}' scorer")
    return schema(**given)


def make_scorer(name: str, index: TripleIndex, embedder, options: Mapping[str, Any] | None = None,
                **path_text: Any) -> PathScorer:
    """Build the scorer ``name`` ("exact", "sum", "mean", "fast", or registered) with its ``beam.scorer_options``;
    ``path_text`` (``separator``, ``path_cache``) only for scorers that encode path texts."""
    options = scorer_options(name, options)
    return _SCORERS[name].factory(index, embedder, options, **path_text)


def takes_path_text(name: str) -> bool:
    """Whether the scorer ``name`` encodes path texts (an :class:`ExactScorer`: it takes ``separator`` and
    ``path_cache``)."""
    spec = _SCORERS.get(name)
    return spec is not None and isinstance(spec.factory, type) and issubclass(spec.factory, ExactScorer)
