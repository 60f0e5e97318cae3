"""IRCoT / HippoRAG w/ IRCoT: stop rule, raw (or per-step normalised) max merge, round limit, prompt, demonstrations,
ledger stages and rounds, config composition and an end-to-end run through the runner and the report."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gear_repro.methods.ircot import (
    ANSWER_MARK,
    IRCoTAgent,
    first_sentence,
    load_demos,
    merge_step,
    merged_ranking,
)
from gear_repro.types import Passage, Question, Ranking
from gear_repro.utils.errors import ConfigError
from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS
from tests.helpers.doubles import ScriptedLLM

Q = Question(**TOY_QUESTIONS[0])


class QueryRetriever:
    """Stand-in base retriever: a fixed ranking per query (BM25-like raw scores)."""

    def __init__(self, table: dict[str, Ranking]):
        self.table = table
        self.queries: list[str] = []

    def retrieve(self, query: str, k: int) -> Ranking:
        self.queries.append(query)
        return self.table[query].top(k)


TABLE = {
    Q.question: Ranking(["2", "0", "5"], [8.0, 4.0, 2.0]),
    "The president of France is Emmanuel Macron.": Ranking(["3", "2", "1"], [20.0, 15.0, 5.0]),
    "Emmanuel Macron was born in Amiens.": Ranking(["4", "3"], [3.0, 3.0]),
}
THOUGHTS = ["The president of France is Emmanuel Macron.", "Emmanuel Macron was born in Amiens.",
            f"{ANSWER_MARK} Amiens."]


def resources(script: dict, questions: list[Question] | None = None):
    passages = [Passage(str(i), t, x) for i, (t, x) in enumerate(TOY_PASSAGES)]
    ds = SimpleNamespace(passages=passages, questions=questions or [Q], passage_by_id={p.id: p for p in passages})
    return SimpleNamespace(dataset=ds, llm=ScriptedLLM(script), passage_retriever=QueryRetriever(TABLE))


def ircot(res, **settings) -> IRCoTAgent:
    """IRCoT over the base retriever stand-in (what the wiring hands over for ``retriever=base``)."""
    return IRCoTAgent(res.llm, res.dataset.passage_by_id, [q.id for q in res.dataset.questions],
                      base_retriever=res.passage_retriever, **settings)


@pytest.mark.parametrize(("mode", "ids", "scores"), [
    # raw (reference, ircot_hipporag.py:242-251): max raw score; ties would keep first-seen order
    ("raw", ["d", "b", "a", "e", "c"], [20.0, 15.0, 8.0, 5.0, 2.0]),
    # normalised: a 1.0, d 1.0 (tie: a first seen), b max(0.5, 0.75), e .25, c .25 (tie: c first seen)
    ("normalised", ["a", "d", "b", "c", "e"], [1.0, 1.0, 0.75, 0.25, 0.25]),
])
def test_merge_keeps_each_passages_max(mode: str, ids: list[str], scores: list[float]) -> None:
    merged: dict[str, float] = {}
    merge_step(merged, Ranking(["a", "b", "c"], [8.0, 4.0, 2.0]), mode)
    merge_step(merged, Ranking(["d", "b", "e"], [20.0, 15.0, 5.0]), mode)
    r = merged_ranking(merged)
    assert r.ids == ids and r.scores == pytest.approx(scores)


def test_raw_merge_is_the_default_and_ties_keep_first_seen_order() -> None:
    merged: dict[str, float] = {}
    merge_step(merged, Ranking(["a", "b"], [3.0, 2.0]))
    merge_step(merged, Ranking(["c", "d"], [3.0, 2.0]))
    assert merged_ranking(merged).ids == ["a", "c", "b", "d"]
    assert ircot(resources({})).describe()["merge"] == "raw"


def test_stops_at_the_answer_sentence() -> None:
    res = resources({("cot", 1): THOUGHTS[0], ("cot", 2): THOUGHTS[2]})
    out = ircot(res, max_rounds=4, top_k=3).run(Q, 15)
    assert out.trace["stop"] == "answerable" and out.trace["answer"] == "Amiens."
    assert res.llm.stages() == [("cot", 1), ("cot", 2)]
    assert res.passage_retriever.queries == [Q.question, THOUGHTS[0]]  # no retrieval with the answer thought
    assert [r["round"] for r in out.rounds] == [1, 2]
    assert out.rounds[0]["ranking"] == ["2", "0", "5"]
    # raw max merge: 3 (20), 2 (max 8, 15), 1 (5), 0 (4), 5 (2)
    assert out.rounds[1]["ranking"] == out.ranking.ids == ["3", "2", "1", "0", "5"]
    assert out.rounds[1]["thought"] == THOUGHTS[2] and out.trace["thoughts"] == [THOUGHTS[0], THOUGHTS[2]]


def test_round_limit_and_prompt_contents() -> None:
    res = resources({("cot", 1): THOUGHTS[0], ("cot", 2): THOUGHTS[1], ("cot", 3): "never used"})
    agent = ircot(res, max_rounds=3, top_k=2)
    out = agent.run(Q, 15)
    assert out.trace["stop"] == "max_rounds" and len(out.rounds) == 3
    assert res.llm.stages() == [("cot", 1), ("cot", 2)]  # max_rounds retrievals, max_rounds - 1 thoughts
    assert out.rounds[2]["thought"] is None
    assert [len(r["ranking"]) for r in out.rounds] == [2, 3, 4]  # nested, growing per round
    assert out.ranking.ids[:2] == ["3", "2"]  # raw max: 20, 15
    prompt = res.llm.calls[1]["prompt"]  # system turn (instruction + the first demonstration), then the user turn
    system, user = prompt.split("Question: When was Neville A. Stanton's employer founded?", 1)
    assert system.startswith("You serve as an intelligent assistant") and "So the answer is:" in system
    # the second thought sees the top-2 merged passages and the first thought after "Thought:"
    assert "Wikipedia Title: France\n" in user and "Wikipedia Title: Emmanuel Macron\n" in user
    assert user.rstrip().endswith(f"Question: {Q.question}\nThought:{THOUGHTS[0]}")
    assert ircot(res, max_rounds=1).run(Q, 15).trace["n_rounds"] == 1  # one round = no LLM call
    assert len(res.llm.calls) == 2


def test_demonstrations_as_published_and_evaluated_questions_skipped() -> None:
    demos = load_demos("musique")
    assert len(demos) == 20 and demos[0].qid == "2hop__292995_8796"
    assert demos[0].answer.endswith("So the answer is: 1862.")
    assert len(load_demos("2wikimultihopqa")) == 20 and len(load_demos("hotpotqa")) >= 20
    first = Question(id=demos[0].qid, question="?", answers=[], gold_ids=[])
    agent = ircot(resources({}, [Q, first]), num_demo=2)
    assert [d.qid for d in agent.demos] == [demos[1].qid, demos[2].qid] and agent.demos_skipped == 1
    assert len(ircot(resources({}), num_demo=None).demos) == 20


@pytest.mark.parametrize("setting", [{}, {"empty_thought": "stop"}])
def test_an_empty_thought_retrieves_with_nothing_as_the_reference(setting: dict) -> None:
    # ircot_hipporag.py:232-251 / baselines/ircot.py:263-279: only "So the answer is:" ends the loop early
    table = {**TABLE, "": Ranking(["5", "1"], [0.5, 0.25])}
    res = resources({("cot", 1): "", ("cot", 2): THOUGHTS[1]})
    res.passage_retriever.table = table
    out = ircot(res, max_rounds=3, top_k=3, **setting).run(Q, 15)
    assert out.trace["counters"]["empty_thoughts"] == 1
    if setting:
        assert out.trace["stop"] == "empty_thought" and res.passage_retriever.queries == [Q.question]
        return
    assert out.trace["stop"] == "max_rounds" and res.passage_retriever.queries == [Q.question, "", THOUGHTS[1]]
    assert out.trace["thoughts"] == ["", THOUGHTS[1]]
    assert res.llm.calls[1]["prompt"].rstrip().endswith("Thought:")  # "Thought:" + " ".join(["", ...]) as the reference
    assert out.ranking.ids == ["2", "0", "4", "3", "5", "1"]


def test_hipporag_ircot_shows_passages_without_the_title_prefix_on_musique(compose) -> None:
    cfg = compose(["agent=hipporag_ircot"])
    assert cfg.agent.paper_name == "MuSiQue" and cfg.agent.title_prefixes.MuSiQue == ""
    res = resources({("cot", 1): THOUGHTS[2]})
    bare = IRCoTAgent(res.llm, res.dataset.passage_by_id, [Q.id], base_retriever=res.passage_retriever,
                      title_prefixes=dict(cfg.agent.title_prefixes), paper_name="MuSiQue")
    bare.run(Q, 15)
    assert "\nFrance\nFrance is a country" in res.llm.calls[0]["prompt"]
    assert "Wikipedia Title: France" not in res.llm.calls[0]["prompt"].split("Question: When was Neville")[1]
    assert compose(["agent=ircot"]).agent.title_prefixes.MuSiQue == "Wikipedia Title: "
    with pytest.raises(ConfigError, match="agent.title_prefixes has no entry for the dataset 'Other'"):
        IRCoTAgent(res.llm, {}, [], base_retriever=res.passage_retriever, title_prefixes={"MuSiQue": ""},
                   paper_name="Other")


def test_first_sentence_option() -> None:
    assert first_sentence("Macron was born in 1977. He is French.") == "Macron was born in 1977."
    res = resources({("cot", 1): THOUGHTS[0] + " So the answer is: Paris.", ("cot", 2): THOUGHTS[2]})
    out = ircot(res, max_rounds=4, top_k=3, thought="first_sentence").run(Q, 15)
    assert out.trace["thoughts"][0] == THOUGHTS[0] and len(out.rounds) == 2


def test_config_composition(compose) -> None:
    cfg = compose(["agent=hipporag_ircot"])
    assert cfg.agent.retriever == "hipporag" and cfg.agent.max_rounds == 4 and cfg.agent.demos == "musique"
    assert cfg.hipporag.damping == 0.5 and cfg.hipporag.version == "v1"
    assert compose(["agent=hipporag_ircot", "dataset=hotpotqa_sample"]).agent.demos == "hotpotqa"
    assert compose(["agent=ircot", "dataset=2wiki_sample"]).agent.max_rounds == 2
    assert "hipporag" not in compose(["agent=ircot"])
    # the reference IRCoT index's ES standard analyzer is every run's default now: the presets need no override
    for args in (["experiment=table2_baselines", "agent=ircot"], ["experiment=table3_baselines", "agent=ircot"],
                 ["agent=ircot"], ["agent=gear"], ["retriever=bm25"]):
        bm25 = compose(args).backend.bm25
        assert (bm25.analyzer, bm25.stopwords, bm25.stemmer) == (None, None, None), args
    assert compose(["backend=elasticsearch"]).backend.bm25.analyzer == "standard"
    assert compose(["agent=hipporag", "hipporag.version=v2"]).hipporag.version == "v2"


def test_ircot_bm25_end_to_end_through_runner_and_report(toy_dir, tmp_path, compose) -> None:
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner
    from gear_repro.reporting.runs import find_runs

    cfg = validate(compose(["agent=ircot", "retriever=bm25", "embedder=minilm", f"dataset.path={toy_dir}",
                            "dataset.name=toy", "run.progress=false", "agent.top_k=2", "qa=true"]))
    llm = ScriptedLLM({("cot", 1): "Paris is the capital of France.", "cot": f"{ANSWER_MARK} x", "qa": "Answer: Amiens"})
    res = Resources(cfg, llm=llm, embedder=None)  # IRCoT (BM25) must not need vectors
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    assert metrics["n_errors"] == 0 and len(metrics["recall@15_by_round"]) == 4
    assert metrics["em"] == pytest.approx(100 / 3)  # q1's answer is Amiens
    run = find_runs([tmp_path / "run"])[0]
    assert run.method_label == "IRCoT (BM25; top_k 2)"  # 2 passages a step (paper: 10); the default analysis is ES standard
    stages = {(c["stage"], c["round"]) for c in res.llm.ledger.records}
    assert ("cot", 1) in stages and ("cot", 2) in stages and ("qa", 0) in stages
    # IRCoT's own report hooks: its statistics table and its walk-through (reporting/ holds neither)
    from gear_repro.reporting.analyses import method_tables, trace_report

    stats = next(t for stem, _, t in method_tables([run]) if stem == "ircot_stats").iloc[0]
    assert stats["n_questions"] == 3 and stats["stop_answerable"] == 3 and stats["cot_calls"] == 6
    assert stats["rounds_mean"] == 2 and stats["method"] == run.method
    text = trace_report([run], "q1")
    assert "== Round 1 ==" in text and "3. Thought: Paris is the capital of France." in text
    assert "ranking had IRCoT stopped here: R@5" in text and "stop: answerable   rounds: 2" in text


# -- context window and demonstration budget -------------------------------------------------------
def test_prompt_fits_the_context_window_by_dropping_the_lowest_ranked_passages() -> None:
    from gear_repro.llm.context import prompt_tokens

    res = resources({("cot", 1): THOUGHTS[0], ("cot", 2): THOUGHTS[1]})
    agent = ircot(res, max_rounds=2, top_k=3)
    by_id = res.dataset.passage_by_id
    two = prompt_tokens(res.llm, agent.messages(Q.question, [by_id["2"], by_id["0"]], [], agent.demos))
    res.llm.context_window = two  # room for the top 2 of the 3 retrieved passages (no max_tokens reserved)
    out = agent.run(Q, 15)
    prompt = res.llm.calls[0]["prompt"]
    assert "Wikipedia Title: France\n" in prompt and "Wikipedia Title: Paris\n" in prompt
    assert "Wikipedia Title: Somme\n" not in prompt  # passage 5, ranked third, dropped
    assert out.rounds[0]["dropped_passages"] == 1 and out.trace["counters"]["context_dropped_passages"] == 1
    res.llm.context_window = None  # unknown: nothing dropped
    assert ircot(res, max_rounds=2, top_k=3).run(Q, 15).rounds[0]["dropped_passages"] == 0


def test_start_up_refuses_a_window_smaller_than_the_prompt_without_passages() -> None:
    res = resources({})
    res.llm.context_window = 200  # the instruction and one MuSiQue demonstration alone take ~800 tokens
    with pytest.raises(ConfigError, match=r"IRCoT thought prompt without passages .* llm\.context_window \(200\)"):
        ircot(res).check_prompts(res.dataset.questions)
    ircot(res, num_demo=0).check_prompts(res.dataset.questions)  # the instruction alone fits
    res.llm.context_window = None
    ircot(res).check_prompts(res.dataset.questions)


def test_demonstrations_packed_up_to_a_token_budget() -> None:
    from gear_repro.llm.context import prompt_tokens

    res = resources({"cot": THOUGHTS[0]})
    by_id = res.dataset.passage_by_id
    assert len(ircot(res).pack_demos(Q.question, [], [])) == 1  # demo_budget null: num_demo demonstrations
    assert ircot(res, demo_budget=1).pack_demos(Q.question, [], []) == []
    agent = ircot(res, num_demo=None, demo_budget=3000)
    packed = agent.pack_demos(Q.question, [by_id["0"]], [])
    assert 0 < len(packed) < 20 and packed == [d for d in agent.demos if d in packed]  # file order
    assert prompt_tokens(res.llm, agent.messages(Q.question, [by_id["0"]], [], packed)) < 3000
    agent.run(Q, 15)
    assert res.llm.calls[0]["prompt"].count("\nThought: ") == len(agent.pack_demos(Q.question, [by_id[p] for p in "205"], []))
