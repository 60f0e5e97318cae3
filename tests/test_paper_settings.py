"""The papers' settings per table (gear_repro/resources/paper_settings.csv) and HippoRAG's Table 2 numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from gear_repro.data.identity import known_sets
from gear_repro.reporting import paper as paper_mod
from gear_repro.reporting.paper import (
    AVERAGE,
    UNSTATED,
    check_papers,
    paper_results,
    paper_setting,
    paper_setting_rows,
    paper_value,
)
from gear_repro.utils.errors import ConfigError


def test_every_paper_table_has_its_settings() -> None:
    """Each (paper, table, dataset) with numbers has a settings row, and no settings row lacks numbers."""
    df = paper_results()
    cells = set(zip(df.paper, df.table, df.dataset, strict=True)) - {("T2RAG", "Table 1", AVERAGE)}
    assert cells == set(paper_setting_rows())
    per_paper = {p: sum(1 for k in cells if k[0] == p) for p in ("GEAR", "GRIEVER", "T2RAG", "HippoRAG")}
    # GEAR: 8 tables over three datasets + Tables 9, 12 and Figure 2 on MuSiQue; T²RAG: 6 + 3 datasets
    assert per_paper == {"GEAR": 27, "GRIEVER": 12, "T2RAG": 9, "HippoRAG": 3} and len(cells) == 51


def test_gear_main_tables_are_irCoT_full_corpora_not_samples() -> None:
    """GEAR §6 / App. A Table 5: IRCoT's 500 test questions over the full corpora, chunked; HippoRAG's HotpotQA."""
    m = paper_setting("GEAR", "Table 2", "MuSiQue")
    assert m is not None
    assert (m.questions_count, m.corpus_documents, m.corpus_passages, m.corpus_unit) == (500, 139416, 148793,
                                                                                         "chunks")
    assert (m.llm, m.embedder, m.engine, m.analyzer) == ("gpt-4o-mini-2024-07-18", "all-mpnet-base-v2",
                                                         "Elasticsearch", UNSTATED)
    assert m.known_datasets == ("gear_musique_chunks", "ircot_musique") and "App. A" in m.citation
    w = paper_setting("GEAR", "Table 3", "2Wiki")
    assert w is not None and (w.questions_count, w.corpus_documents, w.corpus_passages) == (500, 430225, 490454)
    assert w.answer_script == UNSTATED
    h = paper_setting("GEAR", "Table 2", "HotpotQA")
    assert h is not None and (h.questions_count, h.corpus_documents, h.corpus_passages) == (1000, 9221, 10293)
    assert paper_setting("GEAR", "Table 8", "MuSiQue").llm == "gpt-3.5-turbo-1106"  # type: ignore[union-attr]
    assert paper_setting("GEAR", "Table 10", "2Wiki").llm_options == (  # type: ignore[union-attr]
        "gpt-4o-mini-2024-07-18", "Llama-3.1-8B", "Qwen-2.5-8B")
    assert paper_setting("GEAR", "Table 9", "2Wiki") is None  # Table 9 is MuSiQue only


def test_unstated_counts_are_none_never_guessed() -> None:
    g = paper_setting("GRIEVER", "Table 1", "MuSiQue")
    assert g is not None and (g.questions_count, g.corpus_passages, g.questions_split) == (None, None, UNSTATED)
    assert g.known_datasets[0] == "ircot_musique" and "without counts" in g.note


def test_t2rag_and_hipporag_samples() -> None:
    t = paper_setting("T2RAG", "Table 1", "MuSiQue")
    assert t is not None and (t.questions_count, t.corpus_passages, t.embedder) == (1000, 11656, "NV-Embed-v2")
    assert t.llm_options == ("Gemini-2.5-flash", "GPT-4o-mini") and t.known_datasets == ("hipporag2_musique",)
    assert paper_setting("T2RAG", "Table 1", "HotpotQA").corpus_passages == 9811  # type: ignore[union-attr]
    h = paper_setting("HippoRAG", "Table 2", "2Wiki")
    assert h is not None and (h.questions_count, h.corpus_passages, h.questions_split, h.llm) == (
        1000, 6119, "dev", "gpt-3.5-turbo-1106")
    assert h.embedder_options == ("Contriever", "GTR", "ColBERTv2")


def test_t2rag_table1_average_columns_as_printed() -> None:
    """T²RAG Table 1's Average EM / F1 of every method under both LLMs (seed 002 §5.3), as printed: each is the
    mean of the row's six dataset cells (PopQA, 2Wiki, MuSiQue, HotpotQA, Story, Medical) to the printed decimal,
    so a slip in either transcription shows; the column has no setting of its own."""
    df = paper_results()
    t1 = df[(df.paper == "T2RAG") & (df.table == "Table 1")]
    avg = t1[t1.dataset == AVERAGE]
    assert len(avg) == 28 and avg.value.notna().all() and set(avg.metric) == {"EM", "F1"}
    assert set(avg.setting) == {"Gemini-2.5-flash", "GPT-4o-mini"} and avg.note.str.contains("as printed").all()
    printed = {("Gemini-2.5-flash", "T2RAG"): (51.7, 63.9), ("Gemini-2.5-flash", "NOR"): (28.4, 38.9),
               ("GPT-4o-mini", "T2RAG"): (47.2, 60.2), ("GPT-4o-mini", "HippoRAG2"): (45.6, 61.1),
               ("GPT-4o-mini", "BM25"): (34.7, 44.0)}
    for (setting, method), (em, f1) in printed.items():
        assert [paper_value("Table 1", method, AVERAGE, m, paper="T2RAG", setting=setting) for m in ("EM", "F1")] \
            == [em, f1]
    six = t1[t1.dataset != AVERAGE].groupby(["setting", "method", "metric"]).value.agg(["mean", "count"])
    for r in avg.itertuples():
        mean, count = six.loc[(r.setting, r.method, r.metric)]
        assert count == 6 and abs(r.value - mean) <= 0.05 + 1e-9, (r.setting, r.method, r.metric, r.value, mean)
    assert paper_setting("T2RAG", "Table 1", AVERAGE) is None


def test_settings_agree_with_the_known_datasets_registry() -> None:
    """Every named known data set exists, its counts are the table's where the table states them, and its
    ``used_by`` lists exactly the tables naming it."""
    reg = {k.name: k for k in known_sets()}
    used: dict[str, set[str]] = {name: set() for name in reg}
    for (paper, table, _), s in paper_setting_rows().items():
        for i, name in enumerate(s.known_datasets):
            assert name in reg, f"{paper} {table}: unknown data set {name}"
            used[name].add(f"{paper} {table}")
            if i == 0 and s.questions_count is not None:
                assert (reg[name].questions, reg[name].passages) == (s.questions_count, s.corpus_passages)
    assert {n: set(k.used_by) for n, k in reg.items()} == used


def test_hipporag_table2_numbers() -> None:
    """HippoRAG (Gutiérrez et al. 2024) Table 2, two sources agreeing (each row's note)."""
    assert paper_value("Table 2", "HippoRAG (ColBERTv2)", "2Wiki", "R@5", paper="HippoRAG") == 89.1
    assert paper_value("Table 2", "HippoRAG (Contriever)", "MuSiQue", "R@2", paper="HippoRAG") == 41.0
    assert paper_value("Table 2", "ColBERTv2", "HotpotQA", "R@5", paper="HippoRAG") == 79.3
    assert paper_value("Table 2", "BM25", "MuSiQue", "R@2", paper="HippoRAG") == 32.3
    df = paper_results()
    hr = df[df.paper == "HippoRAG"]
    assert len(hr) == 60 and hr.value.notna().all() and hr.note.str.contains("two sources agree").all()
    assert paper_value("Table 2", "BM25", "MuSiQue", "R@5") == 33.8  # GEAR's own BM25 cell is untouched
    check_papers({"paper": "HippoRAG", "qa_paper": "GEAR"})


def test_bad_settings_file_names_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = paper_mod.SETTINGS_CSV.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "paper_settings.csv"
    bad.write_text("\n".join([text[0], text[1].replace(",500,", ",about 500,", 1)]) + "\n", encoding="utf-8")
    monkeypatch.setattr(paper_mod, "SETTINGS_CSV", bad)
    paper_setting_rows.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"paper_settings\.csv:2 \(GEAR Table 2 MuSiQue\): questions_count "
                                              r"should be a whole number or 'unstated', got 'about 500'"):
            paper_setting_rows()
        bad.write_text("\n".join([text[0], text[1].replace("gpt-4o-mini-2024-07-18", "", 1)]) + "\n",
                       encoding="utf-8")
        paper_setting_rows.cache_clear()
        with pytest.raises(ConfigError, match=r"empty llm \(write 'unstated'"):
            paper_setting_rows()
    finally:
        paper_setting_rows.cache_clear()


