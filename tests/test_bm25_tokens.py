"""The memory backend's BM25 index is built from token ids (``tokenize_ids``): same scores as building it from
token strings, on the bundled sample's passages and questions."""

from pathlib import Path

import bm25s
import numpy as np

from gear_repro.backends.tokenize import tokenize, tokenize_ids
from gear_repro.data import load_dataset

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "musique_sample"


def test_index_from_ids_scores_as_index_from_strings():
    ds = load_dataset(SAMPLE)
    texts = [p.content for p in ds.passages]
    from_strings, from_ids = bm25s.BM25(method="lucene"), bm25s.BM25(method="lucene")
    from_strings.index(tokenize(texts), show_progress=False)
    tok = tokenize_ids(texts)
    from_ids.index(tok, show_progress=False)
    assert len(tok.ids) == len(texts) and set(from_ids.vocab_dict) == set(from_strings.vocab_dict)
    queries = [q for q in tokenize([q.question for q in ds.questions]) if q]
    assert len(queries) == 100
    for q in queries:
        a = from_strings.get_scores([t for t in q if t in from_strings.vocab_dict])
        b = from_ids.get_scores([t for t in q if t in from_ids.vocab_dict])
        assert np.array_equal(a, b)
        assert np.count_nonzero(a) > 0


def test_standard_analyzer_keeps_stop_words_and_does_not_stem(tmp_path, monkeypatch) -> None:
    """backend.bm25.analyzer=standard: Elasticsearch's default analyzer, as the reference IRCoT index
    (HippoRAG legacy src/elastic_search_tool.py: a `text` field without analyzer); english = stop words + stems."""
    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    docs = [IndexDoc("a", "the cat sat"), IndexDoc("b", "dogs run fast"), IndexDoc("c", "birds fly high")]
    std = MemoryBackend(bm25={"analyzer": "standard"}).open_collection("p", docs)
    hits = std.bm25(["the running"], 3)[0]
    assert hits.ids == ["a"]  # "the" kept, "running" not stemmed to "run"
    eng = MemoryBackend(bm25={"analyzer": "english"}).open_collection("p", docs)
    assert eng.bm25(["the running"], 3)[0].ids == ["b"]


def test_every_declared_stop_list_and_stemmer_is_one_the_libraries_have() -> None:
    """backend.bm25.stopwords / .stemmer are Enums (a wrong value fails at composition, not per question); each
    member must be one bm25s and PyStemmer accept; ``en`` is Lucene's 33 words (docs/elasticsearch.md)."""
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    from gear_repro.backends.tokenize import Snowball, StopWords

    assert {m.value for m in Snowball} <= set(Stemmer.algorithms())
    for m in StopWords:
        assert tokenize(["Cats"], m.value, "english") == [["cat"]]
    assert len(STOPWORDS_EN) == 33
    assert tokenize(["Who was the king of it, then?"], "en", "porter") == [["who", "king"]]
    assert tokenize(["Who was the king of it, then?"], "en_plus", "porter") == [["king"]]
