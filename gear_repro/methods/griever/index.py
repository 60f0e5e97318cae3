"""GRIEVER's offline index content (§4.1, App. A.1), independent of the engine that serves it.

* ``passages``: id, title, content, the passage's triples, its subjects and objects (normalised entity
  keys) and its embedding (the run's passage embedding cache).
* ``partial_triples`` (§4.2.4): one unit per distinct (anchor entity, predicate, direction): the forward
  partial "s p" (anchor s, complement o) and the inverse partial "p o" (anchor o, complement s), with the
  complement entities, the passages and the triples it was taken from, and the embedding of its text.
  The Table 3 ablation ``full`` indexes whole triples "s p o" instead (anchor s, complement o, one unit
  per triple).
* ``same_as`` (§4.2.3): per entity, its aliases and the passages the entity occurs in. The paper does not
  say how synonyms are found; we take the entities whose name embeddings have cosine >= ``threshold``
  (default 0.8) with it *and* share at least one non-stopword token (``require_token_overlap``, so
  "Florida"/"Georgia" are never aliases), at most ``max_aliases`` of them, best first. No transitive
  closure: chains of near-synonyms do not merge into one cluster.

Every distinct entity name and predicate is embedded once (one cached ``encode_corpus`` call), the unit
texts in a second call; passage and full-triple vectors are the same cached matrices the base retrievers
use (same texts in the same order, so the same cache file).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gear_repro.core.triple_graph import normalize_entity
from gear_repro.embedding.embedder import mapped_matrix
from gear_repro.methods.griever.text import STOPWORDS, words
from gear_repro.types import Passage, Triple
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import record_bar
from gear_repro.utils.settings import Choice, check_fields, num

log = logging.getLogger(__name__)


class UnitVectors(Choice):
    """How unit embeddings are made: ``encode`` the unit text (§4.2.4, the paper) or ``compose`` them as the
    normalised sum of the anchor, predicate (and, for full triples, object) name embeddings (ours: no
    encoder pass over the ~2 units per triple; for slow machines)."""

    encode = "encode"
    compose = "compose"


class ShortlistIndex(Choice):
    """Which index Alg. 2 shortlists with (Table 3: partial_triples vs full_triples)."""

    partial = "partial"
    full = "full"


@dataclass(frozen=True, slots=True)  # slots: ~100 B less per unit, 2.3M of them at MuSiQue's full size
class Unit:
    """One document of the shortlisting index: a partial triple (or a full triple for the ablation)."""

    id: str
    text: str
    anchor: str              # normalised anchor entity ("subject" field of App. A.1)
    predicate: str           # normalised predicate
    inverse: bool            # True for "p o" partials (anchor = object)
    complements: tuple[str, ...]  # normalised complement entities ("objects" of App. A.1)
    passage_ids: tuple[str, ...]
    triple_ids: tuple[str, ...]


SIMS_BYTES = 512 * 2**20  # one block of all-pairs cosines at most: 2,048 rows x 1.48M entities would be 11 GiB


def block_rows(block: int, entities: int) -> int:
    """Rows per block of the all-pairs cosine: ``same_as.block``, fewer where a block of ``entities``-wide float32
    rows would pass SIMS_BYTES (each row is computed alike whatever the block; memory only)."""
    return max(1, min(block, SIMS_BYTES // (4 * max(entities, 1))))


@dataclass
class SameAsConfig:
    """``retriever.same_as``: alias clustering of the ``same_as`` index (§4.2.3; our choice, the paper does not say
    how)."""

    threshold: float = num(0.8, ge=-1, le=1)  # cosine of entity-name embeddings
    require_token_overlap: bool = True  # aliases also share a non-stopword token
    max_aliases: int = num(5, ge=0)  # aliases kept per entity, best first
    # rows per block of the all-pairs cosine (memory only; fewer where a block would pass SIMS_BYTES, 512 MiB)
    block: int = num(2048, ge=1)

    def __post_init__(self) -> None:
        check_fields(self, "retriever.same_as")


def _content_tokens(name: str) -> frozenset[str]:
    return frozenset(w.text.casefold() for w in words(name) if w.text.casefold() not in STOPWORDS)


@dataclass
class GrieverData:
    """The three indexes' content plus the vectors GRIEVER scores with (rows follow the id lists)."""

    passages: list[Passage]
    triples: dict[str, Triple]
    passage_triples: dict[str, list[str]]
    passage_entities: dict[str, list[str]]     # subjects + objects, first-seen order
    passage_subjects: dict[str, list[str]]
    passage_objects: dict[str, list[str]]
    entity_name: dict[str, str]                # key -> first surface form
    units: list[Unit]
    unit_kind: ShortlistIndex
    partial_freq: dict[tuple[str, str, bool], int]  # freq(e, p) of Eq. 1 = number of complements
    same_as_entity: dict[str, list[str]] = field(default_factory=dict)  # key -> alias keys
    entity_passages: dict[str, list[str]] = field(default_factory=dict)
    pred_name: dict[str, str] = field(default_factory=dict)  # predicate key -> first surface form
    text_row: dict[str, int] = field(default_factory=dict)   # entity/predicate text -> row of ``name_matrix``
    name_matrix: np.ndarray | None = None                    # float32, the cache file's memory map where cached
    unit_matrix: np.ndarray | None = None                    # rows aligned with ``units``

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def build(cls, passages: Sequence[Passage], triples: Sequence[Triple], embedder,
              unit_kind: ShortlistIndex = ShortlistIndex.partial, same_as: SameAsConfig | None = None,
              unit_vectors: UnitVectors = UnitVectors.encode) -> GrieverData:
        if not triples:
            raise DataError("GRIEVER needs the corpus triples (triples.jsonl); run extraction or import them")
        same_as = same_as or SameAsConfig()
        tmap: dict[str, Triple] = {}
        p_tr: dict[str, list[str]] = defaultdict(list)
        p_sub: dict[str, dict[str, None]] = defaultdict(dict)
        p_obj: dict[str, dict[str, None]] = defaultdict(dict)
        name: dict[str, str] = {}
        pred_name: dict[str, str] = {}
        # (anchor, predicate, inverse) -> complements, passages, triples: lists deduplicated at the end in
        # first-seen order, as a dict per field would keep them but at ~500 B more a unit at the build's peak
        groups: dict[tuple[str, str, bool], tuple[list[str], list[str], list[str]]] = {}
        normal: dict[str, str] = {}  # surface form -> key: normalised once, one string shared by every record

        def key(surface: str) -> str:
            k = normal.get(surface)
            if k is None:
                k = normal[surface] = normalize_entity(surface)
            return k

        with record_bar(len(triples), "griever triples", "triple") as bar:
            for t in triples:
                tmap[t.id] = t
                s, p, o = key(t.subject), key(t.predicate), key(t.object)
                p_tr[t.passage_id].append(t.id)
                p_sub[t.passage_id][s] = None
                p_obj[t.passage_id][o] = None
                name.setdefault(s, t.subject.strip())
                name.setdefault(o, t.object.strip())
                pred_name.setdefault(p, t.predicate.strip())
                for anchor, comp, inverse in ((s, o, False), (o, s, True)):
                    g = groups.get((anchor, p, inverse))
                    if g is None:
                        g = groups[(anchor, p, inverse)] = ([], [], [])
                    g[0].append(comp)
                    g[1].append(t.passage_id)
                    g[2].append(t.id)
                bar.update()
        units: list[Unit] = []
        partial = unit_kind == ShortlistIndex.partial
        # each group's lists are replaced by its freq as its unit is made: the dict becomes ``freq`` (its key
        # tuples kept, no second dict), and the lists are freed as the units grow, not held beside all of them
        freq: dict[tuple[str, str, bool], int] = groups  # type: ignore[assignment]
        with record_bar(len(groups), "griever units", "unit") as bar:
            for n, (gkey, (comps, pids, tids)) in enumerate(groups.items()):
                anchor, p, inverse = gkey
                c = tuple(dict.fromkeys(comps))
                freq[gkey] = len(c)  # a value replaced, no key added: safe while iterating
                if partial:
                    text = f"{pred_name[p]} {name[anchor]}" if inverse else f"{name[anchor]} {pred_name[p]}"
                    units.append(Unit(f"pt{n}", text, anchor, p, inverse, c, tuple(dict.fromkeys(pids)), tuple(tids)))
                bar.update()
        if not partial:
            for t in triples:
                units.append(Unit(f"ft:{t.id}", t.text, key(t.subject), key(t.predicate), False, (key(t.object),),
                                  (t.passage_id,), (t.id,)))
        normal.clear()
        ent: dict[str, list[str]] = defaultdict(list)
        p_ent: dict[str, list[str]] = {}
        for pid in p_tr:
            keys = list(dict.fromkeys([*p_sub[pid], *p_obj[pid]]))
            p_ent[pid] = keys
            for e in keys:
                ent[e].append(pid)
        data = cls(passages=list(passages), triples=tmap, passage_triples=dict(p_tr), passage_entities=p_ent,
                   passage_subjects={k: list(v) for k, v in p_sub.items()},
                   passage_objects={k: list(v) for k, v in p_obj.items()}, entity_name=name, units=units,
                   unit_kind=unit_kind, partial_freq=freq, entity_passages=dict(ent), pred_name=pred_name)
        if embedder is not None:
            data._embed(embedder, UnitVectors(unit_vectors))
            data._cluster_same_as(same_as)
        return data

    def _embed(self, embedder, unit_vectors: UnitVectors) -> None:
        """Cached encodes of every distinct entity name and predicate (§4.3 matcher inputs; one call shared by
        both unit kinds) and of the unit texts (full triples: the same list, hence the same cache file, as
        the base retrievers' triple index). The two matrices stay apart, each the cache file's memory map (a
        SentenceEmbedder with its cache on): at MuSiQue's full size they are 5.4 GiB of float32, which loaded,
        then stacked into one, were held twice (docs/scale.md)."""
        names = list(dict.fromkeys([*self.entity_name.values(), *self.pred_name.values()]))
        self.text_row = {t: i for i, t in enumerate(names)}
        m1 = self.name_matrix = mapped_matrix(embedder, names, "griever entities+predicates")
        if unit_vectors == UnitVectors.encode:
            self.unit_matrix = mapped_matrix(embedder, [u.text for u in self.units],
                                              f"griever {self.unit_kind.value} units")
            return
        # filled row by row: a list of 2.3M row vectors then stacked would hold them twice
        m2 = np.empty((len(self.units), m1.shape[1]), np.float32)
        full = self.unit_kind == ShortlistIndex.full
        with record_bar(len(self.units), "griever composed unit vectors", "unit") as bar:
            for r, u in enumerate(self.units):
                texts = [self.entity_name[u.anchor], self.pred_name[u.predicate]] \
                    + ([self.entity_name[u.complements[0]]] if full else [])
                m2[r] = m1[[self.text_row[t] for t in texts]].sum(axis=0)
                bar.update()
        m2 /= np.maximum(np.linalg.norm(m2, axis=1, keepdims=True), 1e-12)
        self.unit_matrix = m2

    def _cluster_same_as(self, cfg: SameAsConfig) -> None:
        keys = list(self.entity_name)
        if cfg.max_aliases <= 0 or not keys:
            return
        mat = self.name_matrix
        rows = np.fromiter((self.text_row[self.entity_name[k]] for k in keys), np.int64, len(keys))
        toks = [_content_tokens(self.entity_name[k]) for k in keys]
        by_tok: dict[str, list[int]] = defaultdict(list)
        for i, ts in enumerate(toks):
            for t in ts:
                by_tok[t].append(i)
        out: dict[str, list[str]] = {}

        def keep(i: int, cand: np.ndarray, sims: np.ndarray) -> None:
            """Row i's aliases: candidates at or above the threshold, best first (ties: earlier entity)."""
            above = sims >= cfg.threshold
            cand, sims = cand[above], sims[above]
            if cand.size:
                out[keys[i]] = [keys[j] for j in cand[np.lexsort((cand, -sims))][: cfg.max_aliases]]

        bar = record_bar(len(keys), "griever same_as aliases", "entity")
        if cfg.require_token_overlap:  # only names sharing a token: 485M pairs at full size, not 1.4M² (docs/scale.md)
            for i in range(len(keys)):
                cand = np.asarray(sorted({j for t in toks[i] for j in by_tok[t]} - {i}), dtype=np.int64)
                if cand.size:  # rows gathered from the name matrix: no copy of all entity vectors
                    keep(i, cand, mat[rows[cand]] @ mat[rows[i]])
                bar.update()
        else:
            m = mat[rows]
            block = block_rows(cfg.block, len(keys))
            for start in range(0, len(keys), block):
                for r, row in enumerate(m[start:start + block] @ m.T):
                    cand = np.flatnonzero(row >= cfg.threshold)
                    cand = cand[cand != start + r]
                    keep(start + r, cand, row[cand])
                bar.update(min(block, len(keys) - start))
        bar.close()
        self.same_as_entity = out
        log.info("griever same_as: %d of %d entities have aliases (cos >= %.2f)", len(out), len(keys), cfg.threshold)

    # -- access -----------------------------------------------------------------------------------
    def entity_vectors(self, keys: Sequence[str]) -> np.ndarray:
        return self.name_matrix[[self.text_row[self.entity_name[k]] for k in keys]]

    def predicate_vectors(self, keys: Sequence[str]) -> np.ndarray:
        return self.name_matrix[[self.text_row[self.pred_name[k]] for k in keys]]

    def unit_vectors(self) -> np.ndarray:
        """Embeddings of the unit texts, rows aligned with ``units``."""
        return self.unit_matrix

    def freq(self, anchor: str, predicate: str, inverse: bool) -> int:
        return self.partial_freq.get((anchor, predicate, inverse), 1)

    def stats(self) -> dict[str, int]:
        return {"passages": len(self.passages), "passages_with_triples": len(self.passage_triples),
                "triples": len(self.triples), "entities": len(self.entity_name), "predicates": len(self.pred_name),
                "units": len(self.units), "entities_with_aliases": len(self.same_as_entity),
                "texts_embedded": len(self.text_row) + len(self.units)}