def test_flagged_numbers_are_printed_cells_the_paper_contradicts(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """paper_flags.csv marks GEAR Table 2's IRCoT (ColBERTv2) 2Wiki R@10, printed above its R@15; a flag naming no
    number of paper_results.csv (a renamed method, a typo) is refused rather than marking nothing."""
    from gear_repro.reporting.paper import paper_flag, paper_flags

    flags = paper_flags()
    assert list(zip(flags.method, flags.dataset, flags.metric, strict=True)) == [("IRCoT (ColBERTv2)", "2Wiki", "R@10")]
    r10, r15 = (paper_value("Table 2", "IRCoT (ColBERTv2)", "2Wiki", m) for m in ("R@10", "R@15"))
    assert (r10, r15) == (86.6, 69.7)
    flag = paper_flag("Table 2", "IRCoT (ColBERTv2)", "2Wiki", "R@10")
    assert flag is not None and flag.mark == "†" and "likely a typo" in flag.reason
    assert paper_flag("Table 2", "IRCoT (ColBERTv2)", "2Wiki", "R@15") is None
    assert paper_flag("Table 2", "IRCoT (ColBERTv2)", "2Wiki", "R@10", setting="single-step, gpt-4o-mini") is None
    text = paper_mod.FLAGS_CSV.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "paper_flags.csv"
    bad.write_text("\n".join([text[0], text[1].replace("IRCoT (ColBERTv2)", "IRCoT (ColBERT)")]) + "\n",
                   encoding="utf-8")
    monkeypatch.setattr(paper_mod, "FLAGS_CSV", bad)
    paper_flags.cache_clear()
    try:
        with pytest.raises(ConfigError, match=r"paper_flags\.csv:2: no number in paper_results\.csv for GEAR Table 2 "
                                              r"\(multi-step, gpt-4o-mini\) IRCoT \(ColBERT\) 2Wiki R@10"):
            paper_flags()
    finally:
        paper_flags.cache_clear()
