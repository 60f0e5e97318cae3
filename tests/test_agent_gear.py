"""GEAR agent (§5) on a real slice of the MuSiQue sample with MiniLM and a scripted stand-in LLM."""

from __future__ import annotations

import pytest

from gear_repro.core.fusion import rrf
from gear_repro.evaluation.aggregate import aggregate, round_recalls
from gear_repro.pipeline.wiring import passage_retriever, triple_retriever
from tests.helpers.gear_slice import GIST_1, GIST_2, NO, READ, REWRITE, YES, build


def test_config_selects_sync_expansion_and_dataset_rounds(slice_env):
    cfg, res, agent = build(slice_env, {})
    assert cfg.expansion.name == "sync" and cfg.agent.name == "gear"
    assert agent.name == "gear" and agent.k_dependent is False
    assert agent.max_rounds == 4  # MuSiQue's dataset.max_rounds
    assert type(agent.expansion).__name__ == "SyncGE"
    assert build(slice_env, {}, ["agent.max_rounds=2"])[2].max_rounds == 2
    assert type(build(slice_env, {}, ["expansion=none"])[2].expansion).__name__ == "NoExpansion"


def test_docstring_says_the_memory_keeps_repeats_as_the_default_does():
    """The agent's description of Eq. 5 matches its default (the pseudocode's ``extend``, gear.py:11): a repeated
    gist triple is kept, and ``dedupe_memory`` is the switch that drops it."""
    from gear_repro.methods.gear import agent as gear_agent

    assert gear_agent.GearAgentSettings.__dataclass_fields__["dedupe_memory"].default is False
    doc = " ".join(gear_agent.__doc__.split())
    step = doc[doc.index("G(n) = G(n-1)"):doc.index("4. a(n), r(n)")]
    assert "repeats kept" in step and "dedupe_memory=true" in step and "de-duplicated" not in step


@pytest.mark.slow
def test_stops_when_reasoner_says_yes(slice_env):
    script = {"read": READ, ("gist", 1): GIST_1, ("gist", 2): GIST_2, ("reason", 1): NO, ("reason", 2): YES,
              "rewrite": REWRITE}
    _, res, agent = build(slice_env, script)
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    llm = res.llm
    assert out.trace["stop"] == "answerable" and out.trace["n_rounds"] == len(out.rounds) == 2
    assert llm.stages() == [("read", 1), ("gist", 1), ("reason", 1), ("rewrite", 1),
                            ("read", 2), ("gist", 2), ("reason", 2)]
    r1, r2 = out.rounds
    assert r1["query"] == q.question and r2["query"] == REWRITE.split(": ", 1)[1]
    assert r1["rewrite"]["query"] == r2["query"] and r2["rewrite"] is None
    assert r2["reason"]["answerable"] is True and r2["reason"]["reason"] == "G. Stanley Hall"
    assert out.trace["answer"] == "G. Stanley Hall"
    # reads see the original question; base retrieval used q(2)
    reads = [c for c in llm.calls if c["stage"] in ("read", "gist")]
    assert all(f"Question: {q.question}" in c["prompt"] for c in reads)
    assert r2["base"] == passage_retriever(res).retrieve(r2["query"], 10).ids
    # gist memory: plain reader in round 1, memory in round 2; the repeat (normalised) is kept and counted, as
    # Eq. 5's G(n-1) ∘ TG_q(n) and the pseudocode's extend (gear.py:11)
    gist2 = [c for c in llm.calls if c["stage"] == "gist"][1]["prompt"]
    assert "preliminary facts" in gist2 and '"Journal of Psychotherapy Integration"' in gist2.split("Question:")[-1]
    assert len(r1["memory"]) == 1 and len(r2["memory"]) == 3 and r2["gist_new"] == [
        ["journal of psychotherapy integration", "Published by", "American Psychological Association"],
        ["American Psychological Association", "first president", "G. Stanley Hall"]]
    assert out.trace["counters"]["memory_duplicates"] == 1
    # proximal triples linked to T, expanded passages recorded
    assert r1["proximal"] and all(x["triple"] for x in r1["linked"])
    assert r1["expanded"] and r1["gist_read"]["ids"] == r1["expanded"]


