"""The triplet state of T²RAG's loop (seed 002, Alg. 1): the resolved, searchable and fuzzy sets and their
Step 2.3 update."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gear_repro.methods.t2rag.clues import FUZZY, RESOLVED, SEARCHABLE, Clue, dedupe


@dataclass
class TripletState:
    """The three sets of Alg. 1: resolved, searchable and fuzzy triplets."""

    resolved: list[Clue] = field(default_factory=list)
    searchable: list[Clue] = field(default_factory=list)
    fuzzy: list[Clue] = field(default_factory=list)

    @classmethod
    def from_clues(cls, clues: Sequence[Clue]) -> TripletState:
        """Classify decomposed triplets by their number of placeholders (§4.3 Step 1)."""
        clues = dedupe(clues)
        return cls([c for c in clues if c.kind == RESOLVED], [c for c in clues if c.kind == SEARCHABLE],
                   [c for c in clues if c.kind == FUZZY])

    @property
    def open(self) -> bool:
        """The loop condition of Alg. 1: |searchable ∪ fuzzy| > 0."""
        return bool(self.searchable or self.fuzzy)

    def update(self, new_resolved: Sequence[Clue], new_searchable: Sequence[Clue],
               carry_fuzzy: bool = True, fuzzy_match: str = "placeholder",
               resolved_update: str = "reclassify") -> dict[str, int]:
        """Step 2.3: resolved ∪= new resolved; searchable = new searchable; fuzzy \\= filled-in ones.

        Reply clues are re-classified by their placeholders first. A reply clue that resolves a searchable
        triplet fills no fuzzy one. ``fuzzy_match="placeholder"``: the named placeholders such clues fill are
        substituted into the fuzzy triplets, the others fill fuzzy triplets by :meth:`Clue.fills_slot`, and a
        fuzzy triplet left with one '?' by the substitution becomes searchable (``fuzzy_bound``); ``"words"``:
        :meth:`Clue.fills_in`. With ``carry_fuzzy=False`` (the authors' code, TRAG.py:738-740) the fuzzy set
        is emptied instead; fuzzy-looking reply clues are then dropped too (TRAG.py:1236-1244).
        ``resolved_update="code"`` (TRAG.py:1231 ``current_resolved_clues.extend(clues_result['resolved_clues'])``):
        a clue the reply lists as fully resolved joins the resolved set even with a '?' left (counted
        ``resolved_with_placeholder``); only the newly searchable ones are classified by their '?' (1236-1244).
        Returns counters: reclassified, resolved_with_placeholder, fuzzy_filled, fuzzy_bound, new_fuzzy, dropped_fuzzy.
        """
        counts = {"reclassified": 0, "resolved_with_placeholder": 0, "fuzzy_filled": 0, "fuzzy_bound": 0,
                  "new_fuzzy": 0, "dropped_fuzzy": 0}
        reported = [(c, RESOLVED) for c in new_resolved] + [(c, SEARCHABLE) for c in new_searchable]
        by_kind: dict[str, list[Clue]] = {RESOLVED: [], SEARCHABLE: [], FUZZY: []}
        for c, said in reported:
            kind = RESOLVED if resolved_update == "code" and said == RESOLVED else c.kind
            counts["resolved_with_placeholder"] += kind == RESOLVED and c.kind != RESOLVED
            counts["reclassified"] += kind != said
            by_kind[kind].append(c)
        remaining = list(self.fuzzy)
        if carry_fuzzy:
            by_slot = fuzzy_match == "placeholder"

            def fills(c: Clue, f: Clue, bound: Clue) -> bool:
                return c.fills_slot(f, bound) if by_slot else c.fills_in(f)

            binding: dict[str, str] = {}
            unmatched = []
            for c in by_kind[RESOLVED] + by_kind[SEARCHABLE]:
                hit = next((s for s in self.searchable if fills(c, s, s)), None)
                if hit is None:
                    unmatched.append(c)
                elif by_slot:
                    binding.update(c.bindings(hit))
            pairs = [(f, f.substitute(binding)) for f in remaining]
            for c in unmatched:
                pair = next((fb for fb in pairs if fills(c, *fb)), None)
                if pair is not None:
                    pairs.remove(pair)
                    counts["fuzzy_filled"] += 1
            remaining = []
            for _, b in pairs:
                if b.kind == FUZZY:
                    remaining.append(b)
                else:  # a bound placeholder left it searchable (or resolved)
                    by_kind[b.kind].append(b)
                    counts["fuzzy_bound"] += 1
            known = {f.key for f in remaining}
            new_fuzzy = [c for c in dedupe(by_kind[FUZZY]) if c.key not in known]
            counts["new_fuzzy"] = len(new_fuzzy)
            remaining += new_fuzzy
        else:
            counts["dropped_fuzzy"] = len(remaining) + len(by_kind[FUZZY])
            remaining = []
        self.resolved = dedupe(self.resolved + by_kind[RESOLVED])
        self.searchable = dedupe(by_kind[SEARCHABLE])
        self.fuzzy = remaining
        return counts

    def answer_context(self) -> list[Clue]:
        """Step 3: resolved triplets; plus the remaining searchable ones when the loop hit the cap."""
        return list(self.resolved) if not self.open else dedupe(self.resolved + self.searchable)

    def to_dict(self) -> dict[str, list[list[str]]]:
        return {k: [list(c.parts) for c in getattr(self, k)] for k in (RESOLVED, SEARCHABLE, FUZZY)}

