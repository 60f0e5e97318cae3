"""QA reader (Table 3, App. K.3): prompt, answer extraction, EM/F1 through the runner, the two bounds."""

from __future__ import annotations

import json

import pytest

from gear_repro.qa import QAReader, extract_answer
from gear_repro.utils.io import iter_jsonl, read_json
from tests.helpers.gear_slice import GIST_2, READ, YES, build


@pytest.mark.parametrize("reply, expected", [
    ("G. Stanley Hall", "G. Stanley Hall"),
    ("  Answer: August 25, 1963.\nBecause the passage says so.", "August 25, 1963."),
    ("Question: Who?\nAnswer: **Amiens**", "Amiens"),
    ('"Somme"\n', "Somme"),
    ("\n\nParis\nFrance", "Paris"),
    ("The answer is Paris. Answer:", "The answer is Paris."),
    # a model that answers and goes on with the demonstrations' pattern: its answer, not the invented last pair
    ("Stanley Hall\n\nQuestion: Who was the 44th US president?\nAnswer: Barack Obama", "Stanley Hall"),
    ("question: Who?\nanswer: Amiens\nQuestion: Next?\nAnswer: Paris", "Amiens"),
    ("", ""),
    (None, ""),
])
def test_extract_answer(reply, expected):
    assert extract_answer(reply) == expected


def qa_script(gold_by_question: dict[str, str]):
    """QA replies: the gold answer (echoing the label) for known questions, a wrong one otherwise."""
    def qa(prompt: str) -> str:
        q = prompt.rsplit("Question:", 1)[-1].split("\n", 1)[0].strip()
        return f"Answer: {gold_by_question[q]}" if q in gold_by_question else "Answer: Napoleon"
    return qa


def test_prompt_modes_and_bounds(slice_env):
    _, res, _ = build(slice_env, {"qa": "Answer: G. Stanley Hall"})
    q = res.dataset.questions[0]
    ranked = [p.id for p in res.dataset.passages][:8]
    by_id = res.dataset.passage_by_id
    r = QAReader(res.llm, by_id)
    out = r.answer(q, ranked)
    prompt = res.llm.calls[-1]["prompt"]
    assert out["qa_passages"] == ranked[:5] and out["qa_mode"] == "retrieved"
    assert prompt.count("Wikipedia Title:") == 5 + 5  # in-context example (5) + the top-5 passages
    assert f"Wikipedia Title: {by_id[ranked[0]].title}\n{by_id[ranked[0]].text}" in prompt
    assert by_id[ranked[5]].text not in prompt and prompt.rstrip().endswith(f"Question: {q.question}\n\nAnswer:")
    assert res.llm.calls[-1]["stage"] == "qa"
    assert out["answer"] == "G. Stanley Hall" and out["em"] == 1.0 and out["f1"] == 1.0
    assert out["qa_raw"] == "Answer: G. Stanley Hall"

    gold = QAReader(res.llm, by_id, mode="gold").answer(q, ranked)
    assert gold["qa_passages"] == q.gold_ids and gold["qa_mode"] == "gold"
    assert all(by_id[g].text in res.llm.calls[-1]["prompt"] for g in q.gold_ids)

    none = QAReader(res.llm, by_id, mode="none").answer(q, ranked)
    assert none["qa_passages"] == [] and "Wikipedia Title" not in res.llm.calls[-1]["prompt"]
    assert res.llm.calls[-1]["prompt"].startswith("Given the following question")
    with pytest.raises(Exception, match="qa_reader.mode"):
        QAReader(res.llm, by_id, mode="oracle")


def test_em_f1_through_the_runner(slice_env, tmp_path):
    from gear_repro.pipeline.runner import Runner

    data, _ = slice_env
    qs = [json.loads(x) for x in (data / "questions.jsonl").read_text().splitlines()]
    right = {qs[0]["question"]: qs[0]["answers"][-1], qs[1]["question"]: qs[1]["answers"][0] + " Florida"}
    cfg, res, _ = build(slice_env, {"qa": qa_script(right)},
                        ["agent=single", "expansion=none", "qa=true", "qa_reader.top_k=3"])
    metrics = Runner(cfg, tmp_path / "bm25", resources=res).run()
    preds = [rec for _, rec in iter_jsonl(tmp_path / "bm25" / "predictions.jsonl")]
    assert len(preds) == len(qs) == 3
    assert [p["em"] for p in preds] == [1.0, 0.0, 0.0]
    f1_2 = preds[1]["f1"]
    assert 0 < f1_2 < 1  # partial token credit ("35 Florida" vs "35")
    assert metrics["em"] == pytest.approx(100 / 3) and metrics["f1"] == pytest.approx(100 * (1 + f1_2) / 3)
    assert read_json(tmp_path / "bm25" / "metrics.json")["em"] == pytest.approx(metrics["em"])
    assert all(p["qa_mode"] == "retrieved" and len(p["qa_passages"]) == 3 for p in preds)
    assert all(p["llm_calls"] and p["llm_calls"][-1]["stage"] == "qa" for p in preds)
    assert metrics["tokens_by_stage"]["qa"]["calls"] == 3


@pytest.mark.slow
def test_gear_with_qa_end_to_end(slice_env, tmp_path):
    from gear_repro.pipeline.runner import Runner

    cfg, res, _ = build(slice_env, {"read": READ, "gist": GIST_2, "reason": YES, "qa": "Answer: G. Stanley Hall"},
                        ["qa=true"])
    metrics = Runner(cfg, tmp_path / "gear", resources=res).run()
    assert metrics["recall@15_by_round"] and len(metrics["recall@15_by_round"]) == 4
    assert metrics["rounds_mean"] == 1 and metrics["em"] == pytest.approx(100 / 3)
    assert set(metrics["tokens_by_stage"]) == {"read", "gist", "reason", "qa"}
    pred = next(rec for _, rec in iter_jsonl(tmp_path / "gear" / "predictions.jsonl"))
    assert pred["rounds"][0]["ranking"] == pred["rankings"]["final"]
    assert pred["trace"]["stop"] == "answerable" and pred["qa_mode"] == "retrieved"
    # the report's walk-through and figures work on a real agent record
    from gear_repro.reporting.analyses import method_tables, trace_report
    from gear_repro.reporting.figures import draw_all
    from gear_repro.reporting.runs import find_runs

    runs = find_runs([tmp_path / "gear"])
    text = trace_report(runs, pred["id"])
    assert "== Round 1 ==" in text and "Reasoner: answerable=True" in text and "tripleLink ->" in text
    assert next(t for stem, _, t in method_tables(runs) if stem == "agent_stats").iloc[0]["stop_answerable"] == 3
    names = {p.name for p in draw_all(runs, tmp_path / "fig")}
    assert "fig2_r15_by_round_musique.png" in names and "fig4_tokens_by_round_musique.pdf" in names


def test_table3_qa_reads_the_k5_pass_as_its_preset_says(compose) -> None:
    """configs/experiment/table3_qa.yaml: a k-dependent single-step method answers from the top qa_reader.top_k of its
    k = 5 pass (the smallest k of run.ks holding them, qa/reader.py pass_for_qa), not from its k = 15 pass."""
    from gear_repro.qa.reader import pass_for_qa

    cfg = compose(["experiment=table3_qa", "agent=single"])
    assert cfg.run.matched_k is True and cfg.qa_reader.top_k == 5
    assert pass_for_qa(list(cfg.run.ks), cfg.qa_reader.top_k) == 5
    assert pass_for_qa([10, 15], 5) == 10 and pass_for_qa([3, 4], 5) == 4  # else the largest k