@pytest.mark.slow
def test_memory_keeps_repeats_by_default_and_each_adds_its_passage_link_list(slice_env):
    """Eq. 5 and the pseudocode (gear.py:11 ``extend``) keep a repeated gist triple, so its passageLink list enters
    the final RRF (Eq. 9) once per copy; ``agent.dedupe_memory=true`` (the earlier default) drops it."""
    _, res, agent = build(slice_env, STOP_AT_2)
    assert agent.dedupe_memory is False
    q = res.dataset.questions[0]
    kept = agent.run(q, 15)
    _, res_d, dedupe = build(slice_env, STOP_AT_2, ["agent.dedupe_memory=true"])
    dropped = dedupe.run(q, 15)
    assert kept.trace["counters"]["memory_duplicates"] == dropped.trace["counters"]["memory_duplicates"] == 1
    assert [len(r["memory"]) for r in kept.rounds] == [1, 3] and [len(r["memory"]) for r in dropped.rounds] == [1, 2]
    # Eq. 9 recomputed: the final ranking is the RRF with one passageLink list per copy in G
    memory = [tuple(t) for t in kept.rounds[-1]["memory"]]
    links = agent.passage_link_lists(memory, {})
    assert len(links) == 3 and links[0] == links[1]  # the repeat links to the same passages
    rounds = [r["fused"] for r in kept.rounds]
    assert kept.ranking.ids == rrf([*links, *rounds], k_rrf=agent.k_rrf).ids
    assert dropped.ranking.ids == rrf([links[0], links[2], *[r["fused"] for r in dropped.rounds]],
                                      k_rrf=agent.k_rrf).ids
    # the repeated triple's passages gain weight: 8, 4 and 3 pass 7 and 31
    assert kept.ranking.ids[:12] == ["6", "10", "18", "11", "15", "0", "8", "4", "3", "7", "31", "50"]
    assert dropped.ranking.ids[:12] == ["6", "10", "18", "11", "15", "0", "7", "31", "8", "50", "4", "3"]


def _spy_search(agent) -> list[str]:
    """Record the query every beam search of the agent's expansion is scored against."""
    queries: list[str] = []
    search = agent.expansion.search

    def spy(query, initial):
        queries.append(query)
        return search(query, initial)

    agent.expansion.search = spy
    return queries


STOP_AT_2 = {"read": READ, ("gist", 1): GIST_1, ("gist", 2): GIST_2, ("reason", 1): NO, ("reason", 2): YES,
             "rewrite": REWRITE}


@pytest.mark.slow
def test_later_rounds_follow_the_pseudocode_by_default(slice_env):
    """From round 2 the SyncGE reader sees G(n-1), beams are scored against q, the gist read takes
    the expanded passages (gear-rag.github.io pseudocode_examples/gear.py)."""
    _, res, agent = build(slice_env, STOP_AT_2)
    assert (agent.reader_memory, agent.query_for_beam, agent.gist_docs) == (True, "original", "expanded")
    queries = _spy_search(agent)
    q = res.dataset.questions[0]
    before = {k: v for k, v in vars(agent.expansion).items() if k != "_scorer"}
    out = agent.run(q, 15)
    assert {k: v for k, v in vars(agent.expansion).items() if k != "_scorer"} == before  # no side channels
    r1, r2 = out.rounds
    read1, read2 = [c["prompt"] for c in res.llm.calls if c["stage"] == "read"]
    assert "preliminary facts" not in read1
    assert "preliminary facts" in read2 and '"Journal of Psychotherapy Integration"' in read2.split("Question:")[-1]
    assert r2["expansion"]["read"]["prompt"] == "reader_gist" and r1["expansion"]["read"]["prompt"] == "reader"
    assert queries == [q.question, q.question] and r2["query"] != q.question
    assert all(r["expanded"] and r["gist_read"]["ids"] == r["expanded"] for r in (r1, r2))
    # a round whose expanded list is not the fused list's prefix tells the two gist inputs apart (under ES's standard
    # analysis, the default, round 1's is the prefix; under the earlier stemmed analysis both differed)
    assert r2["gist_read"]["ids"] == ["6", "10", "18"] and r2["fused"][:3] == ["10", "6", "18"]


