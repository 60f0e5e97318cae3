"""Resumable corpus encodes (gear_repro/embedding/corpus_parts.py): a killed encode loses at most one part (an
exception or SIGTERM only the batch in flight), and the vectors equal, bit for bit, those of an encode in one piece
whatever the parts' sizes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gear_repro.embedding.corpus_parts import part_rows
from gear_repro.utils.hashing import hash_texts
from tests.helpers.doubles import HashEmbedder, PaddedHashEmbedder
from tests.helpers.requirements import missing

REPO = Path(__file__).resolve().parent.parent


def sample_triples(n: int) -> list[str]:
    """The first ``n`` triples of the bundled MuSiQue sample as the text the triple collection embeds."""
    out = []
    with open(REPO / "data" / "musique_sample" / "triples.jsonl") as f:
        for line in f:
            r = json.loads(line)
            out.append(f"{r['subject']} {r['predicate']} {r['object']}")
            if len(out) == n:
                break
    return out


class Crash(RuntimeError):
    pass


class CrashingEmbedder(HashEmbedder):
    """A hash embedder whose model raises once ``crash_after`` texts were encoded."""

    def __init__(self, crash_after: int | None = None, **kw) -> None:
        super().__init__(**kw)
        self.crash_after = crash_after

    def _encode(self, texts, progress: bool = False) -> np.ndarray:
        if self.crash_after is not None and self.stats["encoded"] + len(texts) > self.crash_after:
            raise Crash("killed")
        return super()._encode(texts, progress)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "embeddings"


def parts_of(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("*.parts/rows-*.npy"))


def test_part_rows_are_whole_batches() -> None:
    assert part_rows(100, 32) == 128
    assert part_rows(64, 32) == 64
    assert part_rows(1, 8) == 8


def test_crash_in_part_three_then_rerun_encodes_only_the_rest(cache) -> None:
    texts = sample_triples(200)
    whole = HashEmbedder()
    whole.cache = False
    expected = whole._encode(texts)
    # batch 8, parts of 40 rows: 5 parts; the model dies inside the third, in the batch of rows 88-96
    dying = CrashingEmbedder(crash_after=95)
    dying.batch_size, dying.cache_chunk_rows = 8, 40
    with pytest.raises(Crash):
        dying.encode_corpus(texts, "triples")
    # the third part's finished batches are saved on the way out
    assert parts_of(cache) == ["rows-000000000-000000040.npy", "rows-000000040-000000080.npy",
                               "rows-000000080-000000088.npy"]
    assert not list(cache.glob("*.npy"))  # no final matrix yet
    rerun = CrashingEmbedder()
    rerun.batch_size, rerun.cache_chunk_rows = 8, 40
    vecs = rerun.encode_corpus(texts, "triples")
    assert rerun.stats["encoded"] == 112  # rows 88-200, not the 88 finished ones
    assert np.array_equal(vecs, expected)
    assert parts_of(cache) == [] and not list(cache.glob("*.parts"))  # assembled, parts removed
    final = list(cache.glob("*.npy"))
    assert len(final) == 1 and np.array_equal(np.load(final[0]), expected)


def test_damaged_part_is_encoded_again(cache) -> None:
    texts = sample_triples(120)
    first = CrashingEmbedder(crash_after=119)  # dies in the last batch: parts 0-40, 40-80 and 80-112 written
    first.batch_size, first.cache_chunk_rows = 8, 40
    with pytest.raises(Crash):
        first.encode_corpus(texts, "triples")
    part = next(cache.glob("*.parts")) / "rows-000000040-000000080.npy"
    part.write_bytes(part.read_bytes()[:300])  # a part cut short (a disk full, a copy broken off)
    rerun = CrashingEmbedder()
    rerun.batch_size, rerun.cache_chunk_rows = 8, 40
    vecs = rerun.encode_corpus(texts, "triples")
    assert rerun.stats["encoded"] == 48  # the damaged part and the last batch
    ref = HashEmbedder()
    assert np.array_equal(vecs, ref._encode(texts))


def test_parts_of_another_batch_size_are_not_mixed_in(cache) -> None:
    texts = sample_triples(120)
    first = CrashingEmbedder(crash_after=100)
    first.batch_size, first.cache_chunk_rows = 8, 40
    with pytest.raises(Crash):
        first.encode_corpus(texts, "triples")
    other = CrashingEmbedder()
    other.batch_size, other.cache_chunk_rows = 20, 40  # other batches: other last bits, so no part is reused
    other.encode_corpus(texts, "triples")
    assert other.stats["encoded"] == 120


def test_one_bar_over_the_whole_corpus(cache, capsys) -> None:
    texts = sample_triples(120)
    first = CrashingEmbedder(crash_after=100)
    first.batch_size, first.cache_chunk_rows = 8, 40
    with pytest.raises(Crash):
        first.encode_corpus(texts, "triples")
    capsys.readouterr()
    rerun = CrashingEmbedder()
    rerun.batch_size, rerun.cache_chunk_rows, rerun.show_progress = 8, 40, True
    rerun.encode_corpus(texts, "triples")
    err = capsys.readouterr().err
    assert "embedding triples" in err and "120/120" in err and "text/s" in err
    assert re.search(r"\b96(\.0)?/120 ", err)  # started at the rows finished before the crash
    assert "/40" not in err  # no bar per part


def test_vectors_are_the_same_whatever_the_part_size(cache) -> None:
    texts = sample_triples(120)
    one = PaddedHashEmbedder()
    one.batch_size, one.cache = 8, False
    expected = one._encode(texts)  # one call: the encoder's own batches
    assert not np.array_equal(np.concatenate([one._encode(texts[:40]), one._encode(texts[40:])]), expected)
    for rows in (8, 24, 40, 64, 119):
        emb = PaddedHashEmbedder()
        emb.batch_size, emb.cache_chunk_rows = 8, rows
        assert np.array_equal(emb.encode_corpus(texts, "triples"), expected), rows
        for f in cache.glob("*.npy"):
            f.unlink()


def test_a_part_is_written_per_n_rows_and_reused_by_another_part_size(cache) -> None:
    texts = sample_triples(120)
    first = CrashingEmbedder(crash_after=100)
    first.batch_size, first.cache_chunk_rows = 8, 24
    with pytest.raises(Crash):
        first.encode_corpus(texts, "triples")
    assert parts_of(cache) == [f"rows-{a:09d}-{a + 24:09d}.npy" for a in (0, 24, 48, 72)]  # 96-104 raised
    rerun = CrashingEmbedder()
    rerun.batch_size, rerun.cache_chunk_rows = 8, 64
    vecs = rerun.encode_corpus(texts, "triples")
    assert rerun.stats["encoded"] == 24  # rows 96-120: parts of 24 rows read under parts of 64
    whole = HashEmbedder()
    whole.cache = False
    assert np.array_equal(vecs, whole._encode(texts))


def test_a_part_is_written_after_cache_chunk_s_seconds(cache, monkeypatch) -> None:
    from gear_repro.embedding import corpus_parts

    now = [0.0]
    monkeypatch.setattr(corpus_parts, "_clock", lambda: now[0])

    class TenSecondBatches(CrashingEmbedder):
        def _encode(self, texts, progress: bool = False) -> np.ndarray:
            out = super()._encode(texts, progress)
            now[0] += 10.0
            return out

    texts = sample_triples(120)
    slow = TenSecondBatches(crash_after=60)
    slow.batch_size, slow.cache_chunk_rows, slow.cache_chunk_s = 8, 100, 25.0
    with pytest.raises(Crash):
        slow.encode_corpus(texts, "triples")
    # 3 batches (30 s) per part; the batches of rows 48-56 finished before the crash are saved too
    assert parts_of(cache) == ["rows-000000000-000000024.npy", "rows-000000024-000000048.npy",
                               "rows-000000048-000000056.npy"]


def test_sigterm_saves_the_finished_batches_and_ends_the_run(cache, tmp_path) -> None:
    script = ("from tests.helpers.doubles import TerminatingEmbedder\n"
              "from tests.test_embedding_resume import sample_triples\n"
              "emb = TerminatingEmbedder(after=56)\n"
              "emb.batch_size, emb.cache_chunk_rows = 8, 40\n"
              "emb.encode_corpus(sample_triples(120), 'triples')\n")
    env = {**os.environ, "GEAR_CACHE": str(cache.parent), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr[-2000:]
    # the part of rows 0-40, and the two batches finished after it (the third, in flight, is lost)
    assert parts_of(cache) == ["rows-000000000-000000040.npy", "rows-000000040-000000056.npy"]
    assert "encoding stopped; rows 40-56 saved as a part, the same command goes on from there" in done.stderr
    rerun = PaddedHashEmbedder()
    rerun.batch_size, rerun.cache_chunk_rows = 8, 40
    vecs = rerun.encode_corpus(sample_triples(120), "triples")
    assert rerun.stats["encoded"] == 64
    one = PaddedHashEmbedder()
    one.batch_size, one.cache = 8, False
    assert np.array_equal(vecs, one._encode(sample_triples(120)))


def test_small_collection_is_one_piece(cache) -> None:
    emb = HashEmbedder()
    emb.cache_chunk_rows = 1000
    emb.encode_corpus(sample_triples(50), "triples")
    assert not list(cache.glob("*.parts")) and len(list(cache.glob("*.npy"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "auto"])
def test_minilm_parts_are_bit_identical_to_one_piece(cache, precision) -> None:
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    texts = sample_triples(400)
    one = SentenceEmbedder("all-MiniLM-L6-v2", batch_size=16, show_progress=False, cache=False,
                           precision=precision)
    expected = one._encode(texts)
    parts = SentenceEmbedder("all-MiniLM-L6-v2", batch_size=16, show_progress=False, cache_chunk_rows=50,
                             precision=precision)  # 50 -> 64 rows: whole batches of the length-sorted order
    vecs = parts.encode_corpus(texts, "triples")
    assert np.array_equal(vecs, expected)
    # the same key as the encode in one piece: a cache written before parts existed is read as it is
    assert parts.encode_corpus(texts, "triples") is not None and parts.stats["corpus_cache_hits"] == 1
    assert one.model_id == parts.model_id


def test_a_mapped_corpus_matrix_is_the_cache_file_with_the_same_values(cache) -> None:
    texts = sample_triples(40)
    copy = HashEmbedder().encode_corpus(texts, "triples")  # encodes and writes the cache file
    fresh = HashEmbedder()
    mapped = fresh.encode_corpus(texts, "triples", mapped=True)
    assert isinstance(mapped, np.memmap) and not mapped.flags.writeable and fresh.stats["encoded"] == 0
    assert np.array_equal(mapped, copy) and mapped.dtype == copy.dtype
    encoded = HashEmbedder().encode_corpus(sample_triples(41), "triples", mapped=True)  # a new key: encoded, mapped
    assert isinstance(encoded, np.memmap) and np.array_equal(encoded[:40], copy)


def test_parts_are_written_into_the_cache_file_repeated_texts_included(cache, monkeypatch) -> None:
    """The encode writes its rows into a memory map of the cache file, not into a matrix in memory; repeated texts
    get their distinct text's row, as in one piece."""
    import gear_repro.embedding.corpus_parts as corpus_parts

    texts = sample_triples(90)
    texts = texts + texts[:30]  # 30 repeats, after the distinct ones
    outs: list[np.ndarray] = []
    real = corpus_parts.encode_in_parts

    def spy(*a, out=None, **k):
        outs.append(out)
        return real(*a, out=out, **k)

    monkeypatch.setattr(corpus_parts, "encode_in_parts", spy)
    emb = HashEmbedder()
    emb.batch_size, emb.cache_chunk_rows = 8, 40
    vecs = emb.encode_corpus(texts, "triples")
    assert len(outs) == 1 and isinstance(outs[0], np.memmap) and outs[0].shape == (90, emb.dim)
    whole = HashEmbedder()
    whole.cache = False
    assert np.array_equal(vecs, whole.encode_corpus(texts, "triples"))
    assert not isinstance(vecs, np.memmap) and emb.stats["encoded"] == 90
    assert [p.name for p in cache.iterdir()] == [f"{emb.model_id}-{hash_texts(texts)}-distinct.npy"]  # no temp left


