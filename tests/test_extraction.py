"""Offline triple extraction (K.1, §6.2) on 5 real MuSiQue passages with a scripted stand-in LLM:
outputs, stats numbers, reference comparison, resume after a kill (no duplicates), failed calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from gear_repro.data.canonical import load_triples
from gear_repro.extraction import extract_triples, run_extraction
from gear_repro.types import Passage, Triple
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.io import read_json, read_jsonl
from tests.helpers.doubles import ExtractionLLM, ScriptedLLM
from tests.helpers.requirements import missing

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "musique_sample"
RAW = Path(os.environ.get("GEAR_SHARED_DATA", REPO.parent / "shared" / "data")) / "musique_sample"
OPENIE = RAW / "openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json"


def load_sample() -> tuple[list[Passage], list[Triple] | None]:
    """The bundled canonical sample if prepared, else the shared raw HippoRAG files."""
    if (SAMPLE / "corpus.jsonl").exists():
        from gear_repro.data.dataset import load_dataset

        ds = load_dataset(SAMPLE)
        return ds.passages, ds.triples
    if not (RAW / "musique_train_100_corpus.json").exists():
        missing("no MuSiQue sample available")
    from gear_repro.data.converters import load_hipporag_corpus
    from gear_repro.data.openie import import_hipporag_openie

    passages = load_hipporag_corpus(RAW / "musique_train_100_corpus.json")
    return passages, import_hipporag_openie(OPENIE, passages)[0]


@pytest.fixture(scope="module")
def sample() -> tuple[list[Passage], list[Triple] | None]:
    passages, ref = load_sample()
    return passages[:5], ref


def test_extraction_outputs_and_stats(sample, tmp_path: Path) -> None:
    passages, ref = sample
    llm = ExtractionLLM(passages)
    stats = extract_triples(passages, llm, tmp_path, reference=ref, progress=False)
    triples = load_triples(tmp_path / "triples.jsonl")  # canonical and valid
    p = passages
    assert [(t.id, t.passage_id) for t in triples] == [
        (f"{p[0].id}-0", p[0].id), (f"{p[0].id}-1", p[0].id), (f"{p[1].id}-0", p[1].id),
        (f"{p[4].id}-0", p[4].id), (f"{p[4].id}-1", p[4].id), (f"{p[4].id}-2", p[4].id)]
    assert triples[0].as_tuple() == (p[0].title, "related to", "X")
    assert stats["n_done"] == 5 and stats["n_remaining"] == 0 and stats["triples"] == 6
    assert stats["triples_per_passage"] | {} == {"mean": 1.2, "median": 1, "min": 0, "max": 3, "p90": 3,
                                                 "histogram": {"0": 2, "1": 1, "2": 1, "3": 1}}
    assert stats["passages_without_triples"] == 2
    assert stats["parse"]["failures"] == 1 and stats["parse"]["repairs"] == 1
    assert stats["parse"]["dropped_triples"] == 2  # the 2-part triple and the cut-off one
    assert stats["tokens"]["prompt"] == 100 * 5 + 10 and stats["tokens"]["completion"] == 50
    assert stats["tokens"]["total_per_passage"] == 112.0
    assert stats["calls"] == {"cached": 0, "uncached": 5}
    assert stats["passages_per_min_llm"] == 120.0  # 5 calls x 0.5 s
    log = read_jsonl(tmp_path / "extraction_log.jsonl")
    assert [r["passage_id"] for r in log] == [x.id for x in passages]
    assert log[0]["entities"] == [p[0].title, "X"]
    assert read_json(tmp_path / "extraction_stats.json")["triples"] == 6
    if ref is not None:
        cmp_ = stats["reference"]
        ref_n = sum(1 for t in ref if t.passage_id in {x.id for x in passages})
        assert cmp_["passages"] == 5 and cmp_["ours_triples"] == 6 and cmp_["reference_triples"] == ref_n > 0
        assert cmp_["ratio_ours_to_reference"] == round(6 / ref_n, 3)


def test_rerun_skips_done_passages(sample, tmp_path: Path) -> None:
    passages, _ = sample
    extract_triples(passages[:3], ExtractionLLM(passages), tmp_path, progress=False)
    llm = ExtractionLLM(passages)
    stats = extract_triples(passages, llm, tmp_path, progress=False)
    assert llm.calls == [p.title for p in passages[3:]]
    ids = [t["id"] for t in read_jsonl(tmp_path / "triples.jsonl")]
    assert len(ids) == len(set(ids)) == 6 and stats["n_done"] == 5


def test_torn_state_is_repaired(sample, tmp_path: Path) -> None:
    """Triples written but the log record lost (kill in between), plus a half-written line."""
    passages, _ = sample
    extract_triples(passages[:1], ExtractionLLM(passages), tmp_path, progress=False)
    with open(tmp_path / "triples.jsonl", "a") as f:
        f.write(json.dumps({"id": f"{passages[1].id}-0", "subject": "s", "predicate": "p", "object": "o",
                            "passage_id": passages[1].id}) + "\n")
        f.write('{"id": "half-writ')
    with open(tmp_path / "extraction_log.jsonl", "a") as f:
        f.write('{"passage_id": "tor')
    stats = extract_triples(passages, ExtractionLLM(passages), tmp_path, progress=False)
    rows = read_jsonl(tmp_path / "triples.jsonl")
    assert len(rows) == len({r["id"] for r in rows}) == 6 == stats["triples"]
    assert not any(r["subject"] == "s" for r in rows)


_CHILD = """
from tests.helpers.doubles import ExtractionLLM
from tests.test_extraction import load_sample
from gear_repro.extraction import extract_triples
passages = load_sample()[0][:5]
extract_triples(passages, ExtractionLLM(passages, block_after=2), {out!r}, progress=False)
"""


def test_resume_after_kill(sample, tmp_path: Path) -> None:
    passages, _ = sample
    out = tmp_path / "run"
    code = _CHILD.format(out=str(out))
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    log = out / "extraction_log.jsonl"
    # the child finishes two passages, then its third call blocks forever: the kill lands mid-run, whatever the load
    while not (log.exists() and log.read_text().count("\n") >= 2):
        assert proc.poll() is None, "child ended before it could be killed"
        time.sleep(0.05)  # polling only: no result depends on timing
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    before = {r["passage_id"] for r in read_jsonl(log)}
    assert before == {passages[0].id, passages[1].id}
    llm = ExtractionLLM(passages)
    stats = extract_triples(passages, llm, out, progress=False)
    assert set(llm.calls) == {p.title for p in passages if p.id not in before}
    rows = read_jsonl(out / "triples.jsonl")
    assert len(rows) == len({r["id"] for r in rows}) == 6
    assert [r["passage_id"] for r in read_jsonl(log)].count(passages[0].id) == 1
    assert stats["n_done"] == 5 and stats["triples"] == 6


def test_failed_calls_are_counted_and_retried_next_run(sample, tmp_path: Path) -> None:
    passages, _ = sample
    stats = extract_triples(passages, ExtractionLLM(passages, fail_ids={passages[0].id}), tmp_path, progress=False)
    assert stats["session"]["call_errors"] == 1 and stats["n_done"] == 4 and stats["n_remaining"] == 1
    llm = ExtractionLLM(passages)
    stats = extract_triples(passages, llm, tmp_path, progress=False)
    assert llm.calls == [passages[0].title] and stats["n_done"] == 5


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_output_in_passage_order_whatever_the_workers(sample, tmp_path: Path, seed: int) -> None:
    """4 workers with random delays write the same files, byte for byte, as one worker."""
    passages, _ = sample
    extract_triples(passages, ExtractionLLM(passages), tmp_path / "one", progress=False)
    extract_triples(passages, ExtractionLLM(passages, seed=seed, concurrency=4), tmp_path / "four", progress=False)
    assert (tmp_path / "four" / "triples.jsonl").read_bytes() == (tmp_path / "one" / "triples.jsonl").read_bytes()
    logs = [[r["passage_id"] for r in read_jsonl(tmp_path / d / "extraction_log.jsonl")] for d in ("one", "four")]
    assert logs[0] == logs[1] == [p.id for p in passages]


def test_failed_calls_give_one_error(sample, tmp_path: Path) -> None:
    """stage=extract with failed calls must fail, with one message naming the cause."""
    from gear_repro.extraction import extraction_error

    passages, _ = sample
    stats = extract_triples(passages[:2], ExtractionLLM(passages, fail_ids={p.id for p in passages[:2]}), tmp_path,
                            progress=False)
    err = extraction_error(stats)
    assert err is not None and "2 LLM call(s) failed, 0/2 passages done" in str(err)
    assert "retries exhausted (scripted)" in str(err)
    assert extraction_error(extract_triples(passages[:2], ExtractionLLM(passages), tmp_path, progress=False)) is None


def test_an_extraction_without_a_single_triple_is_an_error(sample, tmp_path: Path, caplog) -> None:
    """Every reply unparsable (a wrong model or setting): a warning names the failures and the stage fails, rather
    than exiting 0 with an empty triples.jsonl."""
    from gear_repro.extraction import extraction_error

    passages, _ = sample
    with caplog.at_level("WARNING", logger="gear_repro.extraction.extract"):
        stats = extract_triples(passages[:2], ScriptedLLM({"extract": "I cannot do that."}), tmp_path,
                                progress=False)
    assert "extraction: 2 of 2 replies did not parse" in caplog.text
    err = extraction_error(stats)
    assert err is not None and "no triple from any of the 2 passages done (2 replies did not parse" in str(err)


def test_run_extraction_honours_limit_passages(sample, tmp_path: Path) -> None:
    passages, ref = sample
    cfg = OmegaConf.create({"dataset": {"limit_passages": 2}, "run": {"progress": False}})
    dataset = SimpleNamespace(passages=passages, triples=ref, name="musique_sample")
    stats = run_extraction(cfg, dataset, ExtractionLLM(passages), tmp_path)
    assert stats["n_passages"] == 2 and stats["n_done"] == 2 and stats["triples"] == 3
    assert stats["dataset"] == "musique_sample"
    assert (tmp_path / "extraction_stats.json").exists()


def test_run_extraction_refuses_a_window_the_k1_prompt_does_not_fit(sample, tmp_path: Path) -> None:
    passages, ref = sample
    cfg = OmegaConf.create({"dataset": {"limit_passages": 2}, "run": {"progress": False}})
    dataset = SimpleNamespace(passages=passages, triples=ref, name="musique_sample")
    model = ScriptedLLM({"extract": "[]"}, context_window=50, default_params={"max_tokens": 16})
    with pytest.raises(ConfigError, match=r"the K\.1 extraction prompt without passages takes \d+ tokens, more than "
                                          r"llm\.context_window \(50\)"):
        run_extraction(cfg, dataset, model, tmp_path)
    assert model.calls == [] and not (tmp_path / "extraction_log.jsonl").exists()  # before any passage


def test_extraction_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    """A missing dataset, an unknown --llm and --limit 0 (which meant "all") are one line, no traceback."""
    from gear_repro.extraction.__main__ import main

    with pytest.raises(SystemExit, match=r"^error: dataset folder not found: .*nowhere"):
        main(["--dataset", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit) as e:
        main(["--dataset", str(tmp_path), "--limit", "0", "--out", str(tmp_path / "o")])
    assert e.value.code == 2 and "--limit must be a positive number" in capsys.readouterr().err


def test_extraction_cli_adds_keys_and_checks_request_params_before_any_passage(tmp_path: Path) -> None:
    """``--set +params.x=1`` adds a key (as Hydra's own hint says), and an unknown request param is one line before
    any call (the endpoint here is closed: a call would fail differently)."""
    from gear_repro.extraction.__main__ import llm_override, main

    assert [llm_override(s) for s in ("max_tokens=5", "+params.seed=1", "++params.n=1", "~params.stop")] == \
        ["llm.max_tokens=5", "+llm.params.seed=1", "++llm.params.n=1", "~llm.params.stop"]
    with pytest.raises(SystemExit, match=r"^error: llm\.params\.bogus is not a parameter of the chat completions"):
        main(["--dataset", str(SAMPLE), "--llm", "openai_compatible", "--limit", "1", "--out", str(tmp_path / "o"),
              "--set", "base_url=http://127.0.0.1:9/v1", "+params.bogus=1"])
    assert not (tmp_path / "o" / "extraction_log.jsonl").exists()