@pytest.mark.slow
def test_earlier_round_readings_stay_reachable(slice_env):
    overrides = ["agent.reader_memory=false", "agent.query_for_beam=rewritten", "agent.gist_docs=fused",
                 "agent.gist_k=10", "agent.gist_empty=fused"]
    _, res, agent = build(slice_env, STOP_AT_2, overrides)
    queries = _spy_search(agent)
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    r1, r2 = out.rounds
    reads = [c["prompt"] for c in res.llm.calls if c["stage"] == "read"]
    assert len(reads) == 2 and not any("preliminary facts" in p for p in reads)
    assert queries == [q.question, r2["query"]] and r2["query"] != q.question
    assert [r["gist_read"]["ids"] for r in (r1, r2)] == [r1["fused"][:10], r2["fused"][:10]]


@pytest.mark.slow
def test_never_exceeds_max_rounds(slice_env):
    script = {"read": READ, "gist": GIST_1, "reason": NO, "rewrite": REWRITE}
    for rounds in (1, 2, 4):
        _, res, agent = build(slice_env, script, [f"agent.max_rounds={rounds}"])
        out = agent.run(res.dataset.questions[1], 15)
        stages = res.llm.stages()
        assert len(out.rounds) == rounds and out.trace["stop"] == "max_rounds"
        assert sum(s == "rewrite" for s, _ in stages) == rounds - 1
        assert sum(s == "reason" for s, _ in stages) == rounds
        assert max(r for _, r in stages) == rounds


def test_malformed_reason_and_rewrite_are_counted(slice_env):
    script = {"read": "I cannot find any facts.", "gist": "nothing useful here",
              "reason": "Hmm, hard to say.", "rewrite": "   "}
    # no proximal triples -> empty expansion; gist_empty=fused still reads (and fails to parse) the fused list
    _, res, agent = build(slice_env, script, ["agent.max_rounds=3", "agent.gist_empty=fused"])
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    c = out.trace["counters"]
    assert len(out.rounds) == 3 and out.trace["stop"] == "max_rounds"
    assert c["reason_unparsed"] == 3 and c["rewrite_fallback"] == 2 and c["gist_parse_failed"] == 3
    assert c["rewrite_repeated"] == 2  # fell back to q each time
    assert all(r["query"] == q.question for r in out.rounds)
    assert out.rounds[0]["reason"] == {"answerable": False, "parsed": False, "reason": "Hmm, hard to say.",
                                       "raw": "Hmm, hard to say."}
    assert out.rounds[0]["rewrite"]["raw"] == "   " and out.rounds[0]["rewrite"]["fallback"]
    assert out.rounds[0]["memory"] == [] and out.trace["passage_link"] == []


def test_a_prose_rewrite_is_the_next_query_but_counted(slice_env):
    script = {"read": "I cannot find any facts.", "gist": "nothing useful here", "reason": "Answerable: No",
              "rewrite": "I cannot rewrite this question."}
    _, res, agent = build(slice_env, script, ["agent.max_rounds=2"])
    out = agent.run(res.dataset.questions[0], 15)
    assert out.rounds[1]["query"] == "I cannot rewrite this question."  # the pseudocode's loop takes it
    assert out.trace["counters"]["rewrite_not_question"] == 1 and "rewrite_fallback" not in out.trace["counters"]
    assert len(out.ranking) >= 10  # still the base lists, fused


