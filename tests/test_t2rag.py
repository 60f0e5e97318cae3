"""T²RAG (seed 002, §4.3, Alg. 1-2): reply parsing, the triplet-state machine, adaptive retrieval and the
agent with a scripted LLM on the toy corpus (MiniLM), the runner's scoring of its answer, the report's
trace and statistics, and the real-LLM path once with the tiny model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from gear_repro.methods.t2rag.clues import Clue
from gear_repro.methods.t2rag.parse import parse_decomposition, parse_resolution
from gear_repro.methods.t2rag.retrieval import adaptive_retrieve, question_query
from gear_repro.methods.t2rag.state import TripletState
from gear_repro.prompts import render
from tests.helpers.doubles import ScriptedLLM
from tests.helpers.requirements import missing

# -- the paper's case study (App. D, Figure 8) as scripted replies ---------------------------------------------
DECOMPOSE_FIG8 = """Reasoning: I need the director of each film and each director's birth year.

Triples:
God's Gift To Women | is directed by | ?directorA
Aldri Annet Enn Brak | is directed by | ?directorB
?directorA | was born in | ?
?directorB | was born in | ?"""
RESOLVE_FIG8_1 = """Fully Resolved Clue 1:
Subject: God's Gift To Women
Predicate: is directed by
Object: Michael Curtiz

Fully Resolved Clue 2:
Subject: Aldri Annet Enn Brak
Predicate: is directed by
Object: Edith Carlmar

Fully Resolved Clue 3:
Subject: Edith Carlmar
Predicate: was born in
Object: 1911