def test_a_full_disk_stops_the_encode_before_it_starts(cache, monkeypatch) -> None:
    """The memory map's blocks are allocated first: a full disk is one error naming the cache file, not a SIGBUS
    in the middle of the encode."""
    import errno

    from gear_repro.utils.errors import OutputError

    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "posix_fallocate", full)
    emb = HashEmbedder()
    emb.batch_size, emb.cache_chunk_rows = 8, 40
    with pytest.raises(OutputError, match=r"cannot write .*embeddings/[\w.-]+-distinct\.npy: No space left on device"):
        emb.encode_corpus(sample_triples(90), "triples")
    assert emb.stats["encoded"] == 0 and not list(cache.glob("*.npy")) and not list(cache.glob(".*.tmp"))


RELEASE_CHILD = """
import sys
from contextlib import nullcontext
from pathlib import Path
import numpy as np
from gear_repro.embedding import corpus_parts
from gear_repro.utils.memory import proc_bytes
class Rows:  # a PartEncoder whose row i is i everywhere
    batch_size, dim, show_progress = 64, 384, False
    def batch_order(self, texts):
        return np.arange(len(texts))[::-1].copy()  # not the file's order, as the longest-first order is not
    def autocast(self):
        return nullcontext()
    def _encode(self, texts, progress=False):
        return np.repeat(np.array([float(t) for t in texts], np.float32)[:, None], self.dim, axis=1)
if sys.argv[2] == "kept":
    corpus_parts.release = lambda out: None
n = 43_690  # 64 MiB of float32 rows
folder = Path(sys.argv[1])
texts = [str(i) for i in range(n)]
Rows()._encode(texts[:64])  # numpy's code paths paged in before the baseline
def mapped():  # a file's pages, or a tmpfs file's (shared memory), as a TMPDIR on tmpfs maps them
    return sum(proc_bytes("/proc/self/status", key) for key in ("RssFile", "RssShmem"))
before = mapped()
out = corpus_parts.mapped_output(folder / "m.npy", n, 384)
corpus_parts.encode_in_parts(Rows(), texts, folder / "parts", 1024, out=out)
print((mapped() - before) / 2**20)
del out
m = np.load(folder / "m.npy")
print(bool((m == np.arange(n, dtype=np.float32)[:, None]).all()))
"""


def test_an_encode_into_a_memory_map_does_not_keep_its_pages(tmp_path) -> None:
    """The encode writes its rows all over the cache file's map (longest first), and each written page stayed
    resident until the end: 12.7 GiB of T²RAG's 19.6 GiB peak RSS at 2Wiki size. Each part written releases them
    (``corpus_parts.release``); the file holds every row."""
    import subprocess
    import sys

    def child(how: str) -> tuple[float, bool]:
        folder = tmp_path / how
        folder.mkdir()
        out = subprocess.run([sys.executable, "-c", RELEASE_CHILD, str(folder), how], capture_output=True,
                             text=True, check=True, cwd=Path(__file__).resolve().parent.parent).stdout.split()
        return float(out[0]), out[1] == "True"

    released, kept = child("released"), child("kept")
    assert released[1] and kept[1]
    assert released[0] < 8 < 56 < kept[0]  # MiB of file pages the encode added: of the 64 MiB map, resident
