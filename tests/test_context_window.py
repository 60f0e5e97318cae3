"""Prompts fitted to ``llm.context_window``: the lowest-ranked passages are dropped and counted, and a
prompt that does not fit without passages is refused at start-up. Stand-ins only (no model)."""

from __future__ import annotations

import pytest

from gear_repro.core.triple_reader import read_triples
from gear_repro.llm.context import fit_passages, prompt_budget, prompt_tokens
from gear_repro.prompts import render
from gear_repro.qa import QAReader
from gear_repro.types import Passage, Question
from gear_repro.utils.errors import ConfigError
from tests.helpers.doubles import HashEmbedder, ScriptedLLM

PASSAGES = [Passage(str(i), f"Title {i}", " ".join(["word"] * 40)) for i in range(6)]
Q = Question(id="q", question="Where was the president of France born?", answers=["Amiens"], gold_ids=["0"])


def llm(window: int | None, max_tokens: int | None = None) -> ScriptedLLM:
    return ScriptedLLM({"qa": "Answer: Amiens", "read": 'Facts: ("a", "b", "c")'}, context_window=window,
                       default_params={"max_tokens": max_tokens})


def qa_reader(model, **settings) -> QAReader:
    return QAReader(model, {p.id: p for p in PASSAGES}, **settings)


def size(n: int) -> int:
    return prompt_tokens(llm(None), render("qa", passages=PASSAGES[:n], question=Q.question))


def test_budget_reserves_the_reply() -> None:
    assert prompt_budget(llm(None)) is None
    assert prompt_budget(llm(1000, 128)) == 872 and prompt_budget(llm(1000, 128), {"max_tokens": 10}) == 990
    build = lambda ps: render("qa", passages=list(ps), question=Q.question)  # noqa: E731
    assert fit_passages(llm(None), build, PASSAGES)[1] == 0
    assert fit_passages(llm(size(2) + 50, 50), build, PASSAGES)[1] == 4


def test_qa_reader_drops_the_lowest_ranked_passages() -> None:
    model = llm(size(3) + 16, 16)
    rec = qa_reader(model, top_k=5).answer(Q, [p.id for p in PASSAGES])
    assert rec["qa_passages"] == ["0", "1", "2"] and rec["qa_dropped"] == 2
    assert "Title 2" in model.calls[0]["prompt"] and "Title 3" not in model.calls[0]["prompt"]
    assert rec["answer"] == "Amiens"
    unknown = qa_reader(llm(None), top_k=5).answer(Q, [p.id for p in PASSAGES])
    assert unknown["qa_dropped"] == 0 and len(unknown["qa_passages"]) == 5


def test_qa_reader_refuses_at_start_up() -> None:
    with pytest.raises(ConfigError, match=r"QA prompt without passages .*llm\.context_window \(40\)"):
        qa_reader(llm(40, 16)).check_prompts([Q])
    qa_reader(llm(size(0) + 16, 16)).check_prompts([Q])


def test_k2_reader_drops_the_lowest_ranked_passages() -> None:
    full = prompt_tokens(llm(None), render("reader", docs=PASSAGES[:4], query=Q.question))
    model = llm(full)
    read = read_triples(model, PASSAGES, Q.question, stage="read")
    assert read.passages_dropped == 2 and read.info()["passages_dropped"] == 2
    assert "Title 3" in model.calls[0]["prompt"] and "Title 4" not in model.calls[0]["prompt"]
    assert read.triples == [("a", "b", "c")]


def test_runner_refuses_before_the_first_question(toy_dir, tmp_path, compose) -> None:
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    cfg = validate(compose(["agent=ircot", "retriever=bm25", f"dataset.path={toy_dir}", "dataset.name=toy",
                            "run.progress=false", "qa=true"]))
    res = Resources(cfg, llm=llm(300))  # one MuSiQue demonstration alone takes more
    with pytest.raises(ConfigError, match=r"IRCoT thought prompt .*llm\.context_window"):
        Runner(cfg, tmp_path / "run", resources=res).run()
    assert not (tmp_path / "run" / "predictions.jsonl").exists()
    res = Resources(validate(compose(["expansion=sync", "retriever=bm25", f"dataset.path={toy_dir}",
                                      "dataset.name=toy", "run.progress=false"])), llm=llm(20))
    with pytest.raises(ConfigError, match=r"K\.2 reader \('reader'\) prompt"):
        Runner(res.cfg, tmp_path / "run2", resources=res).run()


def test_dropped_passages_summed_in_metrics() -> None:
    from gear_repro.evaluation.aggregate import aggregate

    preds = [{"id": "a", "gold_ids": ["0"], "rankings": {"final": ["0"]}, "qa_dropped": 2,
              "trace": {"counters": {"context_dropped_passages": 3, "context_fitted_calls": 1}}},
             {"id": "b", "gold_ids": ["0"], "rankings": {"final": ["0"]},
              "trace": {"5": {"counters": {"context_dropped_passages": 9}},
                        "15": {"counters": {"context_dropped_passages": 1}}}}]
    assert aggregate(preds, [5])["agent_stats"] == {"context_dropped_passages": 4, "context_fitted_calls": 1,
                                                    "qa_context_dropped_passages": 2}


def test_single_step_syncge_counts_its_unparsed_reads(toy_dir, tmp_path, compose) -> None:
    """Single-step SyncGE kept its reader's counters one level below where agent_stats and the run's warning read
    them: a run whose every K.2 read failed was plain hybrid, silently."""
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    cfg = validate(compose(["expansion=sync", "retriever=bm25", f"dataset.path={toy_dir}", "dataset.name=toy",
                            "run.progress=false"]))
    # the embedder is a double: the default (the paper's mpnet) is not what `make test` installs
    res = Resources(cfg, llm=ScriptedLLM({"read": ""}), embedder=HashEmbedder())
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    assert metrics["agent_stats"]["parse_failed"] == metrics["n_questions"] > 0