@pytest.mark.slow
def test_round_rankings_and_carry_forward(slice_env):
    script = {"read": READ, ("gist", 1): GIST_1, ("gist", 2): GIST_2, ("reason", 1): NO, ("reason", 2): YES,
              "rewrite": REWRITE}
    _, res, agent = build(slice_env, script)
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    assert all(r["ranking"] for r in out.rounds)
    assert out.rounds[-1]["ranking"] == out.ranking.ids[:100]
    # round 1's ranking = what GEAR returns when it stops after one round
    one = build(slice_env, script, ["agent.max_rounds=1"])[2].run(q, 15)
    assert one.ranking.ids[:100] == out.rounds[0]["ranking"]
    pred = {"id": q.id, "gold_ids": q.gold_ids, "rankings": {"final": out.ranking.ids}, "rounds": out.rounds}
    vals = round_recalls(pred, 15, 4)
    assert len(vals) == 4 and vals[2] == vals[3] == vals[1]  # stopped after round 2: carried forward
    m = aggregate([pred], [5, 10, 15], max_rounds=4)
    assert m["recall@15_by_round"] == vals and m["rounds_mean"] == 2
    errored = {"id": "x", "gold_ids": q.gold_ids, "rankings": {"final": []}, "error": "LLMCallError: down"}
    assert aggregate([pred, errored], [5, 10, 15], max_rounds=4)["rounds_mean"] == 2  # not (2 + 1) / 2: an errored record has no rounds


@pytest.mark.slow
def test_final_rrf_includes_passage_link_lists(slice_env):
    script = {"read": READ, "gist": GIST_2, "reason": YES}
    _, res, agent = build(slice_env, script)
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    (r1,) = out.rounds
    memory = [tuple(t) for t in r1["memory"]]
    assert len(memory) == 2
    links = []
    for t in memory:
        text = " ".join(t)
        via_t = list(dict.fromkeys(res.triple_index.passage_of[x] for x in triple_retriever(res).retrieve(text, 10).ids))
        links.append(rrf([passage_retriever(res).retrieve(text, 10), via_t]).ids)
    assert [x["ids"] for x in out.trace["passage_link"]] == [ids[:20] for ids in links]
    expected = rrf([*links, r1["fused"]])
    assert out.ranking.ids == expected.ids
    only_linked = set().union(*map(set, links)) - set(r1["fused"])
    assert only_linked and only_linked <= set(out.ranking.ids)
    # without passageLink the final list is the RRF of the round lists only
    _, res2, agent2 = build(slice_env, script, ["agent.passage_link=false"])
    assert agent2.run(q, 15).ranking.ids == rrf([r1["fused"]]).ids


def test_bad_options_fail_with_the_setting_name(slice_env):
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(Exception, match="query_for_beam"):  # the schema rejects it at composition
        build(slice_env, {}, ["agent.query_for_beam=sometimes"])
    with pytest.raises(ConfigError, match="agent.max_rounds"):  # the wiring raises the constructor's own error
        build(slice_env, {}, ["agent.max_rounds=0"])


@pytest.mark.slow
def test_original_query_options(slice_env):
    script = {"read": READ, "gist": GIST_1, "reason": NO, "rewrite": REWRITE}
    _, res, agent = build(slice_env, script, ["agent.max_rounds=2", "agent.query_for_base=original"])
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    assert out.rounds[1]["query"] != q.question
    assert out.rounds[1]["base"] == out.rounds[0]["base"] == passage_retriever(res).retrieve(q.question, 10).ids


@pytest.mark.slow
def test_gist_first_round_reuse_saves_a_call(slice_env):
    script = {"read": READ, "gist": GIST_1, "reason": YES}
    _, res, agent = build(slice_env, script, ["agent.gist_first_round=reuse"])
    out = agent.run(res.dataset.questions[0], 15)
    assert res.llm.stages() == [("read", 1), ("reason", 1)]
    assert out.rounds[0]["memory"] == [list(t) for t in out.rounds[0]["proximal"]]
    assert out.rounds[0]["gist_read"]["reused"] == "proximal"
