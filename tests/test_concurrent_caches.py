"""Several processes building the same cached artifact at once (hydra/launcher=joblib sweeps)."""

from __future__ import annotations

import multiprocessing as mp
import os

from gear_repro.backends.base import IndexDoc
from gear_repro.backends.memory import MemoryCollection
from tests.helpers.doubles import HashEmbedder
from tests.helpers.es_fixtures import gear_cache

DOCS = [IndexDoc(str(i), f"passage {i} about topic {i % 7} and city {i % 5}") for i in range(300)]


def _build_bm25(cache: str) -> list[str]:
    os.environ["GEAR_CACHE"] = cache
    return MemoryCollection("p", DOCS).bm25(["topic 3 city 4"], 5)[0].ids


def _build_vectors(cache: str) -> float:
    """The real cache path of encode_corpus (SentenceEmbedder) with feature hashing in place of a model."""
    os.environ["GEAR_CACHE"] = cache
    return float(HashEmbedder().encode_corpus([d.text for d in DOCS]).sum())


def test_concurrent_builds_of_one_bm25_index_and_embedding_file(tmp_path):
    with mp.get_context("fork").Pool(4) as pool:
        rankings = pool.map(_build_bm25, [str(tmp_path)] * 4)
        sums = pool.map(_build_vectors, [str(tmp_path)] * 4)
    with gear_cache(tmp_path / "alone"):  # the same vectors built by one process
        alone = float(HashEmbedder().encode_corpus([d.text for d in DOCS]).sum())
    assert all(r == rankings[0] for r in rankings) and len(rankings[0]) == 5
    assert sums == [alone] * 4 and alone != 0
    assert [p.name.startswith("bm25-p-") for p in sorted((tmp_path / "indexes").iterdir())] == [True]
    assert len(list((tmp_path / "embeddings").iterdir())) == 1  # one file, no temp files left behind


def _write_replies(args: tuple[str, str, int]) -> int:
    """One process of a sweep: its own replies and the replies every job shares."""
    from gear_repro.llm.cache import LLMCache

    directory, mode, worker = args
    cache = LLMCache(directory, mode)
    for i in range(40):
        cache.put(f"own-{worker}-{i}", "m", {"text": f"{worker}:{i}"})
        cache.put(f"shared-{i % 10}", "m", {"text": f"shared {i % 10}"})
    return worker


def _read_replies(args: tuple[str, str, int]) -> dict[str, str]:
    """Every reply the processes wrote, as one process reads them."""
    from gear_repro.llm.cache import LLMCache

    cache = LLMCache(args[0], args[1])
    keys = [f"own-{w}-{i}" for w in range(4) for i in range(40)] + [f"shared-{i}" for i in range(10)]
    return {k: (cache.get(k) or {}).get("text", "") for k in keys}


def test_llm_cache_journal_mode_concurrent_writers_agree(tmp_path):
    """llm.cache_mode=journal (network file systems, docs/sweeps.md): 4 processes writing at once all read back every
    reply of every process, and the file uses a rollback journal (no WAL, no shared-memory index left behind)."""
    import sqlite3

    from gear_repro.llm.cache import LLMCache

    with mp.get_context("spawn").Pool(4) as pool:
        jobs = [(str(tmp_path), "journal", w) for w in range(4)]
        assert pool.map(_write_replies, jobs) == [0, 1, 2, 3]
        seen = pool.map(_read_replies, jobs)
    assert all(s == seen[0] for s in seen)
    assert seen[0]["own-3-39"] == "3:39" and seen[0]["shared-9"] == "shared 9" and "" not in seen[0].values()
    assert len(LLMCache(tmp_path, "journal")) == 4 * 40 + 10
    assert sqlite3.connect(tmp_path / "cache.sqlite3").execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.sqlite3"]


def test_llm_cache_mode_auto_follows_the_file_system(tmp_path):
    """auto: journal on NFS/Lustre/... (the mount table's longest prefix), wal on a local disk; a WAL file held by
    another process is refused in journal mode with the reason, not silently shared."""
    import pytest

    from gear_repro.llm.cache import LLMCache, filesystem_type, resolve_cache_mode
    from gear_repro.utils.errors import ConfigError

    mounts = tmp_path / "mounts"
    shared = tmp_path / "shared"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {shared} nfs4 rw 0 0\n", encoding="utf-8")
    assert filesystem_type(shared / "llm_cache", mounts) == "nfs4"
    assert resolve_cache_mode("auto", shared / "llm_cache", mounts) == "journal"
    assert resolve_cache_mode("auto", tmp_path / "local", mounts) == "wal"
    assert resolve_cache_mode("wal", shared, mounts) == "wal"
    with pytest.raises(ConfigError, match="cache_mode"):
        resolve_cache_mode("memory", shared, mounts)
    wal = LLMCache(tmp_path / "c", "wal")
    wal.put("k", "m", {"text": "x"})
    with pytest.raises(ConfigError, match="same llm.cache_mode"):
        LLMCache(tmp_path / "c", "journal")
    assert wal.get("k") == {"text": "x"}


def test_damaged_cache_entries_are_rebuilt_and_named(tmp_path, caplog):
    """A truncated embedding file, a BM25 index missing a file and a torn HippoRAG graph failed every question at
    each re-run; each is now named in a warning, removed and rebuilt to the same values. A damaged reply cache (it
    holds paid replies) is kept and named with the way out."""
    import numpy as np
    import pytest

    from gear_repro.llm.cache import LLMCache
    from gear_repro.methods.hipporag.phrase_graph import cached_phrase_graph
    from gear_repro.types import Triple
    from gear_repro.utils.errors import ConfigError

    texts = [d.text for d in DOCS]
    with gear_cache(tmp_path), caplog.at_level("WARNING"):
        vecs = HashEmbedder().encode_corpus(texts)
        (f,) = (tmp_path / "embeddings").iterdir()
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
        emb = HashEmbedder()
        assert np.array_equal(emb.encode_corpus(texts), vecs) and emb.stats["corpus_cache_hits"] == 0
        assert f"damaged corpus embedding cache entry {f}" in caplog.text
        assert np.array_equal(HashEmbedder().encode_corpus(texts), vecs)  # rebuilt: a hit again

        ids = _build_bm25(str(tmp_path))
        (index,) = (tmp_path / "indexes").iterdir()
        (index / "lucene_bm25.npz").unlink()
        assert _build_bm25(str(tmp_path)) == ids and "damaged BM25 index cache entry" in caplog.text
        assert (index / "lucene_bm25.npz").exists()

        triples = [Triple(f"t{i}", f"entity {i}", "near", f"entity {i + 1}", str(i)) for i in range(5)]
        args = (triples, [str(i) for i in range(5)], None)
        first = cached_phrase_graph(*args, settings={"synonyms": False}, embedder_id="none")
        (graph,) = (tmp_path / "hipporag").iterdir()
        graph.write_bytes(b"PK\x03\x04 torn")
        again = cached_phrase_graph(*args, settings={"synonyms": False}, embedder_id="none")
        assert again.phrases == first.phrases and "damaged HippoRAG graph cache entry" in caplog.text

        (tmp_path / "llm").mkdir()
        (tmp_path / "llm" / "cache.sqlite3").write_bytes(b"SQLite format 3\x00" + bytes(3000))
        with pytest.raises(ConfigError, match=r"cache\.sqlite3 is not a readable reply cache .* it is kept .* "
                                              r"llm\.cache_dir"):
            LLMCache(tmp_path / "llm")
