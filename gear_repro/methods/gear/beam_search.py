"""Diverse triple beam search (GEAR §4.2, Alg. 1), read exactly as DESIGN.md fixes it.

::

    B0 <- top_b({<score(q,[t]), [t]> : t in initial triples})
    for i in 1..l-1:
        X <- all triples in any beam of B_{i-1}                      # exists(t, B_{i-1}), line 11
        for <s, T> in B_{i-1}:
            V <- [<s + score(q, T∘t), T∘t> : t in get_neighbours(T.last()), t not in X]   # line 13
            sort(V, descending)
            V[n].s <- V[n].s * exp(-min(n, γ) / γ)    for n = 0, 1, ...  # lines 16-18 (diversity)
        B_i <- top_b(all V)                                           # line 20
    return B_{l-1}

score(q, path) is the cosine of SBERT embeddings of q and the path text (the concatenation of its triples'
"s p o" texts). At most ``neighbours`` candidates are considered per beam, picked by the relevance of the
single neighbour triple to q (cosine of q and the triple's pre-computed vector). The final beams are
flattened breadth-first (position 0 of every beam in beam order, then position 1, ...).

Switches (``configs/beam/default.yaml``; docs/graph_expansion.md): ``length`` l, ``width`` b, ``neighbours``,
``neighbour_selection``, ``gamma`` γ (null -> 2b), ``diversity`` (false = plain beam search, the Table 4
ablation), ``exists`` (which triples a beam may not re-use), ``dead_ends`` (beams whose last triple has no
admissible neighbour), ``scorer`` (``exact`` = the paper's definition; ``sum``/``mean`` = approximations from
pre-computed triple vectors), ``path_separator``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gear_repro.core.triple_graph import NeighbourRelevance, TripleIndex
from gear_repro.methods.gear.scorers import PathScorer, make_scorer, takes_path_text
from gear_repro.utils.settings import Choice, as_dict, check_fields, num, refuse_unknown
from gear_repro.utils.trace import bump as _bump

# --------------------------------------------------------------------------------------------------
# configuration


class NeighbourSelection(Choice):
    """Which neighbours a beam considers when ``neighbours`` caps them (beam.neighbour_selection)."""

    relevance = "relevance"  # cosine of q and the single triple
    order = "order"  # row order


class Exists(Choice):
    """Which triples a beam may not re-use (beam.exists)."""

    previous_step = "previous_step"  # any triple in a beam of the previous step (Alg. 1 exists(t, B_{i-1}))
    path = "path"  # the beam's own triples
    none = "none"  # none


class DeadEnds(Choice):
    """Beams whose last triple has no admissible neighbour (beam.dead_ends)."""

    fallback = "fallback"  # dropped as in Alg. 1; a step with no candidate at all keeps the previous beams
    drop = "drop"  # dropped (literal Alg. 1)
    keep = "keep"  # carried over unchanged


@dataclass
class BeamConfig:
    """Parameters of Alg. 1 and of our reading of it (defaults = the paper's, §6.2 / DESIGN.md). Also the
    ``beam`` group's config schema (registered in Hydra's ConfigStore by ``gear_repro/config.py``): one
    declaration of every field, its type, choices and range."""

    length: int = num(2, ge=1)  # l: maximum number of triples per beam (§6.2)
    width: int = num(10, ge=1)  # b: beams kept per step (§6.2)
    neighbours: int | None = num(100, ge=0)  # max candidates per beam and step (None/0 = all neighbours)
    # which ones when capped: relevance (cosine of q and the single triple) | order (first in row order)
    neighbour_selection: NeighbourSelection = NeighbourSelection.relevance
    # γ of exp(-min(n,γ)/γ): 20 = 2b at the paper's b = 10, and it stays 20 when the width is changed; None -> 2 * width
    gamma: float | None = num(20.0, gt=0)
    diversity: bool = True  # False = plain beam search (Table 4 "w/o diversity")
    # skip triples already in any beam of the previous step (Alg. 1 line 11) | path (the beam's own) | none
    exists: Exists = Exists.previous_step
    # beams without admissible neighbours are dropped as in Alg. 1; fallback: a whole step empty keeps the previous
    # beams | drop (literal) | keep (carry dead ends)
    dead_ends: DeadEnds = DeadEnds.fallback
    # score(q, path): exact (SBERT of the concatenated path text, the paper's) | sum (normalised sum of triple vectors)
    # | mean (mean triple cosine) | fast (the cascade, beam=fast) | a name registered with scorers.register_scorer
    scorer: str = "exact"
    path_separator: str = " "  # joins triple texts into the path text (exact scorer)
    # the scorer's options, checked at start-up against its dataclass (scorers.ExactOptions, CascadeOptions), e.g.
    # +beam.scorer_options.batch_size=4 (docs/graph_expansion.md)
    scorer_options: dict[str, Any] = field(default_factory=dict)
    # exact scorer: keep encoded path vectors in $GEAR_CACHE/path_vectors across runs (same scores)
    path_cache: bool = False
    label: str | None = None  # free-form row label for reports (Table 4: "w/ diversity"); no effect on search

    def __post_init__(self) -> None:
        check_fields(self, "beam")

    @property
    def gamma_value(self) -> float:
        """γ in use: the configured value, or 2b when unset (DESIGN.md)."""
        return float(self.gamma) if self.gamma else 2.0 * self.width

    @classmethod
    def from_any(cls, cfg: BeamConfig | Mapping[str, Any] | None) -> BeamConfig:
        """Build from a BeamConfig, a dict or an OmegaConf node (``cfg.beam``); unknown keys are an error."""
        if cfg is None:
            return cls()
        if isinstance(cfg, cls):
            return cfg
        settings = as_dict(cfg)
        refuse_unknown("beam", settings, cls)
        return cls(**settings)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gamma_value": self.gamma_value}


def diversity_weight(n: int, gamma: float) -> float:
    """Alg. 1 line 18: weight of the n-th (0-based) candidate of a beam, exp(-min(n, γ) / γ)."""
    return math.exp(-min(n, gamma) / gamma)


# --------------------------------------------------------------------------------------------------
# the search


@dataclass
class Beam:
    """A sequence of triples (rows of the index) and its accumulated (re-weighted) score."""

    rows: tuple[int, ...]
    score: float
    path_scores: tuple[float, ...] = ()  # score(q, prefix) at each step, before re-weighting

    @property
    def last(self) -> int:
        return self.rows[-1]


@dataclass
class BeamResult:
    """Final beams B_{l-1} (best first), the breadth-first triple and passage lists, counters, timings."""

    beams: list[Beam]
    triples: list[str]  # breadth-first flattened triple ids (may repeat across beams)
    passages: list[str]  # their passages, de-duplicated: C~_q
    steps: int = 0  # expansion steps actually performed
    counters: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_trace(self, index: TripleIndex, n_beams: int | None = None) -> list[dict[str, Any]]:
        """JSON-friendly beams: triple ids, texts, passages, score and per-step path scores."""
        out = []
        for b in self.beams[:n_beams]:
            ids = [index.ids[r] for r in b.rows]
            out.append({"score": round(float(b.score), 6), "path_scores": [round(float(x), 6) for x in b.path_scores],
                        "triples": ids, "texts": [index.text(t) for t in ids],
                        "passages": [index.passage_of[t] for t in ids]})
        return out


def flatten_breadth_first(beams: Sequence[Beam]) -> list[int]:
    """Position 0 of every beam in beam order, then position 1, ... (§4.2, DESIGN.md)."""
    depth = max((len(b.rows) for b in beams), default=0)
    return [b.rows[i] for i in range(depth) for b in beams if i < len(b.rows)]


def scorer_for(cfg: BeamConfig, index: TripleIndex, embedder) -> PathScorer:
    """The scorer a :class:`BeamConfig` asks for (``scorer``, ``scorer_options``, ``path_separator``)."""
    path_text = {"separator": cfg.path_separator, "path_cache": cfg.path_cache} if takes_path_text(cfg.scorer) else {}
    return make_scorer(cfg.scorer, index, embedder, cfg.scorer_options, **path_text)


def beam_search(
    query: str,
    initial: Sequence[str],
    index: TripleIndex,
    scorer: PathScorer,
    cfg: BeamConfig | Mapping[str, Any] | None = None,
    query_vector: np.ndarray | None = None,
) -> BeamResult:
    """Alg. 1 over ``index`` from the initial triple ids; see the module docstring for the reading.

    Duplicate and unknown initial ids are skipped (counted in ``BeamResult.counters``, with the candidates, caps,
    dead ends and hub entities met). Ties keep the order in which candidates are generated (beam order, then
    within-beam rank), so results are deterministic.
    """
    cfg = BeamConfig.from_any(cfg)
    c: dict[str, int] = {}
    timings = {"query_s": 0.0, "gather_s": 0.0, "score_s": 0.0}
    t0 = time.perf_counter()
    seen: set[int] = set()
    rows_l: list[int] = []
    for tid in initial:
        r = index.row.get(tid)
        if r is None:
            _bump(c, "initial_unknown")
            continue
        if r in seen:
            _bump(c, "initial_duplicates")
            continue
        seen.add(r)
        rows_l.append(r)
    c["initial_triples"] = len(rows_l)
    if not rows_l:
        _bump(c, "no_initial_triples")
        return BeamResult([], [], [], 0, dict(c), timings)
    qv = query_vector if query_vector is not None else scorer.query_vector(query)
    timings["query_s"] = time.perf_counter() - t0

    # B0 (lines 1-5)
    t1 = time.perf_counter()
    rows = np.asarray(rows_l, dtype=np.int64)
    s0 = scorer.single(qv, rows)
    order = np.argsort(-s0, kind="stable")[: cfg.width]
    beams = [Beam((int(rows[i]),), float(s0[i]), (float(s0[i]),)) for i in order]
    timings["score_s"] += time.perf_counter() - t1

    gamma = cfg.gamma_value
    cap = cfg.neighbours or 0
    # cosine(q, t) of the single triples, by relevance (ties by row), each entity ranked once per query
    relevance = NeighbourRelevance(index, qv) if cap and cfg.neighbour_selection == "relevance" else None
    steps = 0
    for _step in range(1, cfg.length):
        # gather candidates per beam (lines 8-12)
        t2 = time.perf_counter()
        if cfg.exists == "previous_step":
            in_prev = np.fromiter({r for b in beams for r in b.rows}, dtype=np.int64)
        cand_rows: list[np.ndarray] = []
        for b in beams:
            exclude = (in_prev if cfg.exists == "previous_step" else b.rows if cfg.exists == "path" else ())
            nb, skipped, capped = index.select_neighbours(b.last, exclude, cap, relevance, c)
            if skipped:
                _bump(c, "exists_skipped", skipped)
            if capped:
                _bump(c, "neighbours_capped")
            cand_rows.append(nb)
        paths = [b.rows + (int(r),) for b, nb in zip(beams, cand_rows, strict=True) for r in nb]
        _bump(c, "candidates", len(paths))
        timings["gather_s"] += time.perf_counter() - t2

        # score (line 13), sort and re-weight per beam (lines 15-19), global top-b (line 20)
        t3 = time.perf_counter()
        sc = scorer.paths(qv, paths, np.repeat([b.score for b in beams], [nb.size for nb in cand_rows]))
        # the pool in generation order (beam order, then within-beam rank n): re-weighted scores, and per entry the
        # beam and its path's index (-1: a dead-end beam kept as it is); Beam objects only for the top-b
        longest = max((nb.size for nb in cand_rows), default=0)
        weights = np.asarray([diversity_weight(n, gamma) if cfg.diversity else 1.0 for n in range(longest)])
        scores, owner, which = [], [], []
        pos = 0
        for i, (b, nb) in enumerate(zip(beams, cand_rows, strict=True)):
            m = nb.size
            if m == 0:
                _bump(c, "dead_end_beams")
                if cfg.dead_ends == "keep":
                    scores.append(np.asarray([b.score]))
                    owner.append(np.asarray([i]))
                    which.append(np.asarray([-1]))
                continue
            s_new = b.score + sc[pos:pos + m]
            local = np.argsort(-s_new, kind="stable")
            scores.append(s_new[local] * weights[:m])
            owner.append(np.full(m, i))
            which.append(pos + local)
            pos += m
        new_beams = []
        if scores:
            pool_scores, pool_owner, pool_which = (np.concatenate(x) for x in (scores, owner, which))
            for t in np.argsort(-pool_scores, kind="stable")[: cfg.width]:  # stable: generation order breaks ties
                b, j = beams[pool_owner[t]], int(pool_which[t])
                new_beams.append(b if j < 0 else Beam(paths[j], float(pool_scores[t]), b.path_scores + (float(sc[j]),)))
        timings["score_s"] += time.perf_counter() - t3
        if not new_beams:
            _bump(c, "beam_stalled")
            if cfg.dead_ends == "drop":
                beams = []
            break
        beams = new_beams
        steps += 1

    flat = flatten_breadth_first(beams)
    triples = [index.ids[r] for r in flat]
    passages = list(dict.fromkeys(index.passage_of[t] for t in triples))
    return BeamResult(beams, triples, passages, steps, dict(c), timings)
