"""GEAR gist read input (§5.1 Eq. 4): the whole expanded list by default, as the authors' pseudocode
``gist_memory_constructor(expanded_passages)`` (gear-rag.github.io @39fd9c7 pseudocode_examples/gear.py:52);
``agent.gist_k`` caps it and ``agent.gist_empty`` chooses what an empty expansion reads. Stand-ins only."""

from __future__ import annotations

import pytest

from gear_repro.methods.gear.agent import GearAgent
from gear_repro.types import Passage, Question
from tests.helpers.doubles import FixedExpansion, FixedRetriever, ScriptedLLM

PASSAGES = [Passage(str(i), f"Title {i}", f"Text of passage {i}.") for i in range(30)]
Q = Question(id="q", question="Who?", answers=["x"], gold_ids=["0"])


def agent(expanded: list[str], **kw) -> tuple[GearAgent, ScriptedLLM]:
    llm = ScriptedLLM({"reason": "Answerable: Yes\nAnswer: x"})
    return GearAgent(retriever=FixedRetriever([str(i) for i in range(10)]), triple_retriever=None, triple_index=None,
                     llm=llm, passage_by_id={p.id: p for p in PASSAGES}, expansion=FixedExpansion(expanded),
                     max_rounds=1, passage_link=False, **kw), llm


def test_gist_reads_the_whole_expanded_list_by_default() -> None:
    expanded = [str(i) for i in range(10, 25)]
    a, llm = agent(expanded)
    out = a.run(Q, 15)
    assert out.rounds[0]["gist_read"]["ids"] == expanded
    gist_prompt = next(c["prompt"] for c in llm.calls if c["stage"] == "gist")
    assert "Title 24" in gist_prompt
    assert a.describe()["gist_k"] is None


def test_gist_k_caps_the_list() -> None:
    expanded = [str(i) for i in range(10, 25)]
    out = agent(expanded, gist_k=10)[0].run(Q, 15)
    assert out.rounds[0]["gist_read"]["ids"] == expanded[:10]


def test_empty_expansion_skips_the_gist_read_by_default() -> None:
    a, llm = agent([])
    out = a.run(Q, 15)
    assert "gist" not in [s for s, _ in llm.stages()]
    assert out.rounds[0]["gist_read"]["ids"] == [] and out.rounds[0]["gist_read"]["skipped"] == "empty_expansion"
    assert out.trace["counters"]["gist_empty_expansion"] == 1


def test_empty_expansion_falls_back_to_the_fused_list_as_a_switch() -> None:
    a, llm = agent([], gist_empty="fused", gist_k=10)
    out = a.run(Q, 15)
    assert out.rounds[0]["gist_read"]["ids"] == [str(i) for i in range(10)]
    assert ("gist", 1) in llm.stages()


@pytest.mark.parametrize("bad", [{"gist_k": 0}, {"gist_empty": "nope"}])
def test_bad_gist_options_name_the_setting(bad: dict) -> None:
    from gear_repro.utils.errors import ConfigError

    with pytest.raises(ConfigError, match="agent.gist_"):
        agent([], **bad)
