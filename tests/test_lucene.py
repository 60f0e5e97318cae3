"""backend=lucene: real Lucene 9 in process (gear_repro/backends/lucene.py), checked against an independent reference
written directly against pyjnius (tests/helpers/lucene_ref.py) on the bundled MuSiQue sample, run through the real
runner, and its missing-Java / missing-jar errors.

Needs Java 17+, pyjnius and the Lucene jar (``make install-lucene``); without them the tests are reported missing
(skipped; failed under ``make test``'s --strict-missing), except the error tests, which need none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from gear_repro.backends import lucene as L
from gear_repro.backends.base import IndexDoc
from gear_repro.backends.lucene import LuceneBackend, LuceneCollection
from gear_repro.backends.memory import MemoryBackend
from gear_repro.data.dataset import load_dataset
from gear_repro.utils.errors import ConfigError
from tests.conftest import SAMPLE
from tests.helpers import lucene_ref
from tests.helpers.doubles import HashEmbedder, ScriptedLLM, TableEmbedder
from tests.helpers.es_fixtures import gear_cache
from tests.helpers.requirements import missing
from tests.helpers.runs import run_with_doubles

K = 15
# recall@k of BM25 on the sample's 100 questions through `gear-repro retriever=bm25 backend=lucene` (computed once
# with Lucene 9.5.0 and pinned; a different number means a different BM25)
PINNED_RECALL = {"recall@5": 46.8333, "recall@10": 56.3333, "recall@15": 62.0833}


@pytest.fixture(scope="module")
def jar() -> Iterator[str]:
    """The Lucene jar as backend=lucene finds it (before the module's private $GEAR_CACHE hides $GEAR_CACHE/lucene),
    handed to every backend of the module through $GEAR_LUCENE_JAR."""
    try:
        path = L.find_jar()
        L.find_java_home()
    except ConfigError as e:
        missing(str(e))
    try:
        import jnius_config  # noqa: F401
    except ImportError:
        missing("pyjnius not installed (make install-lucene)")
    mp = pytest.MonkeyPatch()
    mp.setenv(L.JAR_ENV, str(path))
    yield str(path)
    mp.undo()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, jar: str) -> Iterator[Path]:
    with gear_cache(tmp_path_factory.mktemp("gear_cache")) as p:
        yield p


@pytest.fixture(scope="module")
def sample():
    if not (SAMPLE / "corpus.jsonl").exists():
        missing(f"bundled sample missing at {SAMPLE}")
    return load_dataset(SAMPLE, name="musique")


@pytest.fixture(scope="module")
def passages(cache: Path, sample) -> LuceneCollection:
    docs = [IndexDoc(p.id, p.content) for p in sample.passages]
    return LuceneBackend().open_collection("passages", docs)


@pytest.fixture(scope="module")
def reference(jar: str, sample) -> lucene_ref.LuceneReference:
    return lucene_ref.LuceneReference(jar, [(p.id, p.content) for p in sample.passages])


# -- (a) equal to the reference on the sample --------------------------------------------------------------------
def test_top15_rankings_and_scores_equal_the_reference_on_every_sample_question(passages, reference, sample):
    assert len(passages) == len(sample.passages) == 1890
    questions = [q.question for q in sample.questions]
    assert len(questions) == 100
    got = passages.bm25(questions, K)
    for q, r in zip(questions, got, strict=True):
        ids, scores, _ = reference.search(q, K)
        assert len(ids) == K, q
        assert r.ids == ids, q
        assert r.scores == scores, q  # the same float32 scores, bit for bit


def test_full_score_vectors_agree_with_the_reference(passages, reference, sample):
    """``bm25_scores`` (GRIEVER's filtered search): every matching doc scored, the others 0; None without a term."""
    questions = [q.question for q in sample.questions[:20]]
    for q, row in zip(questions, passages.bm25_scores(questions), strict=True):
        ids, scores, hits = reference.search(q, K)
        assert row is not None and row.dtype == np.float32 and row.shape == (len(passages),)
        assert int((row > 0).sum()) == hits
        pos = {pid: i for i, pid in enumerate(passages.ids)}
        assert [float(row[pos[i]]) for i in ids] == scores
    assert passages.bm25_scores(["?!", "zzzqqqxxx"]) == [None, None]
    assert passages.bm25(["?!", "zzzqqqxxx"], 5) == [passages.bm25(["?!"], 5)[0]] * 2
    assert passages.bm25(["?!"], 5)[0].ids == []


def test_analysis_is_elasticsearchs_standard_analyzer(passages, jar):
    text = "Love's O'Neil U.S. Army, the 1990s' e-mail"
    assert passages.analyze(text) == lucene_ref.tokens(jar, text)
    assert lucene_ref.tokens(jar, "Love's O'Neil U.S. Army") == ["love's", "o'neil", "u.s", "army"]
    the = passages.bm25(["the of and"], 5)[0]  # no stop words: "the" is a term
    assert len(the.ids) == 5


def test_index_is_cached_on_disk_and_reopened(passages, cache, sample, monkeypatch):
    path = passages.index_path
    assert path.parent == cache / "indexes" and path.name.startswith("lucene-passages-") and path.is_dir()
    assert not list(path.parent.glob("*.tmp*"))
    calls = []
    monkeypatch.setattr(L, "write_index", lambda *a, **k: calls.append(a))
    again = LuceneBackend().open_collection("passages", [IndexDoc(p.id, p.content) for p in sample.passages])
    q = [sample.questions[0].question]
    assert again.bm25(q, K) == passages.bm25(q, K) and calls == []  # read from disk, not rebuilt
    other = LuceneBackend(bm25={"k1": 0.9, "b": 0.4}).open_collection(
        "passages", [IndexDoc(p.id, p.content) for p in sample.passages])
    assert other.index_path != path


def test_a_damaged_index_is_rebuilt(cache: Path):
    docs = [IndexDoc("a", "alpha beta"), IndexDoc("b", "beta gamma"), IndexDoc("c", "gamma delta")]
    first = LuceneBackend().open_collection("tiny", docs)
    want = first.bm25(["beta gamma"], 3)
    for f in first.index_path.iterdir():  # a killed copy: every file truncated
        f.write_bytes(b"")
    again = LuceneBackend().open_collection("tiny", docs)
    assert again.bm25(["beta gamma"], 3) == want
    # ties by doc id (insertion order), as Lucene's collector breaks them
    assert again.bm25(["gamma"], 3)[0].ids == ["b", "c"]


def test_dense_search_and_lookups_are_the_memory_backends(cache: Path):
    emb = TableEmbedder(dim=8)
    docs = [IndexDoc(f"t{i}", f"entity {i} relation object {i % 3}",
                     {"subject_key": f"e{i % 4}", "passage_id": f"p{i // 2}"}) for i in range(12)]
    luc = LuceneBackend().open_collection("triples", docs, emb)
    mem = MemoryBackend().open_collection("triples", docs, emb)
    np.testing.assert_array_equal(luc.vectors(), mem.vectors())
    qv = mem.vectors()[[0, 5]]
    assert luc.knn(qv, 4) == mem.knn(qv, 4)
    assert luc.lookup("subject_key", ["e1", "e9"]) == mem.lookup("subject_key", ["e1", "e9"])
    assert luc.ids == mem.ids and len(luc) == 12


def test_describe_records_lucene_and_the_jar(cache: Path, jar: str):
    d = LuceneBackend().describe()
    assert d["name"] == "lucene" and d["lucene"] == "9.5.0"
    assert d["jar"]["name"] == os.path.basename(jar) and len(d["jar"]["sha256"]) == 64
    assert d["bm25"] == {"k1": 1.2, "b": 0.75, "analyzer": "standard"}
    mem = MemoryBackend().describe()
    assert {k: v for k, v in d.items() if k in mem} != mem


# -- (b) the real runner --------------------------------------------------------------------------------------------
def test_bm25_run_through_the_runner_has_the_pinned_recall(cache: Path, tmp_path: Path, sample):
    run = tmp_path / "run"
    records = run_with_doubles(["retriever=bm25", "backend=lucene", "run.progress=false"], run, llm=ScriptedLLM(),
                               embedder=HashEmbedder())
    assert len(records) == 100 and not any(r.get("error") for r in records)
    metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
    recall = {k: round(metrics[k], 4) for k in PINNED_RECALL}
    assert recall == PINNED_RECALL, recall
    run_json = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert "9.5.0" in json.dumps(run_json)


def test_fingerprint_names_the_lucene_jar_and_not_its_memory(cache: Path, jar: str, tmp_path: Path):
    from gear_repro.pipeline.resume import run_fingerprint
    from tests.helpers.runs import compose_config

    base = ["retriever=bm25"]
    luc = run_fingerprint(compose_config([*base, "backend=lucene"]))
    assert luc != run_fingerprint(compose_config([*base, "backend=memory"]))
    assert luc == run_fingerprint(compose_config([*base, "backend=lucene", "backend.heap_mb=2048",
                                                  "backend.ram_buffer_mb=16", f"backend.jar={jar}"]))
    other = tmp_path / "lucene-other.jar"
    other.write_bytes(b"PK")
    assert luc != run_fingerprint(compose_config([*base, "backend=lucene", f"backend.jar={other}"]))


# -- (c) the errors -------------------------------------------------------------------------------------------------
@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """As in a process whose JVM has not started, with a private $GEAR_CACHE."""
    monkeypatch.setattr(L, "_JVM", {})
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    return monkeypatch


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and "make install-lucene" in msg, msg
    return msg


def test_missing_jar_is_one_line_naming_make_install_lucene(no_jvm: pytest.MonkeyPatch, tmp_path: Path):
    no_jvm.delenv(L.JAR_ENV, raising=False)
    no_jvm.setattr(L.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError) as e:
        LuceneBackend()
    assert _one_line(e).startswith("backend=lucene needs the Lucene jar")
    with pytest.raises(ConfigError) as e:
        LuceneBackend(jar=str(tmp_path / "nope.jar"))
    assert "backend.jar=" in _one_line(e)
    no_jvm.setenv(L.JAR_ENV, str(tmp_path / "gone.jar"))
    with pytest.raises(ConfigError) as e:
        LuceneBackend()
    assert "$GEAR_LUCENE_JAR=" in _one_line(e)


def test_missing_java_is_one_line_naming_make_install_lucene(no_jvm: pytest.MonkeyPatch, tmp_path: Path):
    fake_jar = tmp_path / "lucene.jar"
    fake_jar.write_bytes(b"PK")
    no_jvm.setenv(L.JAR_ENV, str(fake_jar))
    no_jvm.delenv("JAVA_HOME", raising=False)
    no_jvm.setattr(L.shutil, "which", lambda name: None)
    with pytest.raises(ConfigError) as e:
        LuceneBackend()
    assert _one_line(e).startswith("backend=lucene needs Java 17+")
    old = tmp_path / "jdk11"  # a Java too old, named by its release file
    (old / "lib" / "server").mkdir(parents=True)
    (old / "lib" / "server" / "libjvm.so").write_bytes(b"")
    (old / "release").write_text('JAVA_VERSION="11.0.22"\n')
    no_jvm.setenv("JAVA_HOME", str(old))
    with pytest.raises(ConfigError) as e:
        LuceneBackend()
    assert "found Java 11.0.22" in _one_line(e)
    no_jvm.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(ConfigError) as e:
        LuceneBackend()
    assert "no JVM library" in _one_line(e)


def test_java_versions():
    assert [L.java_major(v) for v in ("17.0.15", "1.8.0_392", "21", "11.0.2+9")] == [17, 8, 21, 11]
