"""A real slice of the bundled MuSiQue sample (its first passages, their triples and first questions) and the
GEAR run built over it with a scripted LLM: the fixture and builders of the GEAR, QA and T²RAG logic tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import SAMPLE
from tests.helpers.doubles import ScriptedLLM
from tests.helpers.runs import compose_config

N_PASSAGES = 60  # first passages of the sample (hold the gold passages of its first questions)
N_QUESTIONS = 3

READ = ('("Journal of Psychotherapy Integration", "published by", "American Psychological Association"), '
        '("American Psychological Association", "first president", "G. Stanley Hall")')
GIST_1 = 'Facts: ("Journal of Psychotherapy Integration", "published by", "American Psychological Association")'
GIST_2 = ('("journal of psychotherapy  integration", "Published by", "American Psychological Association"), '
          '("American Psychological Association", "first president", "G. Stanley Hall")')
NO = "Answerable: No\nWhy: The facts do not say who the first president was."
YES = "Answerable: Yes\nAnswer: G. Stanley Hall"
REWRITE = "Next Question: Who was the first president of the American Psychological Association?"


def make_slice(dest: Path, n_passages: int = N_PASSAGES, n_questions: int = N_QUESTIONS) -> Path:
    """A canonical dataset folder: the sample's first passages, their triples and first questions."""
    dest.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(x) for x in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    keep = {r["id"] for r in rows[:n_passages]}
    qs = [json.loads(x) for x in (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    qs = [q for q in qs if set(q["gold_ids"]) <= keep][:n_questions]
    trs = [json.loads(x) for x in (SAMPLE / "triples.jsonl").read_text(encoding="utf-8").splitlines()]
    for name, data in (("corpus.jsonl", rows[:n_passages]), ("questions.jsonl", qs),
                       ("triples.jsonl", [t for t in trs if t["passage_id"] in keep])):
        (dest / name).write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return dest


compose_cfg = compose_config  # the project config with overrides


SHARED = ("dataset", "backend", "embedder", "passages", "triples", "triple_index")
BASE_OVERRIDES = ["agent=gear", "embedder=minilm", "retriever=bm25", "beam.scorer=sum", "run.progress=false",
                  "embedder.show_progress=false", "dataset.name=musique_slice"]


@pytest.fixture(scope="module")
def slice_env(tmp_path_factory):
    """(dataset dir, Resources factory) sharing one embedder and one set of indexes across the module."""
    if not (SAMPLE / "corpus.jsonl").exists():
        pytest.skip(f"bundled sample missing at {SAMPLE}")
    from gear_repro.config import validate
    from gear_repro.pipeline.resources import Resources

    root = tmp_path_factory.mktemp("gear")  # embeddings/indexes: the shared content-hashed $GEAR_CACHE
    data = make_slice(root / "musique_slice")
    shared: dict = {}  # the first build's dataset, embedder and indexes, given to every later Resources

    def make(overrides: list[str] | None = None, script: dict | None = None):
        cfg = validate(compose_cfg([*BASE_OVERRIDES, f"dataset.path={data}", *(overrides or [])]))
        if not shared:
            first = Resources(cfg)
            shared.update({name: getattr(first, name) for name in SHARED})
        return cfg, Resources(cfg, **shared, llm=ScriptedLLM(script or {}))

    return data, make


def build(slice_env, script: dict, overrides: list[str] | None = None):
    from gear_repro.pipeline.wiring import build_method

    _, make = slice_env
    cfg, res = make(overrides, script)
    agent = build_method(cfg, res)
    return cfg, res, agent


