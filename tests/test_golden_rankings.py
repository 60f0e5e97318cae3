"""Golden rankings: every method's rankings on 5 questions of the bundled MuSiQue sample, pinned.

The corpus is the sample's first 100 passages (the 5 questions' own paragraphs) with their triples, so that
every index builds in seconds.

Written before the move to one folder per method (issue 24) and unchanged by it: a refactor that changes a ranking,
a per-round list or an answer fails here. The LLM is ``ScriptedLLM`` (replies by prompt hash, so a changed prompt
changes the path too) and the embedder ``HashEmbedder`` (no model), so the test runs in the fast suite.

A deliberate change of behaviour regenerates the file: ``GOLDEN_UPDATE=1 pytest tests/test_golden_rankings.py``,
and the diff of ``tests/golden/rankings.json`` goes into the commit that changes behaviour.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import SAMPLE, write_jsonl
from tests.helpers.doubles import HashEmbedder, ScriptedLLM
from tests.helpers.runs import run_with_doubles

GOLDEN = Path(__file__).parent / "golden" / "rankings.json"
N_PASSAGES = 100
BASE = ["dataset.name=musique", "dataset.limit=5", "run.progress=false", "qa=true", "embedder=minilm"]
METHODS: dict[str, list[str]] = {
    "bm25": ["retriever=bm25"],
    "sbert": ["retriever=sbert"],
    "hybrid+naive": ["retriever=hybrid", "expansion=naive"],
    "bm25+sync": ["retriever=bm25", "expansion=sync"],
    "gear": ["agent=gear", "retriever=hybrid"],
    "hipporag": ["agent=hipporag"],
    "ircot": ["agent=ircot", "retriever=bm25"],
    "hipporag_ircot": ["agent=hipporag_ircot"],
    "t2rag": ["agent=t2rag"],
}
# GRIEVER's entity matcher reads token vectors of a real sentence-transformers model (MiniLM)
WITH_MODEL: dict[str, list[str]] = {
    "griever": ["retriever=griever"],
    "gear_griever": ["agent=gear", "retriever=griever", "agent.max_rounds=2"],
}
DEPTH = 15  # ids kept per list


def digest(rec: dict) -> dict:
    """What is pinned of a record: every saved ranking and per-round ranking (top 15), the answer."""
    out = {"rankings": {k: v[:DEPTH] for k, v in sorted(rec["rankings"].items())},
           "rounds": [r.get("ranking", [])[:DEPTH] for r in rec.get("rounds") or []],
           "answer": rec.get("answer"), "error": rec.get("error")}
    return out


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture(scope="module")
def golden_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's first 5 questions over its first 100 passages and their triples."""
    d = tmp_path_factory.mktemp("golden_data")
    corpus = _rows(SAMPLE / "corpus.jsonl")[:N_PASSAGES]
    keep = {p["id"] for p in corpus}
    questions = _rows(SAMPLE / "questions.jsonl")[:5]
    assert all(set(q["gold_ids"]) <= keep for q in questions)
    write_jsonl(d / "corpus.jsonl", corpus)
    write_jsonl(d / "questions.jsonl", questions)
    write_jsonl(d / "triples.jsonl", [t for t in _rows(SAMPLE / "triples.jsonl") if t["passage_id"] in keep])
    return d


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, golden_data: Path):
    """One $GEAR_CACHE for the module (indexes built once, shared by the methods); yields the run overrides."""
    old = os.environ.get("GEAR_CACHE")
    os.environ["GEAR_CACHE"] = str(tmp_path_factory.mktemp("gear_cache"))
    yield [*BASE, f"dataset.path={golden_data}"]
    if old is None:
        os.environ.pop("GEAR_CACHE")
    else:
        os.environ["GEAR_CACHE"] = old


def check_golden(method: str, overrides: list[str], run_dir: Path, embedder) -> None:
    """Run ``method`` on the 5 questions and compare (or, with GOLDEN_UPDATE=1, store) its digest."""
    records = run_with_doubles(overrides, run_dir, llm=ScriptedLLM(), embedder=embedder)
    got = {rec["id"]: digest(rec) for rec in records}
    assert len(got) == 5 and not any(d["error"] for d in got.values())
    golden = json.loads(GOLDEN.read_text(encoding="utf-8")) if GOLDEN.exists() else {}
    if os.environ.get("GOLDEN_UPDATE"):
        golden[method] = got
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert method in golden, f"no golden rankings for {method}: run with GOLDEN_UPDATE=1"
    assert got == golden[method]


@pytest.mark.parametrize("method", list(METHODS))
def test_rankings_match_golden(method: str, cache, tmp_path: Path) -> None:
    check_golden(method, [*cache, *METHODS[method]], tmp_path / method, HashEmbedder())


@pytest.fixture(scope="module")
def minilm():
    from hydra.utils import instantiate

    from tests.helpers.runs import compose_config

    return instantiate(compose_config(["embedder=minilm", "embedder.show_progress=false"]).embedder)


@pytest.mark.slow
@pytest.mark.parametrize("method", list(WITH_MODEL))
def test_rankings_with_a_model_match_golden(method: str, cache, minilm, tmp_path: Path) -> None:
    check_golden(method, [*cache, *WITH_MODEL[method]], tmp_path / method, minilm)
