"""Shared fixtures: offline model settings, a toy canonical dataset, Hydra composition."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.requirements import STRICT, missing

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "data" / "musique_sample"
SHARED_DATA = Path(os.environ.get("GEAR_SHARED_DATA", REPO.parent / "shared" / "data"))

TOY_PASSAGES = [
    ("Paris", "Paris is the capital and largest city of France."),
    ("Berlin", "Berlin is the capital of Germany."),
    ("France", "France is a country in Western Europe; its president is Emmanuel Macron."),
    ("Emmanuel Macron", "Emmanuel Macron was born in Amiens in 1977."),
    ("Amiens", "Amiens is a city in northern France, on the Somme river."),
    ("Somme", "The Somme is a river in Picardy."),
]
TOY_QUESTIONS = [
    {"id": "q1", "question": "Where was the president of France born?", "answers": ["Amiens"],
     "gold_ids": ["2", "3"], "type": "2hop", "dataset": "toy"},
    {"id": "q2", "question": "What is the capital of Germany?", "answers": ["Berlin"], "gold_ids": ["1"],
     "type": "1hop", "dataset": "toy"},
    {"id": "q3", "question": "Which river flows through the city where Macron was born?", "answers": ["Somme"],
     "gold_ids": ["3", "4"], "type": "2hop", "dataset": "toy"},
]
TOY_TRIPLES = [
    ("Paris", "capital of", "France", "0"), ("Berlin", "capital of", "Germany", "1"),
    ("France", "president", "Emmanuel Macron", "2"), ("Emmanuel Macron", "born in", "Amiens", "3"),
    ("Amiens", "located on", "Somme", "4"), ("Somme", "located in", "Picardy", "5"),
]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--strict-missing", action="store_true",
                     help="a missing model, data file or optional package fails the test instead of skipping it")


def pytest_configure(config: pytest.Config) -> None:
    STRICT["on"] = bool(config.getoption("--strict-missing"))


class ModelLoadInFastTest(RuntimeError):
    """A test not marked ``slow`` tried to load a real model."""


@pytest.fixture(autouse=True)
def _models_only_in_slow_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests that load a real model (an SBERT embedder or the llama.cpp server) are marked ``slow``, so that
    ``make test-fast`` needs none: loading one from a test without the mark is an error."""
    if request.node.get_closest_marker("slow") is not None:
        return

    def refuse(*_a, **_k):
        raise ModelLoadInFastTest(f"{request.node.nodeid} loads a real model: mark it @pytest.mark.slow")

    monkeypatch.setattr("gear_repro.embedding.embedder.SentenceEmbedder._load_model", refuse)
    monkeypatch.setattr("gear_repro.llm.server.LlamaServer.start", refuse)


@pytest.fixture
def toy_dir(tmp_path: Path) -> Path:
    d = tmp_path / "toy"
    d.mkdir()
    write_jsonl(d / "corpus.jsonl", [{"id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(TOY_PASSAGES)])
    write_jsonl(d / "questions.jsonl", TOY_QUESTIONS)
    write_jsonl(d / "triples.jsonl", [{"id": f"{p}-{i}", "subject": s, "predicate": r, "object": o, "passage_id": p}
                                      for i, (s, r, o, p) in enumerate(TOY_TRIPLES)])
    return d


@pytest.fixture
def compose():
    """Compose the project's Hydra config with overrides (Hydra compose API)."""
    from hydra import compose as _compose
    from hydra import initialize_config_dir

    from gear_repro.config import register_configs
    from gear_repro.utils.paths import config_dir

    def _c(overrides: list[str] | None = None):
        register_configs()
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            return _compose("config", overrides=overrides or [], return_hydra_config=False)

    return _c


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    if not (SAMPLE / "corpus.jsonl").exists():
        missing(f"bundled sample missing at {SAMPLE}")
    return SAMPLE


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        missing(f"shared data not found at {SHARED_DATA} (set GEAR_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def prepared_samples(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three samples as ``make samples`` prepares them (the MuSiQue one ships prepared), in a temporary folder:
    ``make test`` does not run ``make samples``."""
    from gear_repro.cli.prepare import prepare

    out = tmp_path_factory.mktemp("samples")
    prepare("2wiki_hipporag", shared_data / "2wiki_sample" / "2wikimultihopqa_questions_300.json", out / "2wiki",
            corpus=shared_data / "2wiki_sample" / "2wikimultihopqa_corpus.json")
    prepare("hotpotqa", shared_data / "hotpotqa_sample" / "hotpotqa_train_25.json", out / "hotpotqa")
    return {"musique": SAMPLE, "2wiki": out / "2wiki", "hotpotqa": out / "hotpotqa"}


from tests.helpers.cpus import cpu, no_isa_cap  # noqa: E402, F401  (pretend /proc/cpuinfo: tests of CPU-dependent choices)
from tests.helpers.gear_slice import slice_env  # noqa: E402, F401  (module fixture of the GEAR/QA/T²RAG logic tests)