Newly Searchable Clue 1:
Subject: Michael Curtiz
Predicate: was born in
Object: ?"""
RESOLVE_FIG8_2 = "Fully Resolved Clue 1: Subject: Michael Curtiz Predicate: was born in Object: 1886"


def _clue(s: str) -> Clue:
    return Clue(*[x.strip() for x in s.split("|")])


# -- triplets and parsing ----------------------------------------------------------------------------------------
def test_clue_kinds_and_query_propositions() -> None:
    assert _clue("France | has capital | ?").kind == "searchable"
    assert _clue("?directorA | was born in | ?").kind == "fuzzy"
    assert _clue("Paris | capital of | France").kind == "resolved"
    assert _clue("God's Gift To Women | is directed by | ?directorA").query == "God's Gift To Women is directed by"
    assert _clue("film ?X | released in | 1990").query == "film released in 1990"
    assert _clue("?a | born in | ?b").n_placeholders == 2
    assert question_query("Who is the mayor of the city where Whoopi was born?") == \
        "is the mayor of the city Whoopi was born"  # word boundaries: "Whoopi" keeps its "Who"


def test_parse_decomposition_well_formed() -> None:
    p = parse_decomposition(DECOMPOSE_FIG8)
    assert p.status == "ok"
    assert [c.parts for c in p.clues] == [("God's Gift To Women", "is directed by", "?directorA"),
                                          ("Aldri Annet Enn Brak", "is directed by", "?directorB"),
                                          ("?directorA", "was born in", "?"), ("?directorB", "was born in", "?")]


@pytest.mark.parametrize("reply, status, parts", [
    ("**Triples:**\n1. **France** | has capital | ?\n2. ? | is located in | Europe", "ok",
     [("France", "has capital", "?"), ("?", "is located in", "Europe")]),
    ("Triples: A | p | ?x ; ?x | q | ?", "repaired", [("A", "p", "?x"), ("?x", "q", "?")]),
    ("Triples:\n(Lothair II, has mother, ?)\n", "repaired", [("Lothair II", "has mother", "?")]),
    ("Reasoning: blah\nLothair II | has mother | ?", "repaired", [("Lothair II", "has mother", "?")]),
    ("Triples:\nA | directed | by | ?", "ok", [("A", "directed by", "?")]),
    ("Triples:\nA | p | ?\nPropositions: A p ?\nB | q | ?", "ok", [("A", "p", "?")]),
    ("Triples:\nA | p | ?\na |  P | ?", "ok", [("A", "p", "?")]),  # normalised duplicate dropped
    # TRAG.py:402-408 compares parts stripped and lower-cased only: punctuation keeps two clues apart
    ("Triples:\nParis, France | p | ?\nparis france | p | ?", "ok",
     [("Paris, France", "p", "?"), ("paris france", "p", "?")]),
    ("I don't know.", "failed", []),
    ("", "failed", []),
    (None, "failed", []),
])
def test_parse_decomposition_malformed(reply, status, parts) -> None:
    p = parse_decomposition(reply)
    assert p.status == status
    assert [c.parts for c in p.clues] == parts


def test_parse_resolution_formats() -> None:
    p = parse_resolution(RESOLVE_FIG8_1)
    assert p.status == "ok"
    assert [c.parts for c in p.clues] == [("God's Gift To Women", "is directed by", "Michael Curtiz"),
                                          ("Aldri Annet Enn Brak", "is directed by", "Edith Carlmar"),
                                          ("Edith Carlmar", "was born in", "1911")]
    assert [c.parts for c in p.searchable] == [("Michael Curtiz", "was born in", "?")]
    one_line = parse_resolution(RESOLVE_FIG8_2)  # the paper's flattened layout
    assert one_line.status == "ok" and [c.parts for c in one_line.clues] == [("Michael Curtiz", "was born in", "1886")]
    code_words = parse_resolution("**Newly Traceable Clue 1:**\n- Subject: X\n- Predicate: p\n- Object: ?\n\nDone.")
    assert code_words.status == "ok" and [c.parts for c in code_words.searchable] == [("X", "p", "?")]


@pytest.mark.parametrize("reply, status, resolved, searchable", [
    ("Michael Curtiz | was born in | 1886\nEdith Carlmar | was born in | ?", "repaired",
     [("Michael Curtiz", "was born in", "1886")], [("Edith Carlmar", "was born in", "?")]),
    ("Fully Resolved Clue 1: Michael Curtiz | was born in | 1886", "ok",
     [("Michael Curtiz", "was born in", "1886")], []),
    ("Fully Resolved Clue 1:\nSubject: Michael Curtiz\nPredicate: was born in\n", "failed", [], []),  # no object
    ("None.", "ok", [], []),
    # seen from Qwen2.5-1.5B: the prompt's fuzzy clues echoed after the lists; an empty block stays empty
    ("Fully Resolved Clue 1:\nNone\n\nNewly Searchable Clue 1:\nSubject: 1974\nPredicate: is located in\n"
     "Object: ?\n\nFuzzy Clue 2:\nSubject: ?\nPredicate: borders\nObject: ?", "ok", [],
     [("1974", "is located in", "?")]),
    ("Fully Resolved Clue 1:\nSubject: ...\nPredicate: ...\nObject: ...\n\nNewly Searchable Clue 1:\nSubject: A\n"
     "Predicate: p\nObject: ?", "ok", [], [("A", "p", "?")]),  # the template's "..." copied: ignored
    ("The passages do not say anything about the film, so I cannot resolve any of the clues at all. " * 3,
     "failed", [], []),
    ("", "failed", [], []),
])
def test_parse_resolution_malformed(reply, status, resolved, searchable) -> None:
    p = parse_resolution(reply)
    assert p.status == status
    assert [c.parts for c in p.clues] == resolved and [c.parts for c in p.searchable] == searchable


# -- the state machine (Step 2.3) ---------------------------------------------------------------------------------
def test_state_update_follows_the_case_study() -> None:
    state = TripletState.from_clues(parse_decomposition(DECOMPOSE_FIG8).clues)
    assert (len(state.resolved), len(state.searchable), len(state.fuzzy)) == (0, 2, 2) and state.open
    r1 = parse_resolution(RESOLVE_FIG8_1)
    counts = state.update(r1.clues, r1.searchable)
    assert [c.object for c in state.resolved] == ["Michael Curtiz", "Edith Carlmar", "1911"]
    assert [c.parts for c in state.searchable] == [("Michael Curtiz", "was born in", "?")]
    # each new clue fills in one fuzzy triplet at most; the two "is directed by" ones resolve searchable ones
    assert state.fuzzy == [] and counts["fuzzy_filled"] == 2 and state.open
    r2 = parse_resolution(RESOLVE_FIG8_2)
    state.update(r2.clues, r2.searchable)
    assert not state.open and len(state.resolved) == 4
    assert state.answer_context() == state.resolved


def test_state_update_carries_or_drops_fuzzy_and_reclassifies() -> None:
    fuzzy = [_clue("?x | born in | ?"), _clue("?y | died in | ?")]
    state = TripletState([], [_clue("A | directed by | ?x")], list(fuzzy))
    # the resolver answers nothing useful: searchable is replaced by the (empty) new set, fuzzy carried over
    counts = state.update([], [])
    assert state.searchable == [] and state.fuzzy == fuzzy and state.open and counts["fuzzy_filled"] == 0
    # a "resolved" clue still holding a '?' is searchable; a "searchable" one without '?' is resolved
    counts = state.update([_clue("Bob | born in | ?")], [_clue("Bob | died in | 1950")])
    assert counts["reclassified"] == 2
    assert [c.parts for c in state.searchable] == [("Bob", "born in", "?")]
    assert [c.parts for c in state.resolved] == [("Bob", "died in", "1950")]
    assert [c.parts for c in state.fuzzy] == []  # both filled in
    dropped = TripletState([], [], list(fuzzy))
    counts = dropped.update([], [_clue("?z | lives in | ?")], carry_fuzzy=False)  # the authors' code
    assert dropped.fuzzy == [] and counts["dropped_fuzzy"] == 3 and not dropped.open
    kept = TripletState([], [], list(fuzzy))
    counts = kept.update([], [_clue("?z | lives in | ?"), _clue("?X | born in | ?")])
    assert counts["new_fuzzy"] == 1 and [c.parts for c in kept.fuzzy][-1] == ("?z", "lives in", "?")


def test_answer_context_at_the_cap_includes_searchable() -> None:
    state = TripletState([_clue("A | p | B")], [_clue("B | q | ?")], [_clue("? | r | ?")])
    assert [c.parts for c in state.answer_context()] == [("A", "p", "B"), ("B", "q", "?")]


# -- prompts ----------------------------------------------------------------------------------------------------------
def test_prompts_render_the_paper_wording() -> None:
    dec = render("t2rag_decompose", query="Who is X?")[0]["content"]
    assert dec.startswith("You are tasked with reasoning about a question and extracting the necessary knowledge")
    assert "Question: Who is X?" in dec and dec.rstrip().endswith("subject | predicate | object]")
    ans = render("t2rag_answer", query="Who is X?", clues="Clue 1: X | is | Y")[0]["content"]
    assert "Key Reasoning Clues:\nClue 1: X | is | Y" in ans and "- One entity or fact only" in ans
    res = render("t2rag_resolve", example_propositions="- p1", query="q?", searchable="S", fuzzy="None",
                 passages_section="", propositions="- p1", resolved="None")[0]["content"]
    assert "Context Passages" not in res and "Newly Searchable Clue 1:\nSubject: Ermengarde of Tours" in res
    assert "{" not in res and "}" not in res


# -- adaptive retrieval and the agent on the toy corpus -----------------------------------------------------------------
TOY_DUPLICATE = {"id": "dup-0", "subject": "Emmanuel Macron", "predicate": "born in", "object": "Amiens",
                 "passage_id": "4"}  # the same proposition extracted from another passage


@pytest.fixture(scope="module")
def toy_env(tmp_path_factory):
    from tests.conftest import TOY_PASSAGES, TOY_QUESTIONS, TOY_TRIPLES, write_jsonl

    d = tmp_path_factory.mktemp("t2rag") / "toy"
    d.mkdir()
    write_jsonl(d / "corpus.jsonl", [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(TOY_PASSAGES)])
    write_jsonl(d / "questions.jsonl", TOY_QUESTIONS)
    write_jsonl(d / "triples.jsonl", [{"id": f"{p}-{i}", "subject": s, "predicate": r, "object": o, "passage_id": p}
                                      for i, (s, r, o, p) in enumerate(TOY_TRIPLES)] + [TOY_DUPLICATE])
    shared: dict = {}

    def make(overrides: list[str] | None = None, script: dict | None = None, *, reload: tuple[str, ...] = (),
             real_llm: bool = False):
        """(cfg, Resources) sharing the module's dataset, embedder and indexes, except the names in ``reload``;
        the LLM is a ScriptedLLM of ``script`` unless ``real_llm`` (the config's client)."""
        from gear_repro.config import validate
        from gear_repro.pipeline.resources import Resources
        from tests.helpers.runs import compose_config

        cfg = validate(compose_config(["agent=t2rag", "embedder=minilm", "embedder.show_progress=false",
                                       "run.progress=false", f"dataset.path={d}", "dataset.name=toy",
                                       "dataset.paper_name=MuSiQue", *(overrides or [])]))
        if not shared:
            first = Resources(cfg)
            shared.update({name: getattr(first, name) for name in ("dataset", "backend", "embedder", "triples")})
        given = {name: obj for name, obj in shared.items() if name not in reload}
        if not real_llm:
            given["llm"] = ScriptedLLM(script or {})
        return cfg, Resources(cfg, **given)

    return d, make


def build(toy_env, script: dict, overrides: list[str] | None = None):
    from gear_repro.pipeline.wiring import build_method

    cfg, res = toy_env[1](overrides, script)
    return res, build_method(cfg, res)


@pytest.mark.slow
def test_adaptive_retrieval_stops_at_k_unique_passages_and_keeps_duplicates(toy_env) -> None:
    res, agent = build(toy_env, {}, ["agent.proposition_passage=own"])  # the paper reading's (reading=code: below)
    retriever, passage_of, text_of = agent._index()
    got = adaptive_retrieve(retriever, passage_of, text_of, ["Emmanuel Macron born in"], 2, 50)
    # the duplicate proposition maps to both of its passages; listed once, with both passages
    assert got.propositions[0]["text"] == "Emmanuel Macron born in Amiens"
    assert got.propositions[0]["passage_ids"] == ["3", "4"] and got.passages.ids == ["3", "4"]
    assert len(got.propositions) == 1
    # global ranking over all queries by best similarity, up to k unique passages
    two = adaptive_retrieve(retriever, passage_of, text_of, ["Berlin capital of", "Emmanuel Macron born in"], 3, 50)
    assert len(two.passages) == 3 and set(two.passages.ids) >= {"1", "3"}
    assert two.passages.scores == sorted(two.passages.scores, reverse=True)
    assert adaptive_retrieve(retriever, passage_of, text_of, [], 5, 50).passages.ids == []


RESOLVE_TOY_1 = """Fully Resolved Clue 1:
Subject: France
Predicate: president
Object: Emmanuel Macron

Newly Searchable Clue 1:
Subject: Emmanuel Macron
Predicate: born in
Object: ?"""
RESOLVE_TOY_2 = "Fully Resolved Clue 1:\nSubject: Emmanuel Macron\nPredicate: born in\nObject: Amiens"
SCRIPT = {"decompose": "Triples:\nFrance | president | ?p\n?p | born in | ?", ("resolve", 1): RESOLVE_TOY_1,
          ("resolve", 2): RESOLVE_TOY_2, "answer": "Amiens"}


@pytest.mark.slow
def test_agent_resolves_and_stops(toy_env) -> None:
    res, agent = build(toy_env, SCRIPT, ["agent=t2rag_paper"])
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    t = out.trace["t2rag"]
    assert res.llm.stages() == [("decompose", 0), ("resolve", 1), ("resolve", 2), ("answer", 0)]
    assert t["stop"] == "all_resolved" and t["iterations"] == len(out.rounds) == 2
    assert out.answer is not None and out.answer.text == "Amiens" and out.answer.raw == "Amiens"
    r1, r2 = out.rounds
    assert r1["queries"] == ["France president"] and r2["queries"] == ["Emmanuel Macron born in"]
    assert r1["state"] == {"resolved": [["France", "president", "Emmanuel Macron"]],
                           "searchable": [["Emmanuel Macron", "born in", "?"]], "fuzzy": []}
    assert r2["state"]["searchable"] == [] and len(r2["state"]["resolved"]) == 2
    assert len(r1["passages"]) == 5 and r1["passages"][0] == "2"  # k = 5 unique passages
    # ranking: RRF of the iteration lists; each round carries the ranking had T²RAG stopped there
    assert out.rounds[-1]["ranking"] == out.ranking.ids and out.rounds[0]["ranking"] == r1["passages"]
    assert out.ranking.ids[:2] == ["2", "3"]
    resolve1 = res.llm.calls[1]["prompt"]
    assert "Searchable Clue 1:\nSubject: France\nPredicate: president\nObject: ?p" in resolve1
    assert "Fuzzy Clue 1:\nSubject: ?p\nPredicate: born in\nObject: ?" in resolve1
    assert "Context Passages:\n- France\nFrance is a country" in resolve1 and "- France president Emmanuel Macron" in resolve1
    assert "Previous Resolved Clues:\n- France | president | Emmanuel Macron" in res.llm.calls[2]["prompt"]
    assert "Clue 2: Emmanuel Macron | born in | Amiens" in res.llm.calls[3]["prompt"]
    assert t["counters"] == {"decompose_ok": 1, "resolve_ok": 2, "fuzzy_filled": 1}
    json.dumps(out.trace), json.dumps(out.rounds)  # JSON-serialisable


@pytest.mark.slow
def test_iteration_cap_and_answer_from_searchable(toy_env) -> None:
    stuck = {"decompose": "Triples:\nFrance | president | ?p\n?p | born in | ?",  # the code's header (reading=code)
             "resolve": "Newly Traceable Clue 1:\nSubject: France\nPredicate: president\nObject: ?", "answer": "x"}
    for n in (1, 3):
        res, agent = build(toy_env, stuck, [f"agent.max_iterations={n}"])
        out = agent.run(res.dataset.questions[0], 15)
        t = out.trace["t2rag"]
        assert t["stop"] == "max_iterations" and t["iterations"] == len(out.rounds) == n
        assert [s for s, _ in res.llm.stages()] == ["decompose"] + ["resolve"] * n + ["answer"]
        assert t["answer_context"] == [["France", "president", "?"]]  # Step 3 (b): remaining searchable
        assert "Clue 1: France | president | ?" in res.llm.calls[-1]["prompt"]


@pytest.mark.slow
def test_malformed_replies_are_counted_never_raised(toy_env) -> None:
    res, agent = build(toy_env, {"decompose": "I think the answer is Paris.", "answer": "Paris"},
                       ["agent.decompose_retry=none", "agent.on_no_triplets=answer"])
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert t["stop"] == "no_triplets" and out.rounds == [] and t["counters"] == {"decompose_failed": 1}
    assert res.llm.stages() == [("decompose", 0), ("answer", 0)] and out.ranking.ids == []
    res, agent = build(toy_env, {"decompose": "Triples:\nFrance | president | ?", "resolve": "???", "answer": ""})
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert t["counters"]["resolve_failed"] == 1 and t["stop"] == "all_resolved" and out.answer.text == ""
    assert out.rounds[0]["status"] == "failed" and out.rounds[0]["reply"] == "???"


@pytest.mark.slow
def test_ablation_and_code_switches(toy_env) -> None:
    res, agent = build(toy_env, SCRIPT, ["agent=t2rag_paper", "agent.with_passages=false",
                                         "agent.question_query=true", "agent.example_propositions_chars=10"])
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    prompt = res.llm.calls[1]["prompt"]
    assert "Context Passages" not in prompt and "Context Propositions:\n- France" in prompt
    assert prompt.split("Fully Resolved Clue 1")[0].strip().endswith("- France p")  # example cut at 10 chars
    assert out.rounds[0]["queries"] == ["France president", question_query(q.question)]  # paper: word mode
    res, agent = build(toy_env, {"decompose": "Triples:\n?a | president | ?b", "answer": "x"},
                       ["agent=t2rag_paper", "agent.resolve_without_context=false", "agent.max_iterations=2",
                        "agent.stall_stop=false"])
    out = agent.run(q, 15)
    assert [r["status"] for r in out.rounds] == ["skipped", "skipped"]
    assert res.llm.stages() == [("decompose", 0), ("answer", 0)]
    res, agent = build(toy_env, {"decompose": "Triples:\n?a | president | ?b", "resolve": "None", "answer": "x"},
                       ["agent=t2rag_paper", "agent.carry_fuzzy=false"])
    out = agent.run(q, 15)
    assert out.trace["t2rag"]["iterations"] == 1 and out.trace["t2rag"]["stop"] == "all_resolved"


@pytest.mark.slow
def test_runner_scores_the_method_answer_and_reports(toy_env, tmp_path: Path) -> None:
    from gear_repro.pipeline.runner import Runner
    from gear_repro.reporting.analyses import format_trace, method_tables
    from gear_repro.reporting.runs import find_runs
    from gear_repro.reporting.tables import long_table, write_tables

    # reading=code (the preset): the resolve replies in the code's format, which its strict parse reads
    cfg, res = toy_env[1](["experiment=t2rag_table1", "dataset.limit=1"], SCRIPT_CODE, reload=("dataset",))
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    assert metrics["em"] == 100.0 and metrics["f1"] == 100.0 and metrics["n_answered"] == 1
    # gold passages 2 and 3: TRAG.py:196-210 maps "Emmanuel Macron born in Amiens" to the last passage it came from
    # (the toy's duplicate, 4), so round 2 retrieves 4 before 3 and 3 falls out of the top 5 (own passages: 100.0)
    assert metrics["recall@5"] == 50.0
    assert set(metrics["tokens_by_stage"]) == {"decompose", "resolve", "answer"}
    assert len(metrics["recall@15_by_round"]) == 3  # N = 3 iterations (not dataset.max_rounds = 4)
    pred = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    assert pred["answer"] == "Amiens" and pred["qa_mode"] == "method" and pred["em"] == 1.0
    assert [(c["stage"], c["round"]) for c in pred["llm_calls"]] == [("decompose", 0), ("resolve", 1),
                                                                       ("resolve", 2), ("answer", 0)]
    text = format_trace(pred)
    assert "== Iteration 2 ==" in text and "stop: all_resolved" in text and "answer (method): 'Amiens'" in text
    runs = find_runs([tmp_path / "run"])
    stats = next(t for stem, _, t in method_tables(runs) if stem == "t2rag_stats").iloc[0]
    assert stats["iterations_mean"] == 2 and stats["llm_calls_per_q"] == 4 and stats["em_all_resolved"] == 100.0
    long = long_table(runs)
    em = long[long.metric == "EM"].iloc[0]
    # GPT-4o-mini MuSiQue's cell, apart: the toy run is not on T²RAG's setting (its data, LLM and embedder)
    assert em["table"] == "Table 3" and em["method"].startswith("T2RAG (") and em["paper_other_setting"] == 34.3
    assert pd.isna(em["paper"]) and "LLM " in em["setting_differs"]
    assert em["paper_source"] == "T2RAG Table 1 (GPT-4o-mini)"
    md = write_tables(long, tmp_path / "report")["md"].read_text()
    assert re.search(r"Paper numbers of T2RAG \([^)]*\): T2RAG Table 1 \(GPT-4o-mini\)\.", md)
    # the block is the table its paper numbers come from: "T2RAG Table 3" named a table T²RAG does not have
    assert em["block"] == "T2RAG Table 1" and "### T2RAG Table 1:" in md and "T2RAG Table 3" not in md


@pytest.mark.slow
def test_real_llm_path_with_the_tiny_model(toy_env, tmp_path: Path) -> None:
    """The harness-started llama.cpp server with SmolLM2-135M: nonsense answers, but every reply is parsed
    or counted and the run finishes with EM/F1 and the three stages in the ledger."""
    try:
        from gear_repro.llm.gguf_weights import smollm2_path

        smollm2_path()
        import llama_cpp  # noqa: F401
    except Exception as e:  # noqa: BLE001
        missing(f"tiny model not installed: {e}")
    from gear_repro.pipeline.runner import Runner

    # a loaded 2-core machine can take minutes per call: a generous timeout keeps this a plumbing test
    cfg, res = toy_env[1](["llm=tiny", "dataset.limit=1", f"llm.cache_dir={tmp_path / 'cache'}", "llm.timeout_s=900"],
                          reload=("dataset",), real_llm=True)  # the real client from llm=tiny; the limit
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    pred = json.loads((tmp_path / "run" / "predictions.jsonl").read_text().splitlines()[0])
    assert "error" not in pred and "em" in pred and metrics["n_answered"] == 1
    stages = [c["stage"] for c in pred["llm_calls"]]
    assert stages[0] == "decompose" and stages[-1] == "answer" and all(c["ok"] for c in pred["llm_calls"])
    counters = pred["trace"]["t2rag"]["counters"]
    assert sum(counters.get(f"decompose_{s}", 0) for s in ("ok", "repaired", "failed")) == 1  # (+ a retry's counter)


@pytest.mark.parametrize("ablation, n, passages, label", [
    ("full", 3, True, "T2RAG"), ("single_round", 1, True, "T2RAG - single round"),
    ("wo_chunk", 3, False, "T2RAG - w/o chunk")])
def test_table2_ablation_preset(compose, ablation, n, passages, label) -> None:
    """The row label follows the agent's settings (not the preset's `ablation` key): an override that changes them
    is never labelled as another row of the paper."""
    from omegaconf import OmegaConf

    from gear_repro.reporting.runs import RunResult

    cfg = compose(["experiment=t2rag_table2_ablation", f"ablation={ablation}"])
    c = OmegaConf.to_container(cfg, resolve=True)
    assert c["agent"]["_target_"].endswith("T2RAGAgent")
    assert (c["agent"]["max_iterations"], c["agent"]["with_passages"], RunResult("x", c, {}).method) == (n, passages, label)
    both = OmegaConf.to_container(compose(["experiment=t2rag_table2_ablation", f"ablation={ablation}",
                                           "agent.max_iterations=1", "agent.with_passages=false"]), resolve=True)
    assert RunResult("x", both, {}).method == "T2RAG - single round, w/o chunk"
    from gear_repro.reporting.paper import paper_value

    assert paper_value("Table 2", label, "MuSiQue", "EM", paper="T2RAG", setting="GPT-4o-mini") == \
        {"full": 33.0, "single_round": 15.0, "wo_chunk": 21.6}[ablation]


def test_schema_rejects_typos_and_bad_choices(compose) -> None:
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ValidationError

    cfg = compose(["agent=t2rag", "agent.ranking=concat"])
    assert cfg.agent.ranking == "concat" and cfg.agent.k == 5
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose(["agent=t2rag", "agent.max_iteration=2"])  # a typo of max_iterations
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose(["agent=t2rag", "agent.ranking=borda"])
    with pytest.raises((ConfigCompositionException, ValidationError)):
        compose(["agent=t2rag", "agent.k=five"])


# -- the code reading (rockcor/T2RAG @ 72c43bd src/TRAG.py) vs the paper's, empty iterations, answer --------
def test_question_query_substring_mode_follows_the_code() -> None:
    # TRAG.py:481-485: lower-cased, question words removed as substrings in the code's order
    assert question_query("Who directed Showboat?", "substring") == "directed sboat"
    assert question_query("Whose whole song is it?", "substring") == "se le song is it"
    assert question_query("Who directed Showboat?", "word") == "directed Showboat"


def test_each_preset_gives_its_readings_keys_and_each_key_still_overrides(toy_env) -> None:
    """The two presets carry the two readings' values (configs/agent/t2rag.yaml the code's, t2rag_paper.yaml the
    paper's); `agent.reading` is the label the report names; a key set on the command line overrides its preset's."""
    from gear_repro.methods.t2rag.report import reading_values
    from gear_repro.methods.t2rag.settings import READING_KEYS

    _, code = build(toy_env, {})
    assert {k: code.describe()[k] for k in READING_KEYS} == reading_values("code") == {
        "question_query": True, "question_query_mode": "substring", "carry_fuzzy": False,
        "resolve_without_context": False, "example_propositions_chars": 1000, "decompose_retry": "simple",
        "on_no_triplets": "fail", "prompt_text": "code", "decompose_parse": "code", "query_placeholders": "code",
        "resolve_parse": "code", "resolved_update": "code", "proposition_passage": "code"}
    _, paper = build(toy_env, {}, ["agent=t2rag_paper"])
    assert paper.describe()["reading"] == "paper" and {k: paper.describe()[k] for k in READING_KEYS} == \
        reading_values("paper") == {
        "question_query": False, "question_query_mode": "word", "carry_fuzzy": True,
        "resolve_without_context": True, "example_propositions_chars": 0, "decompose_retry": "none",
        "on_no_triplets": "answer", "prompt_text": "paper", "decompose_parse": "lenient",
        "query_placeholders": "strip", "resolve_parse": "lenient", "resolved_update": "reclassify",
        "proposition_passage": "own"}
    _, mixed = build(toy_env, {}, ["agent=t2rag_paper", "agent.carry_fuzzy=false"])
    assert mixed.carry_fuzzy is False and mixed.question_query is False


def test_a_reading_key_left_null_is_refused_naming_the_presets(toy_env) -> None:
    """Without a reading's table in the code, a hand-written config that leaves a key null is an error, not a
    silent default."""
    from gear_repro.methods.t2rag.method import T2RAGAgent
    from gear_repro.utils.errors import ConfigError

    _, code = build(toy_env, {})
    kwargs = {k: code.describe()[k] for k in ("question_query_mode", "carry_fuzzy", "resolve_without_context",
                                             "example_propositions_chars", "decompose_retry", "on_no_triplets",
                                             "prompt_text", "decompose_parse", "query_placeholders", "resolve_parse",
                                             "resolved_update", "proposition_passage")}
    with pytest.raises(ConfigError, match=r"agent\.question_query not set: configs/agent/t2rag\.yaml"):
        T2RAGAgent(code.llm, code.embedder, code.triple_collection, code.triples, code.passage_by_id,
                   question_query=None, **kwargs)


@pytest.mark.slow
def test_code_reading_queries_the_question_and_drops_fuzzy(toy_env) -> None:
    res, agent = build(toy_env, SCRIPT)  # the default: reading=code
    out = agent.run(res.dataset.questions[0], 15)
    r1 = out.rounds[0]
    assert r1["queries"] == ["France president", "was the president of france born"]  # TRAG.py:478-487
    # TRAG.py:738-740: the fuzzy triplet is gone after the first resolve call; the reply's searchable clue stays
    assert r1["state"]["fuzzy"] == [] and out.trace["t2rag"]["counters"]["dropped_fuzzy"] == 1
    assert out.trace["t2rag"]["stop"] == "all_resolved" and out.answer.text == "Amiens"
    prompt = res.llm.calls[1]["prompt"]
    example = prompt.split("Fully Resolved Clue 1")[0]
    assert len(example) <= len("Example:\nContext Propositions:\n") + 1000 + 2  # TRAG.py:668 cut


def test_code_reading_skips_the_resolver_when_nothing_was_retrieved(toy_env, monkeypatch) -> None:
    from gear_repro.methods.t2rag import method as m

    monkeypatch.setattr(m, "adaptive_retrieve", lambda *a, **kw: m.Retrieved())
    res, agent = build(toy_env, {"decompose": "Triples:\nFrance | president | ?", "answer": "x"},
                       ["agent.stall_stop=false", "agent.max_iterations=2"])
    out = agent.run(res.dataset.questions[0], 15)
    assert [r["status"] for r in out.rounds] == ["skipped", "skipped"]  # TRAG.py:622-629
    assert res.llm.stages() == [("decompose", 0), ("answer", 0)]


def test_code_ranking_joins_the_iterations_and_drops_repeated_texts(toy_env, monkeypatch) -> None:
    """TRAG.py:1392-1398: a query's documents are the iterations' passages in order, a text already listed dropped;
    the paper preset keeps the RRF of the iteration lists."""
    from gear_repro.methods.t2rag import method as m
    from gear_repro.types import Passage, Ranking

    lists = iter([["3", "1", "dup"], ["1", "2", "0"]])  # "dup" holds passage 2's text under another id

    def scripted(*args, **kwargs):
        ids = next(lists)
        return m.Retrieved([{"text": "France president Emmanuel Macron", "score": 0.9, "passage_ids": ids}],
                           Ranking(ids, [1.0 - i / 10 for i in range(len(ids))]))

    monkeypatch.setattr(m, "adaptive_retrieve", scripted)
    stuck = {"decompose": "Triples:\nFrance | president | ?", "answer": "x",
             "resolve": "Newly Traceable Clue 1:\nSubject: France\nPredicate: president\nObject: ?"}
    res, agent = build(toy_env, stuck, ["agent.max_iterations=2"])
    france = agent.passage_by_id["2"]
    agent.passage_by_id = {**agent.passage_by_id, "dup": Passage("dup", france.title, france.text)}
    out = agent.run(res.dataset.questions[0], 15)
    assert [r["passages"] for r in out.rounds] == [["3", "1", "dup"], ["1", "2", "0"]]
    assert out.ranking.ids == ["3", "1", "dup", "0"]  # "1" listed, "2"'s text listed (as "dup")
    assert out.rounds[0]["ranking"] == ["3", "1", "dup"] and out.rounds[1]["ranking"] == out.ranking.ids
    lists = iter([["3", "1", "dup"], ["1", "2", "0"]])
    res, agent = build(toy_env, stuck, ["agent=t2rag_paper", "agent.max_iterations=2"])
    assert agent.run(res.dataset.questions[0], 15).ranking.ids[0] == "1"  # RRF: in both lists


@pytest.mark.slow
def test_failed_decomposition_is_retried_with_the_simple_prompt(toy_env) -> None:
    simple = ("1. France | president | ?\n- ? | related to | a very long generic object that says nothing useful\n"
              "? | born in | ?\nA | b | c\nD | e | f")
    res, agent = build(toy_env, {"decompose": "I think the answer is Paris.", "decompose_retry": simple,
                                 "resolve": "None", "answer": "Paris"})
    out = agent.run(res.dataset.questions[0], 15)
    assert [s for s, _ in res.llm.stages()][:2] == ["decompose", "decompose_retry"]
    assert res.llm.calls[1]["prompt"].startswith("From the question below, write down the knowledge triples")
    dec = out.trace["t2rag"]["decomposition"]
    # the generic line is dropped (TRAG.py:1024) and at most 3 triplets are kept (1028)
    assert dec["status"] == "retried" and dec["retry_raw"] == simple
    assert out.trace["t2rag"]["counters"]["decompose_retry_ok"] == 1
    assert dec["state"]["searchable"] == [["France", "president", "?"]] and dec["state"]["resolved"] == [["A", "b", "c"]]
    assert dec["state"]["fuzzy"] == [["?", "born in", "?"]]
    res, agent = build(toy_env, {"decompose": "no idea", "answer": "x"}, ["agent=t2rag_paper"])
    agent.run(res.dataset.questions[0], 15)
    assert [s for s, _ in res.llm.stages()] == ["decompose", "answer"]  # the paper: no retry


def test_simple_decomposition_keeps_the_first_three_lines_then_dedupes() -> None:
    """TRAG.py:1028 keeps triples[:3]; the de-duplication (398-417) comes after: a repeat among them leaves two."""
    from gear_repro.methods.t2rag.parse import parse_simple_decomposition

    got = parse_simple_decomposition("A | b | ?\na | B | ?\nC | d | ?\nE | f | ?")
    assert [c.parts for c in got.clues] == [("A", "b", "?"), ("C", "d", "?")] and got.status == "retried"


def test_no_triplet_after_the_retry_fails_the_query_as_the_code_does(toy_env) -> None:
    """TRAG.py:385-396, 1429-1437: no documents and the answer 'Error processing query', no answer call; the paper
    reading answers from no clues."""
    from gear_repro.methods.t2rag.settings import FAILED_ANSWER

    script = {"decompose": "no idea", "decompose_retry": "none either", "answer": "Paris"}
    res, agent = build(toy_env, script)
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert [s for s, _ in res.llm.stages()] == ["decompose", "decompose_retry"]
    assert out.answer.text == FAILED_ANSWER == "Error processing query" and out.ranking.ids == [] and out.rounds == []
    assert t["stop"] == "no_triplets" and t["counters"]["query_failed"] == 1
    res, agent = build(toy_env, script, ["agent.on_no_triplets=answer"])
    out = agent.run(res.dataset.questions[0], 15)
    assert [s for s, _ in res.llm.stages()] == ["decompose", "decompose_retry", "answer"] and out.answer.text == "Paris"
    res, agent = build(toy_env, script, ["agent=t2rag_paper"])
    assert agent.run(res.dataset.questions[0], 15).answer.text == "Paris"


def test_placeholder_matching_fills_a_reworded_fuzzy_triplet() -> None:
    state = TripletState.from_clues([_clue("A | directed by | ?d"), _clue("?d | was born in | ?y")])
    counts = state.update([_clue("A | directed by | Curtiz")], [_clue("Curtiz | born on | ?")])
    assert state.fuzzy == [] and [c.parts for c in state.searchable] == [("Curtiz", "born on", "?")]
    assert counts["fuzzy_filled"] == 1
    # the earlier reading: "born on" is not "was born in", the fuzzy triplet stays open with nothing to search
    old = TripletState.from_clues([_clue("A | directed by | ?d"), _clue("?d | was born in | ?y")])
    old.update([_clue("A | directed by | Curtiz")], [_clue("Curtiz | born on | ?")], fuzzy_match="words")
    assert [c.parts for c in old.fuzzy] == [("?d", "was born in", "?y")]
    # a bound placeholder alone makes a fuzzy triplet searchable, whatever the reply's wording
    bound = TripletState.from_clues([_clue("A | directed by | ?d"), _clue("?d | was born in | ?y")])
    counts = bound.update([_clue("A | directed by | Curtiz")], [])
    assert [c.parts for c in bound.searchable] == [("Curtiz", "was born in", "?y")] and counts["fuzzy_bound"] == 1


@pytest.mark.slow
def test_paper_reading_stops_when_stalled_instead_of_empty_iterations(toy_env) -> None:
    reply1 = ("Fully Resolved Clue 1:\nSubject: France\nPredicate: president\nObject: Emmanuel Macron\n\n"
              "Newly Searchable Clue 1:\nSubject: Emmanuel Macron\nPredicate: born on\nObject: ?")
    script = {"decompose": "Triples:\nFrance | president | ?p\n?p | was born in | ?", ("resolve", 1): reply1,
              ("resolve", 2): RESOLVE_TOY_2, "answer": "Amiens"}
    res, agent = build(toy_env, script, ["agent=t2rag_paper"])
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert out.rounds[0]["state"]["fuzzy"] == [] and t["iterations"] == 2 and t["stop"] == "all_resolved"
    assert all("Context Propositions:\nNone" not in c["prompt"] for c in res.llm.calls)
    # nothing searchable, nothing retrieved: one context-free resolve call, then stop (not N = 3 calls)
    res, agent = build(toy_env, {"decompose": "Triples:\n?a | president | ?b", "resolve": "None", "answer": "x"},
                       ["agent=t2rag_paper"])
    out = agent.run(res.dataset.questions[0], 15)
    assert out.trace["t2rag"]["stop"] == "stalled" and out.trace["t2rag"]["iterations"] == 1
    assert [s for s, _ in res.llm.stages()] == ["decompose", "resolve", "answer"]
    assert agent.summarize([{"trace": out.trace}]) == {"iterations_hist": {"1": 1}, "stops": {"stalled": 1}}
    res, agent = build(toy_env, {"decompose": "Triples:\n?a | president | ?b", "resolve": "None", "answer": "x"},
                       ["agent=t2rag_paper", "agent.stall_stop=false"])
    out = agent.run(res.dataset.questions[0], 15)
    assert out.trace["t2rag"]["stop"] == "max_iterations" and out.trace["t2rag"]["iterations"] == 3


# the code's resolve reply format: "Newly Traceable", indented as the code's prompt is (a model may copy the margin)
RESOLVE_TOY_1_CODE = """        Fully Resolved Clue 1:
        Subject: France
        Predicate: president
        Object: Emmanuel Macron

        Newly Traceable Clue 1:
        Subject: Emmanuel Macron
        Predicate: born in
        Object: ?"""
SCRIPT_CODE = {**SCRIPT, ("resolve", 1): RESOLVE_TOY_1_CODE}
DECOMPOSE_TOY_CODE = ("Reasoning: I need the president of France and his birthplace.\n\nTriples:\nFrance | president | ?p\n"
                      "?p | born in | ?\n\nPropositions: France president ?p, ?p born in ?\n"
                      'To answer the question, I need to know "France president ?", "? born in ?"')


@pytest.mark.slow
def test_code_prompt_texts_and_their_reply_format(toy_env) -> None:
    """F1: under reading=code the decomposition and resolve prompts are TRAG.py's texts: the
    example's "Newly Traceable" clue has its object filled in (TRAG.py:675-678), the question heads the decomposition
    prompt (266), Triples: stands alone (301) and Propositions: is asked for (304), the resolved clues' section has its
    own header and is left out while nothing is resolved (649-654); the replies in the code's format are read in both
    readings."""
    script = {"decompose": DECOMPOSE_TOY_CODE, ("resolve", 1): RESOLVE_TOY_1_CODE, ("resolve", 2): RESOLVE_TOY_2,
              "answer": "Amiens"}
    res, agent = build(toy_env, script)  # the default: reading=code
    q = res.dataset.questions[0]
    out = agent.run(q, 15)
    dec, res1, res2 = (res.llm.calls[i]["prompt"] for i in range(3))
    assert dec.splitlines()[2] == f"Question: {q.question}" and dec.count(f"Question: {q.question}") == 2
    assert "\nTriples:\n[List each triple on a new line in format: subject | predicate | object]\n" in dec
    assert "\nPropositions: [Convert triples to natural language sentences, keeping ? placeholders]" in dec
    assert ("        Newly Traceable Clue 1:\n        Subject: Ermengarde of Tours\n        Predicate: died on\n"
            "        Object: 20 March 851\n") in res1
    assert "Searchable" not in res1 and "\nTraceable Clue 1:\nSubject: France\nPredicate: president\nObject: ?p\n" in res1
    assert "Resolved Clues" not in res1.split("Context Propositions:")[-1]  # nothing resolved: no section, no "None"
    assert ("\n\nPreviously Resolved Clues (use these to replace ? placeholders):\n- France | president | Emmanuel Macron"
            in res2)
    r1 = out.rounds[0]
    assert r1["new_searchable"] == [["Emmanuel Macron", "born in", "?"]] and r1["status"] == "ok"
    assert out.trace["t2rag"]["stop"] == "all_resolved" and out.answer.text == "Amiens"
    # the paper's texts under reading=paper (or prompt_text=paper); the code's reply format still parses
    res, agent = build(toy_env, script, ["agent.prompt_text=paper"])
    out = agent.run(q, 15)
    dec, res1 = res.llm.calls[0]["prompt"], res.llm.calls[1]["prompt"]
    assert dec.count("Question: ") == 4 and "Propositions:" not in dec  # three examples + "Now analyze"
    assert "Newly Searchable Clue 1:\nSubject: Ermengarde of Tours\nPredicate: died on\nObject: ?" in res1
    assert "Previous Resolved Clues:\nNone" in res1 and "Traceable" not in res1
    assert out.rounds[0]["new_searchable"] == [["Emmanuel Macron", "born in", "?"]]
    assert build(toy_env, {}, ["agent=t2rag_paper"])[1].prompt_text == "paper"


@pytest.mark.parametrize("reply, status, code, lenient", [
    # the Triples: line itself is never parsed (TRAG.py:327-328)
    ("Triples: Showboat | directed by | ?d\n?d | born in | ?", "ok", [("?d", "born in", "?")],
     [("Showboat", "directed by", "?d"), ("?d", "born in", "?")]),
    # four cells: parts[0..2] (335-341); ours joined the middle cells and took the last as the object
    ("Triples:\nA | b | c | ?", "ok", [("A", "b", "c")], [("A", "b c", "?")]),
    # the primary pass strips no numbering or bullets
    ("Triples:\n1. A | b | ?\n- C | d | ?", "ok", [("1. A", "b", "?"), ("- C", "d", "?")],
     [("A", "b", "?"), ("C", "d", "?")]),
    # no Triples: section: the secondary pass (346-373) strips them, and quotes
    ("Reasoning: x\n- A | b | ?\n2. \"C\" | d | ?", "repaired", [("A", "b", "?"), ("C", "d", "?")],
     [("A", "b", "?"), ("C", "d", "?")]),
    ("**Triples:**\n**A** | b | ?", "repaired", [("**A**", "b", "?")], [("A", "b", "?")]),
    ("Triples:\nA | b | ?\nPropositions: A b ?\nC | d | ?", "ok", [("A", "b", "?")], [("A", "b", "?")]),
    ("Propositions: A | b | c", "failed", [], [("Propositions: A", "b", "c")]),
    ("", "failed", [], []),
])
def test_code_decomposition_parse_follows_trag(reply, status, code, lenient) -> None:
    """F2: decompose_parse=code reads the reply as TRAG.py:319-373; lenient is our parser."""
    from gear_repro.methods.t2rag.parse import parse_decomposition_code

    got = parse_decomposition_code(reply)
    assert got.status == status and [c.parts for c in got.clues] == code
    assert [c.parts for c in parse_decomposition(reply).clues] == lenient


@pytest.mark.slow
def test_code_reading_parses_the_decomposition_as_the_code(toy_env) -> None:
    script = {"decompose": "Triples: France | president | ?p\n?p | born in | ?", "answer": "x"}
    res, agent = build(toy_env, script)  # reading=code: the header line's triplet is not read; one fuzzy clue
    state = agent.run(res.dataset.questions[0], 15).trace["t2rag"]["decomposition"]["state"]
    assert state == {"resolved": [], "searchable": [], "fuzzy": [["?p", "born in", "?"]]}
    res, agent = build(toy_env, script, ["agent.decompose_parse=lenient"])
    state = agent.run(res.dataset.questions[0], 15).trace["t2rag"]["decomposition"]["state"]
    assert state["searchable"] == [["France", "president", "?p"]] and state["fuzzy"] == [["?p", "born in", "?"]]
    assert build(toy_env, {}, ["agent=t2rag_paper"])[1].decompose_parse == "lenient"


def test_code_query_propositions_keep_inner_placeholders_and_skip_non_positive_candidates() -> None:
    """F3: query_placeholders=code leaves a part out only when it starts with '?' and keeps the
    others verbatim (TRAG.py:466-471), and skips candidates whose best similarity is <= 0 (532)."""
    from gear_repro.types import Ranking

    inner, lead = Clue("film directed by ?x", "released in", "?"), Clue("? (a person)", "born in", "Paris")
    assert inner.query_for("code") == "film directed by ?x released in"
    assert inner.query_for("strip") == inner.query == "film directed by released in"
    assert lead.query_for("code") == "born in Paris" and lead.query_for("strip") == "(a person) born in Paris"

    class Fixed:  # a retriever whose similarities are given
        def retrieve_many(self, queries, k):
            return [Ranking(["t1", "t2", "t3"], [0.4, 0.0, -0.3]) for _ in queries]

    maps = ({"t1": "p1", "t2": "p2", "t3": "p3"}, {"t1": "a", "t2": "b", "t3": "c"})
    assert adaptive_retrieve(Fixed(), *maps, ["q"], 5, 10, positive_only=True).passages.ids == ["p1"]
    assert adaptive_retrieve(Fixed(), *maps, ["q"], 5, 10).passages.ids == ["p1", "p2", "p3"]


@pytest.mark.slow
def test_code_reading_queries_keep_inner_placeholders(toy_env) -> None:
    script = {"decompose": "Triples:\nFrance ?c | president | Emmanuel Macron", "answer": "x"}
    res, agent = build(toy_env, script, ["agent.question_query=false"])  # reading=code
    assert agent.run(res.dataset.questions[0], 15).rounds[0]["queries"] == ["France ?c president Emmanuel Macron"]
    res, agent = build(toy_env, script, ["agent.question_query=false", "agent.query_placeholders=strip"])
    assert agent.run(res.dataset.questions[0], 15).rounds[0]["queries"] == ["France president Emmanuel Macron"]
    assert build(toy_env, {}, ["agent=t2rag_paper"])[1].query_placeholders == "strip"


@pytest.mark.slow
def test_run_json_iteration_statistics_cover_a_resumed_run(toy_env, tmp_path: Path) -> None:
    """run.json's method block counted only the questions of the last process (the agent's own counters): after a
    resume (1 question, then 3) its histogram summed to 2. Now it is taken from every finished record."""
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.io import read_json_object

    for limit in (1, 3):
        cfg, res = toy_env[1]([f"dataset.limit={limit}"], SCRIPT, reload=("dataset",))
        Runner(cfg, tmp_path / "run", resources=res).run()
    method = read_json_object(tmp_path / "run" / "run.json")["method"]
    assert sum(method["iterations_hist"].values()) == 3 and sum(method["stops"].values()) == 3
    assert [s for s, _ in res.llm.stages()].count("decompose") == 2  # the resume ran only the two new questions
    assert method["prompt_text"] == "code" and method["reading"] == "code"  # the settings stay beside them


def test_answer_prompt_ends_with_answer_and_code_parse_keeps_the_reply() -> None:
    from gear_repro.methods.t2rag.parse import code_answer

    ans = render("t2rag_answer", query="Who is X?", clues="Clue 1: X | is | Y")[0]["content"]
    assert [ln for ln in ans.splitlines() if ln.strip()][-1] == "Answer:"  # App. E; TRAG.py:1109
    assert code_answer("Paris\nBecause it is the capital.") == "Paris\nBecause it is the capital."
    assert code_answer("X Answer: Paris") == "Paris" and code_answer("  Amiens ") == "Amiens"


def test_a_qa_bound_with_a_self_answering_method_is_refused(toy_env, tmp_path: Path) -> None:
    """agent=t2rag qa=true qa_reader.mode=gold ran T²RAG's own answers and stood as the paper's "Gold Passages"
    bound: refused before any question."""
    from gear_repro.pipeline.runner import Runner
    from gear_repro.utils.errors import ConfigError

    cfg, res = toy_env[1](["qa=true", "qa_reader.mode=gold"], SCRIPT)
    with pytest.raises(ConfigError, match=r"qa_reader\.mode=gold is a bound of the K\.3 reader, but this method "
                                          r"answers with its own prompt"):
        Runner(cfg, tmp_path / "run", resources=res).run()
    assert res.llm.calls == []


def test_unparsed_replies_reach_agent_stats_and_the_warning(toy_env, tmp_path: Path, capsys) -> None:
    """Every reply empty: T²RAG's counters sat only in trace['t2rag'], so metrics.json had no agent_stats and the
    run no warning; GEAR's rewriter fallbacks are warned about too."""
    from gear_repro.cli.run import _warn_reply_failures
    from gear_repro.pipeline.runner import Runner

    cfg, res = toy_env[1](["dataset.limit=1"], {"decompose": "", "decompose_retry": "", "answer": ""},
                          reload=("dataset",))
    metrics = Runner(cfg, tmp_path / "run", resources=res).run()
    assert metrics["agent_stats"]["decompose_failed"] == 1 and metrics["agent_stats"]["decompose_retry_failed"] == 1
    _warn_reply_failures(metrics["agent_stats"])
    err = capsys.readouterr().err
    assert "WARNING: LLM replies that did not parse" in err and "decompose_retry_failed=1" in err
    _warn_reply_failures({"rewrite_fallback": 3})
    assert "rewrite_fallback=3" in capsys.readouterr().err


# -- reading=code: the resolve reply's parse, the resolved set and the proposition -> passage map (TRAG.py) ---------
def _parts(clues) -> list[list[str]]:
    return [list(c.parts) for c in clues]


@pytest.mark.parametrize("reply, code, lenient", [
    ("**Fully Resolved Clue 1:**\nSubject: A\nPredicate: b\nObject: c", [], [["A", "b", "c"]]),  # Markdown header
    ("Fully Resolved Clue 1: Subject: A Predicate: b Object: c", [], [["A", "b", "c"]]),  # fields on the header line
    ("Fully Resolved Clue 1:\n- Subject: A\n- Predicate: b\n- Object: c", [], [["A", "b", "c"]]),  # bulleted fields
    ('Fully Resolved Clue 1:\nSubject: "A"\nPredicate: b\nObject: c', [['"A"', "b", "c"]], [["A", "b", "c"]]),
    # an echoed fuzzy clue's fields overwrite the open clue's (no header of the code's opens a new one)
    ("Fully Resolved Clue 1:\nSubject: A\nPredicate: b\nObject: c\nFuzzy Clue 1:\nSubject: ?x\nPredicate: d\n"
     "Object: ?", [["?x", "d", "?"]], [["A", "b", "c"]]),
    ("Fully Resolved Clue 1:\nSubject: A\nPredicate: b\n\nFully Resolved Clue 2:\nSubject: C\nPredicate: d\n"
     "Object: e", [["C", "d", "e"]], [["C", "d", "e"]]),  # a clue without its Object: dropped by both
])
def test_code_resolve_parse_is_trags_strict_one(reply, code, lenient) -> None:
    """TRAG.py:944-978 reads a resolve reply line by line: the header and the field names must start the stripped
    line, values are kept verbatim, and a clue counts only with all three fields; reading=code parsed it with our
    lenient repairs (Markdown, fields on one line, bullets, quotes)."""
    from gear_repro.methods.t2rag.parse import parse_resolution_code

    assert _parts(parse_resolution_code(reply).clues) == code
    assert _parts(parse_resolution(reply).clues) == lenient
    assert parse_resolution_code(reply).status == ("ok" if code else "failed")


def test_code_resolve_parse_takes_the_code_header_and_the_one_asked_for() -> None:
    from gear_repro.methods.t2rag.parse import parse_resolution_code
    from gear_repro.methods.t2rag.settings import NEW_CLUE_HEADERS

    traceable = "Newly Traceable Clue 1:\nSubject: A\nPredicate: b\nObject: ?"
    searchable = traceable.replace("Traceable", "Searchable")
    assert _parts(parse_resolution_code(traceable).searchable) == [["A", "b", "?"]]
    assert parse_resolution_code(searchable, NEW_CLUE_HEADERS["code"]).status == "failed"  # TRAG.py:960 only
    assert _parts(parse_resolution_code(searchable, NEW_CLUE_HEADERS["paper"]).searchable) == [["A", "b", "?"]]


RESOLVE_WITH_PLACEHOLDER = """Fully Resolved Clue 1:
Subject: France
Predicate: president
Object: Emmanuel Macron

Fully Resolved Clue 2:
Subject: Emmanuel Macron
Predicate: born in
Object: ?"""


def test_code_resolved_update_keeps_a_fully_resolved_clue_with_a_placeholder() -> None:
    """TRAG.py:1231 extends the resolved clues with every clue of the "Fully Resolved" section, a '?' or not; our
    update re-classified it as searchable. ``reclassify`` (the paper reading) keeps ours."""
    from gear_repro.methods.t2rag.parse import parse_resolution_code

    res = parse_resolution_code(RESOLVE_WITH_PLACEHOLDER)
    code = TripletState.from_clues([_clue("France | president | ?p"), _clue("?p | born in | ?")])
    counts = code.update(res.clues, res.searchable, carry_fuzzy=False, resolved_update="code")
    assert _parts(code.resolved) == [["France", "president", "Emmanuel Macron"], ["Emmanuel Macron", "born in", "?"]]
    assert code.searchable == [] and not code.open
    assert counts["resolved_with_placeholder"] == 1 and counts["reclassified"] == 0
    ours = TripletState.from_clues([_clue("France | president | ?p"), _clue("?p | born in | ?")])
    counts = ours.update(res.clues, res.searchable, carry_fuzzy=False, resolved_update="reclassify")
    assert _parts(ours.resolved) == [["France", "president", "Emmanuel Macron"]]
    assert _parts(ours.searchable) == [["Emmanuel Macron", "born in", "?"]] and ours.open
    assert counts["resolved_with_placeholder"] == 0 and counts["reclassified"] == 1


@pytest.mark.slow
def test_code_reading_stops_when_the_reply_calls_a_placeholder_clue_resolved(toy_env) -> None:
    script = {"decompose": "Triples:\nFrance | president | ?p\n?p | born in | ?",
              ("resolve", 1): RESOLVE_WITH_PLACEHOLDER, ("resolve", 2): RESOLVE_TOY_2, "answer": "Amiens"}
    res, agent = build(toy_env, script)  # reading=code
    assert (agent.resolve_parse, agent.resolved_update) == ("code", "code")
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert t["stop"] == "all_resolved" and t["iterations"] == 1 and t["counters"]["resolved_with_placeholder"] == 1
    assert t["answer_context"] == [["France", "president", "Emmanuel Macron"], ["Emmanuel Macron", "born in", "?"]]
    assert [s for s, _ in res.llm.stages()] == ["decompose", "resolve", "answer"]
    res, agent = build(toy_env, script, ["agent.resolved_update=reclassify"])
    out = agent.run(res.dataset.questions[0], 15)
    t = out.trace["t2rag"]
    assert t["iterations"] == 2 and t["answer_context"][-1] == ["Emmanuel Macron", "born in", "Amiens"]


@pytest.mark.slow
def test_code_reading_maps_a_proposition_to_the_last_passage_it_came_from(toy_env) -> None:
    """TRAG.py:196-210 keys proposition_to_passage by the text "s p o", so a text extracted from two passages brings
    only the later one (the toy's duplicate: passage 3's triple, repeated for passage 4)."""
    res, agent = build(toy_env, {})  # reading=code
    assert agent.proposition_passage == "code"
    retriever, passage_of, text_of = agent._index()
    same = sorted(t for t, x in text_of.items() if x == "Emmanuel Macron born in Amiens")
    assert len(same) == 2 and {passage_of[t] for t in same} == {"4"}
    got = adaptive_retrieve(retriever, passage_of, text_of, ["Emmanuel Macron born in"], 2, 50)
    assert got.propositions[0]["text"] == "Emmanuel Macron born in Amiens"
    # passage 3 (Macron's own, gold of the toy question) is not reached in the top 2: the next proposition is passage 2's
    assert got.propositions[0]["passage_ids"] == ["4"] and got.passages.ids == ["4", "2"]
    _, own = build(toy_env, {}, ["agent=t2rag_paper"])
    assert {own._index()[1][t] for t in same} == {"3", "4"}
