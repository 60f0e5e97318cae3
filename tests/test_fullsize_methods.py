"""The METHODS part of the full-size rehearsal (docs/scale.md, "Every method at full size"): the stand-in endpoint's
replies to the multi-step methods' prompts parse, and scripts/fullsize_table.py reads a rehearsal folder's method
rows (/usr/bin/time -v output, du, the run log's capacity line, run.json timings, predictions)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gear_repro.llm.parsing import parse_named_entities, parse_reason, parse_rewrite, parse_triples
from gear_repro.methods.t2rag.clues import Clue
from gear_repro.methods.t2rag.method import _code_blocks
from gear_repro.methods.t2rag.parse import parse_decomposition_code, parse_resolution_code
from gear_repro.prompts import format_passages, render
from tests.helpers.standin_server import standin_reply

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

QUESTION = "Where was Emmanuel Macron born?"
DOCS = [("Amiens", "Amiens lies on the Somme. Emmanuel Macron was born there.")]


def reply(name: str, **variables: object) -> str:
    return standin_reply(render(name, **variables)[-1]["content"])


def test_standin_answers_hipporag_query_ner_whose_demo_is_an_earlier_turn() -> None:
    assert parse_named_entities(reply("hipporag_ner", question=QUESTION)).entities == ["Where", "Emmanuel Macron"]


def test_standin_replies_to_gear_prompts_parse() -> None:
    read = parse_triples(reply("reader", docs=DOCS, query=QUESTION))
    assert read.triples == [("Amiens", "related to", "Somme"), ("Somme", "related to", "Emmanuel Macron")]
    assert not parse_triples(reply("reader_gist", docs=DOCS, query=QUESTION, triples='("a", "b", "c")')).failed
    two, four = ", ".join(['("a", "b", "c")'] * 2), ", ".join(['("a", "b", "c")'] * 4)
    assert parse_reason(reply("reason", query=QUESTION, triples=two)) == \
        (False, "The facts do not name the answer yet.", True)
    assert parse_reason(reply("reason", query=QUESTION, triples=four)) == (True, "c", True)
    assert parse_rewrite(reply("rewrite", query=QUESTION, triples=two, reason="x")) == \
        ("What is Emmanuel Macron known for?", True)


def test_standin_replies_to_ircot_and_t2rag_prompts_parse() -> None:
    passages = format_passages(DOCS)
    first = reply("ircot", demos="", question=QUESTION, thoughts="", passages=passages)
    assert first == "Amiens is related to Somme."
    assert reply("ircot", demos="", question=QUESTION, thoughts=first, passages=passages) == "So the answer is: Somme."
    parsed = parse_decomposition_code(reply("t2rag_decompose_code", query=QUESTION))
    assert parsed.status == "ok" and parsed.clues == [Clue("Emmanuel Macron", "related to", "?")]
    resolve = reply("t2rag_resolve_code", example_propositions="- Amiens lies on the Somme", query=QUESTION,
                    passages_section="", propositions="- Amiens lies on the Somme", fuzzy="", resolved_section="",
                    traceable=_code_blocks([Clue("Emmanuel Macron", "born in", "?")], "Traceable Clue", ""))
    assert parse_resolution_code(resolve).clues == [Clue("Emmanuel Macron", "born in", "Amiens")]


TIME_V = """\tCommand being timed: "python -m gear_repro.cli.run"
\tUser time (seconds): 80.00
\tSystem time (seconds): 5.00
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:40.00
\tMaximum resident set size (kbytes): 2097152
\tExit status: 0
"""


def test_method_rows_from_a_rehearsal_folder(tmp_path: Path) -> None:
    from fullsize_table import method_rows, wall_seconds

    assert wall_seconds("1:02:03") == 3723 and wall_seconds("1:40.50") == 100.5
    assert method_rows(tmp_path) == []
    run = tmp_path / "runs" / "gear_hybrid"
    run.mkdir(parents=True)
    (tmp_path / "gear_hybrid.time").write_text(TIME_V)
    (tmp_path / "gear_hybrid.du").write_text(f"{3 * 1024 ** 3}\t/out/cache\n{1024 ** 3 // 2}\t/out/runs/gear_hybrid\n")
    (tmp_path / "gear_hybrid.log").write_text(
        "[gear_repro][INFO] - capacity: the embedding caches need ~0.0 GiB of disk in /out/cache/embeddings "
        "(50.0 GiB free) and ~2.4 GiB of memory (20.0 GiB available)\n")
    (run / "run.json").write_text(json.dumps({"timings": {"setup_s": 50.0, "questions_s": 30.0}}))
    # the first question builds what the method builds lazily: counted with the build, not in the percentiles
    preds = [{"id": str(i), "timings": {"total_s": s}} for i, s in enumerate((10.0, 0.1, 0.2, 0.3, 0.4))]
    preds.append({"id": "5", "error": "boom", "timings": {"total_s": 0.5}})
    (run / "predictions.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    (tmp_path / "hipporag.time").write_text(TIME_V.replace("Exit status: 0", "Exit status: 1"))  # no run folder
    (tmp_path / "bm25.time").write_text(TIME_V)  # not a METHODS run
    header, _, gear, hippo = method_rows(tmp_path)  # in the rehearsal's order
    assert header.startswith("| method | questions (errors) | build + first question wall s | other questions wall s |")
    cells = [c.strip() for c in gear.strip("|").split("|")]
    assert cells[:5] == ["GEAR (Hybrid)", "6 (1)", "80.0", "20.0", "0.300 / 0.480"]
    assert cells[5:] == ["2.00", "3.000 / 512.0", "2.40", "1.20", "exit 0"]
    assert [c.strip() for c in hippo.strip("|").split("|")][:4] == ["HippoRAG v1", "0 (0)", "100.0", "—"]
    assert hippo.endswith("| — | — | — | exit 1 |")


def test_the_estimate_table_prices_every_method_and_tries_the_settings_the_check_names(monkeypatch, capsys) -> None:
    """scripts/estimate_methods.py (docs/scale.md, "Every method at 2Wiki's size: the start-up check's estimates") on
    the bundled sample with a tiny machine: a row per method, and for each refused one the check's named overrides
    tried (HippoRAG's "a higher hipporag.synonym_threshold" is advice, not an override)."""
    import estimate_methods

    monkeypatch.setattr(sys, "argv", ["estimate_methods.py", str(REPO / "data" / "musique_sample"), "embedder=minilm",
                                      "--memory-gib", "1.0"])
    estimate_methods.main()
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0][2:] for r in rows] == [label for label, _ in estimate_methods.METHODS.values()]
    hippo = next(r for r in rows if r.startswith("| HippoRAG v1 |"))
    assert "hipporag.synonyms=false" in hippo and "a higher" not in hippo
