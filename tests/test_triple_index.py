"""The entity map of core/triple_graph.TripleIndex (GEAR §4.2 get_neighbours) built from the records: every entity's
rows are those of the triples naming it as subject or object, ascending, under the hub cap's two policies, with the
counters; stored as one array of rows (EntityRows), not an array per entity."""

from __future__ import annotations

import pytest

from gear_repro.core.triple_graph import EntityRows, TripleIndex, normalize_entity
from gear_repro.data.dataset import load_dataset
from gear_repro.types import Triple


def _reference(triples: list[Triple], link_empty: bool) -> dict[str, list[int]]:
    ent: dict[str, list[int]] = {}
    for r, t in enumerate(triples):
        for e in dict.fromkeys((normalize_entity(t.subject), normalize_entity(t.object))):
            if e or link_empty:
                ent.setdefault(e, []).append(r)
    return ent


@pytest.fixture(scope="module")
def triples(sample_dir) -> list[Triple]:
    extra = [Triple("x1", "", "p", "", "0"), Triple("x2", "Same", "p", " same ", "0"), Triple("x3", "", "p", "Z", "0")]
    return list(load_dataset(sample_dir).triples) + extra


@pytest.mark.parametrize("cap, policy, link_empty", [(None, "truncate", False), (3, "truncate", False),
                                                     (3, "drop", False), (5, "truncate", True)])
def test_entity_rows_are_the_records(triples, cap, policy, link_empty):
    index = TripleIndex(None, triples, max_degree=cap, hub_policy=policy, link_empty_entities=link_empty)
    ref = _reference(triples, link_empty)
    rows = index._entity_rows
    assert isinstance(rows, EntityRows) and list(rows) == list(ref)  # first-seen order, as a dict of lists had it
    over = {e: len(r) for e, r in ref.items() if cap and len(r) > cap}
    for e, want in ref.items():
        if e in over:
            want = want[:cap] if policy == "truncate" else []
        assert rows[e].tolist() == want, e
    assert index._capped == set(over)
    assert index.stats["hub_entities"] == len(over)
    assert index.stats["hub_links_removed"] == sum(n - (cap if policy == "truncate" else 0) for n in over.values())
    assert index.stats["entities"] == len(ref)
    assert index.stats["empty_entity_slots"] == (0 if link_empty else 2)  # x1 once (s = o = ""), x3's subject
    assert index.entity_degree("SAME") == 1 and index.entity_degree("no such entity") == 0
    assert rows.degrees().tolist() == [len(rows[e]) for e in rows]
    for least in (1, 5, 40):  # the hubs (graph.hub_slices_min_degree), found from the offsets, in the map's order
        assert {e: r.tolist() for e, r in rows.at_least(least).items()} == {e: rows[e].tolist() for e in rows
                                                                            if len(rows[e]) >= least}
        assert list(rows.at_least(least)) == [e for e in rows if len(rows[e]) >= least]
