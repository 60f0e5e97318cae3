"""Start-up capacity check (gear_repro/pipeline/capacity.py): a run whose embedding caches need more free disk or
memory than the machine has stops before it encodes, with the estimate, the folder and the setting to skip it."""

from __future__ import annotations

import numpy as np
import pytest

from gear_repro.backends.ann import DenseSettings, index_bytes
from gear_repro.pipeline import capacity, wiring
from gear_repro.utils import memory
from gear_repro.utils.errors import ConfigError
from tests.helpers.doubles import HashEmbedder
from tests.helpers.runs import compose_config

GIB = 1024 ** 3
MUSIQUE = {"passages": (148_793, 148_793 * 450), "triples": (1_520_000, 1_520_000 * 40)}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_estimate_of_musique_size_with_minilm(cache) -> None:
    est = capacity.estimate(MUSIQUE, 384, "m")
    vec = (148_793 + 1_520_000) * 384 * 4
    assert est.disk == 2 * vec  # parts and the assembled file side by side
    assert est.folder == cache / "embeddings"
    records = (148_793 + 1_520_000) * capacity.BYTES_PER_RECORD + capacity.BYTES_PER_CHAR * (148_793 * 450 + 1_520_000 * 40)
    assert est.memory == capacity.BASE_BYTES + vec + records + 1_520_000 * 384 * 4  # + the triples' encode buffer
    assert "triples: 1,520,000 x 384 float32 = 2.17 GiB" in est.lines[1]
    # with the default dense search both collections are past auto_min_vectors: faiss indexes of fp16 codes
    from gear_repro.backends.ann import DenseSettings

    indexed = capacity.estimate(MUSIQUE, 384, "m", dense=DenseSettings())
    assert indexed.memory - est.memory == (148_793 + 1_520_000) * 384 * 2
    assert "faiss index 1.09 GiB" in indexed.lines[1]


def test_a_cached_matrix_needs_no_disk(cache) -> None:
    (cache / "embeddings").mkdir(parents=True)
    np.save(cache / "embeddings" / "m-abc.npy", np.zeros((1000, 8), np.float32))
    est = capacity.estimate({"passages": (1000, 10)}, 8, "m")
    assert est.disk == 0 and "(cached)" in est.lines[0]
    assert capacity.estimate({"passages": (1000, 10)}, 8, "other").disk == 2 * 1000 * 8 * 4


def test_too_little_disk_is_refused_with_the_numbers(cache) -> None:
    est = capacity.estimate(MUSIQUE, 384, "m")
    with pytest.raises(ConfigError, match=r"not enough free disk for the embedding caches in .*cache/embeddings: "
                                          r"they need about 4\.8 GiB .*, 2\.0 GiB free.*run\.capacity_check=false"):
        capacity.check(est, disk_free=lambda _: 2 * GIB, memory_free=lambda: 64 * GIB)
    capacity.check(est, disk_free=lambda _: 6 * GIB, memory_free=lambda: 64 * GIB)  # enough: no error


def test_too_little_memory_is_refused(cache) -> None:
    est = capacity.estimate(MUSIQUE, 768, "m")
    with pytest.raises(ConfigError, match=r"not enough memory .*needs about 1[0-9]\.\d GiB.*4\.0 GiB available.*"
                                          r"backend\.dense_dtype=float16"):
        capacity.check(est, disk_free=lambda _: 100 * GIB, memory_free=lambda: 4 * GIB)


def test_a_float16_run_is_not_told_to_use_float16(cache) -> None:
    est = capacity.estimate(MUSIQUE, 768, "m", dense_bytes=2)
    with pytest.raises(ConfigError, match="held as float16") as refused:
        capacity.check(est, disk_free=lambda _: 100 * GIB, memory_free=lambda: 2 * GIB)
    assert "dense_dtype=float16" not in str(refused.value)


def test_index_stage_stops_before_encoding(cache, tmp_path, monkeypatch) -> None:
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    monkeypatch.setattr(capacity, "free_disk", lambda _: 1024 ** 2)  # 1 MiB free
    over = ["stage=index", "retriever=hybrid", "expansion=naive", "run.progress=false"]
    emb = HashEmbedder()
    cfg = compose_config(over)
    with pytest.raises(ConfigError, match=r"not enough free disk for the embedding caches in .*embeddings"):
        Runner(cfg, tmp_path / "index", resources=Resources(cfg, embedder=emb)).run()
    assert emb.stats["encoded"] == 0  # stopped before the first text
    cfg = compose_config([*over, "run.capacity_check=false"])
    out = Runner(cfg, tmp_path / "index2", resources=Resources(cfg, embedder=HashEmbedder())).run()
    assert out["passages"] == 1890 and out["triples"] == 17204
    # both matrices cached now: the same build needs no disk, so 1 MiB free passes the check
    cfg = compose_config(over)
    emb = HashEmbedder()
    assert Runner(cfg, tmp_path / "index3", resources=Resources(cfg, embedder=emb)).run()["triples"] == 17204
    assert emb.stats["encoded"] == 0 and emb.stats["corpus_cache_hits"] == 2


def test_retrieval_run_without_vectors_is_not_checked(cache, tmp_path, monkeypatch) -> None:
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    monkeypatch.setattr(capacity, "free_disk", lambda _: 0)
    cfg = compose_config(["retriever=bm25", "run.progress=false", "dataset.limit=2"])
    assert "recall@5" in Runner(cfg, tmp_path / "bm25", resources=Resources(cfg, embedder=None)).run()
    cfg = compose_config(["retriever=sbert", "run.progress=false", "dataset.limit=2"])
    with pytest.raises(ConfigError, match="not enough free disk"):
        Runner(cfg, tmp_path / "sbert", resources=Resources(cfg, embedder=HashEmbedder())).run()


def test_a_griever_run_counts_its_names_and_units(cache, tmp_path, monkeypatch) -> None:
    """GRIEVER embeds its entity/predicate names and units beyond the passages: at full size 5.4 GiB the check
    did not see, and the run died after an hour (docs/scale.md)."""
    from gear_repro.methods.griever.retriever import GrieverRetriever
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    cfg = compose_config(["retriever=griever", "run.progress=false", "dataset.limit=2"])
    res = Resources(cfg, embedder=HashEmbedder())
    cols = GrieverRetriever.capacity_collections(cfg.retriever, res.dataset.triples)
    names = {x for t in res.dataset.triples for x in (t.subject, t.object, t.predicate)}
    assert cols["griever names"][0] == len(names) and cols["griever units"][0] > len(res.dataset.triples)
    est = capacity.run_estimate(cfg, res, {"passages"})
    plain = capacity.run_estimate(compose_config(["retriever=hybrid", "run.progress=false"]), res, {"passages"})
    names, units = cols["griever names"], cols["griever units"]
    dim = capacity.embedder_dim(cfg.embedder)
    assert names.resident and not units.resident  # the alias clustering reads every name; units stay mapped
    records = sum(m.rows * m.record_bytes + 2 * m.chars for m in cols.values())
    # neither is cached yet; each is encoded into a memory map of its cache file (no copy in memory) ...
    assert capacity.encodes_in_place(cfg) and est.memory - plain.memory == names.rows * dim * 4 + records
    # ... unless the embedder encodes in one piece, in memory: then each encode holds its whole matrix
    whole = compose_config(["retriever=griever", "run.progress=false", "dataset.limit=2", "embedder.cache_chunk_rows=null"])
    assert not capacity.encodes_in_place(whole)
    assert capacity.run_estimate(whole, res, {"passages"}).memory - est.memory == \
        (len(res.dataset.passages) + names.rows + units.rows) * dim * 4
    assert [line.split(":")[0] for line in est.lines] == [
        "passages", "the dataset's 17,204 triples (no triple collection)", "griever names", "griever units"]
    assert "memory-mapped" in est.lines[3] and "memory-mapped" not in est.lines[2]
    monkeypatch.setattr(memory, "run_memory", lambda: est.memory)  # under the 10 % margin
    with pytest.raises(ConfigError, match=r"not enough memory .*griever units: .*retriever\.same_as\.max_aliases=0 "
                                          r"\(no same_as aliases: the 0\.\d GiB name matrix"):
        Runner(cfg, tmp_path / "griever", resources=res).run()
    off = compose_config(["retriever=griever", "run.progress=false", "dataset.limit=2", "retriever.same_as.max_aliases=0"])
    lean = capacity.run_estimate(off, res, {"passages"})
    assert est.memory - lean.memory == names.rows * dim * 4 and not lean.hints


def test_the_memory_a_run_has_counts_what_its_process_holds_already(cache, monkeypatch) -> None:
    """The estimate is of the whole process, which holds its dataset before the check runs; MemAvailable alone
    had refused a 2Wiki-size run that fits (14.7 GiB estimated, 10.7 available once its 7 GiB of records were
    loaded)."""
    held = memory.process_memory()
    assert 10 * 2 ** 20 < held < memory.available_memory() + held  # this interpreter's own anonymous pages
    big = np.ones(64 * 2 ** 20 // 8)  # 64 MiB more of them
    assert memory.process_memory() - held >= 60 * 2 ** 20
    del big
    est = capacity.Estimate(cache / "embeddings", memory=10 * GIB)
    monkeypatch.setattr(memory, "available_memory", lambda: 4 * GIB)
    monkeypatch.setattr(memory, "process_memory", lambda: 7 * GIB)
    capacity.check(est, disk_free=lambda _: GIB)  # 10 GiB estimated, 11 with the margin: 4 + 7 at hand
    monkeypatch.setattr(memory, "process_memory", lambda: 6 * GIB)
    with pytest.raises(ConfigError, match=r"needs about 10\.0 GiB .*10\.0 GiB available to this process"):
        capacity.check(est, disk_free=lambda _: GIB)


def test_a_hipporag_run_counts_its_phrase_vectors(cache) -> None:
    """HippoRAG embeds its phrase nodes and reads them whole (synonym search, entity linking): 1M phrases at full
    size, ~1.4 GiB at MiniLM's 384 dimensions, that the check counted nowhere."""
    from gear_repro.methods.hipporag.phrase_graph import build_phrase_graph
    from gear_repro.methods.hipporag.retriever import (
        EDGES_PER_PHRASE,
        GRAPH_EDGE_BYTES,
        PHRASE_RECORD_BYTES,
        HippoRAG,
    )
    from gear_repro.pipeline.resources import Resources

    cfg = compose_config(["agent=hipporag", "run.progress=false", "dataset.limit=2"])
    res = Resources(cfg, embedder=HashEmbedder())
    cols = capacity.own_collections(cfg, res.dataset.triples)
    assert list(cols) == ["hipporag phrases"]
    phrases = cols["hipporag phrases"]
    graph = build_phrase_graph(res.dataset.triples, [p.id for p in res.dataset.passages],
                               lambda texts: np.zeros((len(texts), 4), np.float32), synonyms=False)
    assert len(graph.phrases) <= phrases.rows <= len(graph.phrases) * 1.01  # a fact with an empty side drops both
    assert not phrases.resident and phrases.record_bytes == PHRASE_RECORD_BYTES
    opened = capacity.ALL_COLLECTIONS
    est = capacity.run_estimate(cfg, res, opened)
    plain = capacity.run_estimate(compose_config(["agent=gear", "run.progress=false"]), res, opened)
    # the phrase vectors are a memory map of the cache file (file pages the kernel can drop): no bytes counted;
    # GEAR's run embeds the triples instead and builds the triple graph
    graph = len(res.dataset.triples) * capacity.TRIPLE_GRAPH_BYTES
    # and its phrase graph, before a build at the bundled sample's edges a phrase
    phrase_graph = round(phrases.rows * EDGES_PER_PHRASE) * GRAPH_EDGE_BYTES
    assert phrases.also == (f"hipporag phrase graph ({round(phrases.rows * EDGES_PER_PHRASE):,} edges, "
                            f"{EDGES_PER_PHRASE} a phrase assumed)", phrase_graph)
    # and HippoRAG's retriever searches neither collection by BM25, where GEAR's hybrid retrievers search both
    bm25 = capacity.BM25_BYTES_PER_CHAR * sum(c for _, c in capacity.dataset_collections(res.dataset, opened).values())
    # and it reads neither collection's vectors (wiring.vectors_read), where GEAR's run reads both
    assert est.vectors == 0 and plain.vectors > 0
    assert est.memory - plain.memory == (phrases.rows * PHRASE_RECORD_BYTES + 2 * phrases.chars - graph
                                         + phrase_graph - bm25 - plain.vectors)
    assert any(line.startswith("triple graph:") for line in plain.lines)
    assert not any(line.startswith("triple graph:") for line in est.lines)
    assert [line.split(":")[0] for line in est.lines] == ["passages", "triples", "hipporag phrases",
                                                          "hipporag phrase graph (" + phrases.also[0].split("(")[1]]
    normalised = {"normalisation": "entity"}
    assert HippoRAG.capacity_collections(normalised, res.dataset.triples)["hipporag phrases"].rows > 0
    # a refusal names the settings that shrink the graph, and float16 only where collection vectors are held:
    # v1 opens no collection (its phrase vectors are a memory map)
    v1 = capacity.run_estimate(cfg, res, capacity.opened_collections(cfg))
    assert v1.vectors == 0 and v1.hints == ["a higher hipporag.synonym_threshold (now 0.8)",
                                            "a lower hipporag.synonym_top_k (now 100)",
                                            "hipporag.synonyms=false (no synonym edges)"]
    with pytest.raises(ConfigError) as refused:
        capacity.check(v1, disk_free=lambda _: GIB, memory_free=lambda: v1.memory)
    assert "hipporag.synonym_threshold" in str(refused.value) and "float16" not in str(refused.value)
    assert not HippoRAG.capacity_hints({"synonyms": False}, cols, 64)
    v2_cfg = compose_config(["agent=hipporag", "hipporag.version=v2", "run.progress=false", "dataset.limit=2"])
    v2 = capacity.run_estimate(v2_cfg, Resources(v2_cfg, embedder=HashEmbedder()),
                               capacity.opened_collections(v2_cfg))
    assert v2.vectors > 0  # v2 reads its passages' and facts' vectors whole
    with pytest.raises(ConfigError, match=r"backend\.dense_dtype=float16"):
        capacity.check(v2, disk_free=lambda _: GIB, memory_free=lambda: v2.memory)


def test_a_cached_phrase_graph_prices_its_own_edges(cache) -> None:
    """Once a graph of the corpus is cached, the estimate counts its edges (a corpus of many synonyms has far more
    than the sample's rate: the generated MuSiQue-size corpus 24.4 a phrase), read from the file's array headers."""
    from gear_repro.methods.hipporag.phrase_graph import build_phrase_graph, cached_graph_edges
    from gear_repro.methods.hipporag.retriever import GRAPH_EDGE_BYTES, HippoRAG
    from gear_repro.types import Triple
    from tests.helpers.graph_formats import save_unicode

    triples = [Triple(f"t{i}", f"a{i}", "r", f"b{i % 3}", f"p{i}") for i in range(9)]
    graph = build_phrase_graph(triples, [f"p{i}" for i in range(9)], synonyms=False)
    assert cached_graph_edges(len(graph.phrases)) is None
    (cache / "hipporag").mkdir(parents=True)
    graph.save(cache / "hipporag" / "graph-0.npz")
    (cache / "hipporag" / "graph-1.npz").write_bytes(b"not a zip")  # a damaged entry is passed over
    assert cached_graph_edges(len(graph.phrases)) == len(graph.edges) == 9
    assert cached_graph_edges(len(graph.phrases) + 1) is None
    save_unicode(graph, cache / "hipporag" / "graph-0.npz")  # an earlier cache's names: unicode arrays
    assert cached_graph_edges(len(graph.phrases)) == 9
    phrases = HippoRAG.capacity_collections({}, triples)["hipporag phrases"]
    assert phrases.rows == len(graph.phrases) == 12
    assert phrases.also == ("hipporag phrase graph (9 edges, the cached graph's)", 9 * GRAPH_EDGE_BYTES)


P, T = "passages", "triples"


@pytest.mark.parametrize(("overrides", "opened"), [
    ([], {P}), (["expansion=naive"], {P, T}), (["retriever=hybrid", "expansion=sync"], {P, T}),
    (["agent=gear", "retriever=hybrid"], {P, T}), (["agent=hipporag"], set()),
    (["agent=hipporag", "hipporag.version=v2"], {P, T}), (["agent=hipporag_ircot"], set()),
    (["agent=ircot", "retriever=bm25"], {P}), (["experiment=t2rag_table1"], {T}), (["retriever=griever"], {P})])
def test_a_collection_is_counted_where_a_component_opens_it(overrides, opened) -> None:
    """By the wiring's own dependencies: HippoRAG v1 reads the triples, not their vectors (it was counted as if it
    embedded them: 2.2 GiB and an encode buffer as large at MuSiQue size), and neither it nor T²RAG opens the
    passage collection (counted too: 0.6 GiB at MuSiQue size, a fifth of T²RAG's measured peak)."""
    assert capacity.opened_collections(compose_config(overrides)) == opened


@pytest.mark.parametrize("overrides, read", [
    (["retriever=bm25", "expansion=naive"], {T}), (["retriever=bm25"], set()), (["retriever=sbert"], {P}),
    (["retriever=hybrid", "expansion=sync"], {P, T}), (["agent=gear", "retriever=hybrid"], {P, T}),
    (["agent=hipporag"], set()), (["agent=hipporag", "hipporag.version=v2"], {P, T}),
    (["agent=ircot", "retriever=bm25"], set()), (["experiment=t2rag_table1"], {T}), (["retriever=griever"], {P})])
def test_a_collection_is_embedded_only_where_its_vectors_are_read(overrides, read) -> None:
    """A collection encodes its vectors on their first read, so BM25 + NaiveGE, which searches the passages by BM25,
    never embeds them: the estimate had counted their vectors (0.70 GiB of memory and 1.40 of disk at 2Wiki size)."""
    assert wiring.vectors_read(compose_config(overrides)) == read


def test_an_estimate_counts_only_the_opened_collections(cache) -> None:
    from gear_repro.pipeline.resources import Resources

    cfg = compose_config(["experiment=t2rag_table1", "run.progress=false", "dataset.limit=2"])
    res = Resources(cfg, embedder=HashEmbedder())
    est = capacity.run_estimate(cfg, res, capacity.opened_collections(cfg))
    both = capacity.run_estimate(cfg, res, capacity.ALL_COLLECTIONS)
    assert [line.split(":")[0] for line in est.lines] == ["triples"]
    passages = capacity.dataset_collections(res.dataset, {P})[P]
    # T²RAG searches neither collection by BM25, so neither BM25 index is counted
    assert est.lines[0].endswith(", no BM25 index") and both.lines[0].endswith(", no BM25 index")
    # and a passage collection opened beside it, but never read by its vectors, counts its records alone
    assert both.lines[0].startswith(f"passages: {passages[0]:,} records, never embedded")
    assert both.vectors == est.vectors and both.disk == est.disk
    assert both.memory - est.memory == passages[0] * capacity.BYTES_PER_RECORD + \
        (capacity.BYTES_PER_CHAR - capacity.BM25_BYTES_PER_CHAR) * passages[1]


def test_the_dataset_triples_no_collection_holds_are_counted_as_records(cache) -> None:
    """A Hybrid run embeds only the passages, but its dataset holds the triples all the same (their records at 2Wiki
    size: ~2.6 GiB, which the estimate had left out, 0.71 of the measured peak); a run that opens the triple
    collection counts them there, once."""
    import subprocess
    import sys

    from gear_repro.pipeline.resources import Resources
    from tests.helpers.cli import REPO

    cfg = compose_config(["retriever=hybrid", "run.progress=false", "dataset.limit=2"])
    res = Resources(cfg, embedder=HashEmbedder())
    rows, chars = capacity.triple_sizes(res.dataset)
    assert rows == 17_204
    est = capacity.run_estimate(cfg, res, capacity.opened_collections(cfg))
    line = next(x for x in est.lines if x.startswith("the dataset's"))
    assert line.startswith("the dataset's 17,204 triples (no triple collection)")
    without = capacity.config_estimate(cfg, capacity.dataset_collections(res.dataset, {P}), {}, None)
    assert est.memory - without.memory == rows * capacity.TRIPLE_RECORD_BYTES + chars
    # the constant against what the loader's records hold, Python's allocations in a fresh process
    probe = ("import gc, tracemalloc; from gear_repro.data.canonical import load_triples; tracemalloc.start(); "
             f"held = load_triples({str(REPO / 'data' / 'musique_sample' / 'triples.jsonl')!r}); gc.collect(); "
             "print(len(held), tracemalloc.get_traced_memory()[0])")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    n, measured = map(int, out.stdout.split())
    assert n == rows
    assert rows * capacity.TRIPLE_RECORD_BYTES + chars == pytest.approx(measured, rel=0.2)
    sync = compose_config(["retriever=hybrid", "expansion=sync", "run.progress=false", "dataset.limit=2"])
    lines = capacity.run_estimate(sync, Resources(sync, embedder=HashEmbedder()),
                                  capacity.opened_collections(sync)).lines
    assert not any(x.startswith("the dataset's") for x in lines) and any(x.startswith("triples:") for x in lines)


# bench_griever --scale (docs/scale.md, "GRIEVER's build at scale"): peak RSS (GiB) of GRIEVER's build with cached
# vectors on the synthetic MuSiQue-shaped corpus at these fractions of MuSiQue's size, of which the bench process
# itself (interpreter and imports, no model) is BENCH_BASE
MEASURED_PEAK = {0.1: 0.706, 0.2: 1.341}
BENCH_BASE = 0.058


@pytest.mark.parametrize("fraction", sorted(MEASURED_PEAK))
def test_the_griever_estimate_is_within_20_percent_of_the_measured_build(cache, fraction) -> None:
    from benchmarks.bench_griever import synthetic_corpus
    from gear_repro.methods.griever.retriever import GrieverRetriever

    passages, triples = synthetic_corpus("musique", fraction)
    cols = GrieverRetriever.capacity_collections({}, triples)
    (cache / "embeddings").mkdir(parents=True)
    for i, rows in enumerate([len(passages), *(m.rows for m in cols.values())]):  # all cached, as in the bench
        np.save(cache / "embeddings" / f"m-{i}.npy", np.zeros((rows, 1), np.float32))
    cfg = compose_config(["retriever=griever", "embedder=minilm", "backend.dense_dtype=float32"])
    # the dataset's triples as the run counts them (GRIEVER opens no triple collection; the bench holds them too)
    triple_sizes = (len(triples), sum(len(t.subject) + len(t.predicate) + len(t.object) + 2 for t in triples))
    est = capacity.config_estimate(cfg, {"passages": (len(passages), sum(len(p.content) for p in passages))}, cols,
                                   "m", dataset_triples=triple_sizes)
    got = (est.memory - capacity.BASE_BYTES) / GIB
    assert got == pytest.approx(MEASURED_PEAK[fraction] - BENCH_BASE, rel=0.2)


def test_the_memory_bench_runs_a_method_on_hash_vectors_and_records_its_estimate(cache, tmp_path) -> None:
    """benchmarks/bench_method_memory.py: each method through the runner in a child process, every question
    answered (no failure), its start-up estimate beside its peak."""
    import json
    import subprocess
    import sys

    from tests.helpers.cli import REPO

    out = tmp_path / "mem.json"
    subprocess.run([sys.executable, "-m", "benchmarks.bench_method_memory", str(REPO / "data" / "musique_sample"),
                    "--methods", "t2rag", "--limit", "2", "--workdir", str(tmp_path / "w"), "--out", str(out),
                    "--set", "run.progress=false"], cwd=REPO, check=True, capture_output=True)
    (rec,) = json.loads(out.read_text())
    assert rec["method"] == "T²RAG" and rec["questions"] == 2 and rec["failed_questions"] == 0
    assert rec["overrides"] == ["agent=t2rag", "run.progress=false", "dataset.limit=2"]
    assert 0.1 < rec["peak_rss_gib"] < rec["estimate_gib"]  # the sample's estimate is mostly its 1.5 GiB allowance
    # the sampled peak: at most the kernel's, with the parts it is made of and where the run was
    peak = rec["peak_at"]
    assert 0.1 < peak["rss_gib"] <= rec["peak_rss_gib"] + 0.01
    assert peak["anon_gib"] + peak["file_gib"] == pytest.approx(peak["rss_gib"], abs=0.02)
    assert all(":" in frame for frame in peak["where"])
    assert peak["anon_gib"] <= rec["peak_anon_gib"] <= rec["peak_rss_gib"]
    # the same peaks, written as they rose (what a run killed for memory leaves)
    assert json.loads((tmp_path / "w" / "t2rag.samples.json").read_text()) == {
        "peak_anon_gib": pytest.approx(rec["peak_anon_gib"], abs=0.011), "peak_at": peak}
    assert (tmp_path / "w" / "t2rag" / "metrics.json").is_file()
    # a second bench into the same folder would resume the finished questions and measure no retrieval
    again = subprocess.run([sys.executable, "-m", "benchmarks.bench_method_memory", str(REPO / "data" / "musique_sample"),
                            "--methods", "t2rag", "--limit", "2", "--workdir", str(tmp_path / "w"), "--out",
                            str(tmp_path / "again.json")], cwd=REPO, capture_output=True, text=True)
    assert again.returncode != 0 and "resumed run measures nothing" in again.stderr
    assert str(tmp_path / "w" / "t2rag") in again.stderr and not (tmp_path / "again.json").exists()
    # the vectors are cached under the hash embedder's own key, never under a model's
    names = [p.name for p in (cache / "embeddings").iterdir()]
    assert names and all(n.startswith(HashEmbedder(384).model_id + "-") for n in names)


def test_a_bench_run_killed_for_memory_is_reported_with_its_last_samples(tmp_path, monkeypatch) -> None:
    """A child the kernel kills (rc -9) writes no record: the bench reports its rc and the peaks its sampler wrote
    before the kill, and exits non-zero."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import benchmarks.bench_method_memory as bench

    samples = {"peak_anon_gib": 19.95, "peak_at": {"rss_gib": 20.01, "anon_gib": 19.95, "file_gib": 0.06,
                                                   "where": ["ann.py:219 build"]}}

    def killed(cmd, cwd):
        part = Path(cmd[cmd.index("--out") + 1])
        part.with_suffix(".samples.json").write_text(json.dumps(samples))
        return subprocess.CompletedProcess(cmd, -9)

    out = tmp_path / "mem.json"
    monkeypatch.setattr(bench.subprocess, "run", killed)
    monkeypatch.setattr(sys, "argv", ["bench", "PREP", "--methods", "t2rag", "--workdir", str(tmp_path / "w"),
                                      "--out", str(out)])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 1
    assert json.loads(out.read_text()) == [{"method": "t2rag", "rc": -9, "last_samples": samples}]


def test_a_bm25_index_is_counted_only_for_a_collection_a_retriever_searches_by_bm25(cache) -> None:
    """retriever=sbert never builds the passages' BM25 index (only retrievers search a collection by BM25), so its
    run counts BM25_BYTES_PER_CHAR less a character than Hybrid's (at 2Wiki size its estimate had been 1.34 of the
    peak, Hybrid's 1.13); nor do the methods that read the triples' vectors only build theirs; stage=index builds
    every BM25 index and counts them all."""
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.wiring import bm25_searched

    def est(retriever: str, index_stage: bool = False) -> capacity.Estimate:
        cfg = compose_config([f"retriever={retriever}", "run.progress=false", "dataset.limit=2"])
        res = Resources(cfg, embedder=HashEmbedder())
        return capacity.run_estimate(cfg, res, capacity.opened_collections(cfg), index_stage)

    chars = sum(len(p.content) for p in Resources(compose_config(["dataset.limit=2"])).dataset.passages)
    sbert, hybrid = est("sbert"), est("hybrid")
    assert hybrid.memory - sbert.memory == capacity.BM25_BYTES_PER_CHAR * chars > 0
    assert sbert.lines[0].endswith(", no BM25 index") and not hybrid.lines[0].endswith(", no BM25 index")
    assert est("sbert", index_stage=True).memory == hybrid.memory
    assert bm25_searched(compose_config(["retriever=sbert"])) == frozenset()
    for searched in (["retriever=bm25"], ["retriever=griever"], ["agent=ircot", "retriever=bm25"]):
        assert bm25_searched(compose_config(searched)) == {"passages"}
    assert bm25_searched(compose_config(["retriever=hybrid", "expansion=sync"])) == {"passages", "triples"}
    # the triples' vectors only: NaiveGE's expansion, T²RAG's dense retriever, HippoRAG 2's fact scores
    assert bm25_searched(compose_config(["retriever=bm25", "expansion=naive"])) == {"passages"}
    for over in (["agent=t2rag"], ["agent=hipporag", "hipporag.version=v2"]):
        assert bm25_searched(compose_config(over)) == frozenset()


def test_an_own_matrix_counted_on_raw_strings_finds_its_smaller_cached_matrix(cache) -> None:
    """GRIEVER's names are counted on the raw strings (4,836,455 at 2Wiki size), the build embeds the distinct
    normalised ones (4,826,006): the disk check had asked 35 GiB for matrices already cached and refused the run."""
    from gear_repro.types import OwnMatrix

    (cache / "embeddings").mkdir(parents=True)
    np.save(cache / "embeddings" / "m-0.npy", np.zeros((990, 1), np.float32))
    cfg = compose_config(["retriever=griever", "embedder=minilm", "backend.dense_dtype=float32"])
    for rows, cached in ((1000, True), (990, True), (1001, False), (989, False)):
        est = capacity.config_estimate(cfg, {}, {"names": OwnMatrix(rows, 0, False, 0)}, "m")
        assert (est.disk == 0) is cached and ("(cached)" in est.lines[0]) is cached
    # a collection's rows are exact: only a matrix of as many rows is its cache
    assert capacity.estimate({"passages": (990, 0)}, 1, "m").disk == 0
    assert capacity.estimate({"passages": (1000, 0)}, 1, "m").disk > 0


def test_cached_phrase_vectors_price_the_synonym_edges_before_the_search(cache) -> None:
    """With the phrase vectors cached but no graph (a build stopped after its encode, or new synonym settings), the
    estimate counts the synonym entries sampled from those vectors instead of the sample's 1.4 edges a phrase: the
    generated MuSiQue-size corpus's pseudo-words give 38.6 entries a phrase, and its first build was priced ~3 GiB
    low (docs/scale.md). Every eligible row sampled: the exact search's entries; 1,000 of them: within 10 %."""
    from gear_repro.data.dataset import load_dataset
    from gear_repro.methods.hipporag import phrase_graph
    from gear_repro.methods.hipporag.retriever import GRAPH_EDGE_BYTES, HippoRAG
    from tests.conftest import SAMPLE

    ds = load_dataset(SAMPLE)
    triples = ds.triples
    node = {"synonym_threshold": 0.55, "cache": False}
    hippo = HippoRAG(ds.passages, triples, embedder=HashEmbedder(), **node)
    stats = hippo.graph.stats  # encodes the phrases into $GEAR_CACHE/embeddings, caches no graph
    assert stats["synonym_entries"] > 10_000

    def priced(**over) -> tuple[int, str]:
        line, memory = HippoRAG.capacity_collections({**node, **over}, triples)["hipporag phrases"].also
        edges = int(line.split("(")[1].split(" edges")[0].replace(",", ""))
        assert memory == edges * GRAPH_EDGE_BYTES
        return edges, line

    edges, line = priced()
    assert "synonym entries, estimated from 1,000 phrases' cached vectors" in line
    assert abs(edges - len(triples) - stats["synonym_entries"]) <= 0.1 * stats["synonym_entries"]
    assert edges >= stats["edges"]  # an upper bound of the graph's edges: one a triple, one an entry
    vectors = phrase_graph.cached_phrase_vectors(hippo.graph.phrases)
    assert len(vectors) == 1 and vectors[0].shape == (stats["phrases"], 64)
    eligible = np.array([phrase_graph.alnum_length(p) >= 3 for p in hippo.graph.phrases])
    assert phrase_graph.sampled_synonym_entries(vectors[0], 0.55, 100, eligible, rows=len(eligible),
                                                block=4_096) == stats["synonym_entries"]
    # other synonym settings change the estimate; without synonyms, at most one edge a triple
    assert priced(synonym_threshold=0.9)[0] < edges
    assert priced(synonyms=False) == (len(triples), f"hipporag phrase graph ({len(triples):,} edges, at most one a "
                                                    "triple, no synonym edges)")
    # phrases encoded by no one: the sample's rate
    assert "a phrase assumed" in HippoRAG.capacity_collections({**node, "normalisation": "entity"}, triples)[
        "hipporag phrases"].also[0]


def test_a_graph_build_prices_its_synonyms_from_the_vectors_it_encoded_before_the_search(cache, monkeypatch) -> None:
    """A build from nothing (no phrase vectors at start-up, so the estimate used the sample's rate) stops after its
    phrase encode, before the synonym search, when the graph priced from those vectors would not fit; the vectors stay
    cached for the next start. With memory enough, or the check off, it builds the same graph."""
    from gear_repro.data.dataset import load_dataset
    from gear_repro.methods.hipporag import phrase_graph, retriever
    from gear_repro.methods.hipporag.retriever import GRAPH_EDGE_BYTES, HippoRAG
    from tests.conftest import SAMPLE

    ds = load_dataset(SAMPLE)
    node = {"synonym_threshold": 0.55, "cache": False}
    searched: list[int] = []
    search = phrase_graph.synonym_pairs
    monkeypatch.setattr(phrase_graph, "synonym_pairs", lambda v, *a, **kw: searched.append(len(v)) or search(v, *a, **kw))
    sampled: list[int] = []
    sample = retriever.sampled_synonym_entries
    monkeypatch.setattr(retriever, "sampled_synonym_entries", lambda v, *a: sampled.append(len(v)) or sample(v, *a))
    judged: list[str] = []  # phrases whose synonym eligibility a price computed
    alnum = retriever.alnum_length
    monkeypatch.setattr(retriever, "alnum_length", lambda p: judged.append(p) or alnum(p))
    held = 2 * GIB
    monkeypatch.setattr(memory, "process_memory", lambda: held)
    monkeypatch.setattr(memory, "run_memory", lambda: held + 10 * 2 ** 20)  # 10 MiB to spare
    hippo = HippoRAG(ds.passages, ds.triples, embedder=HashEmbedder(), **node)
    with pytest.raises(ConfigError) as e:
        _ = hippo.graph
    msg = str(e.value)
    assert "HippoRAG's phrase graph (" in msg and "synonym entries, estimated from 1,000 phrases' vectors" in msg
    assert "a higher hipporag.synonym_threshold (now 0.55)" in msg and "hipporag.synonyms=false" in msg
    assert "run.capacity_check=false" in msg
    assert not searched  # stopped before the search
    edges = int(msg.split("graph (")[1].split(" edges")[0].replace(",", ""))
    assert f"{edges * GRAPH_EDGE_BYTES / GIB:.1f} GiB more" in msg
    # the encode is cached: the next start-up estimate prices the graph from it, as this check did
    line = HippoRAG.capacity_collections(node, ds.triples)["hipporag phrases"].also[0]
    assert f"({edges:,} edges, " in line and "phrases' cached vectors" in line

    monkeypatch.setattr(memory, "run_memory", lambda: 2 * (held + edges * GRAPH_EDGE_BYTES))
    built = HippoRAG(ds.passages, ds.triples, embedder=HashEmbedder(), **node).graph
    assert searched == [built.stats["phrases"]] and edges >= built.stats["edges"]
    monkeypatch.setattr(memory, "run_memory", lambda: 0)
    unchecked = HippoRAG(ds.passages, ds.triples, embedder=HashEmbedder(), capacity_check=False, **node).graph
    assert np.array_equal(unchecked.edges, built.edges) and np.array_equal(unchecked.weights, built.weights)
    assert len(sampled) == 1  # the cached file's rate, sampled once: the start-up estimate and the builds reuse it
    assert len(judged) == built.stats["phrases"]  # and the phrases judged once, for that sample


def test_the_graph_builds_check_follows_the_runs() -> None:
    assert compose_config(["agent=hipporag"]).hipporag.capacity_check is True
    assert compose_config(["agent=hipporag", "run.capacity_check=false"]).hipporag.capacity_check is False


def _group(d, files: dict[str, str]) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name).write_text(text)


def test_a_memory_cgroups_limit_bounds_the_memory_the_check_sees(tmp_path, monkeypatch) -> None:
    """A SLURM job's ``--mem`` or a container's limit is a cgroup's, which /proc/meminfo does not show: the check
    counts the tightest of the group and its parents, less their usage, plus their reclaimable page cache."""
    root = tmp_path / "sys"
    # cgroup v2: the job's group (4 GiB, 1 GiB used, 0.5 GiB inactive file pages) under a parent of 3 GiB, 2 used
    _group(root / "slurm", {"memory.max": str(3 * GIB), "memory.current": str(2 * GIB), "memory.stat": "anon 1\n"})
    _group(root / "slurm" / "job_7", {"memory.max": str(4 * GIB), "memory.current": str(GIB),
                                      "memory.stat": f"anon 5\ninactive_file {GIB // 2}\n"})
    (tmp_path / "v2").write_text("0::/slurm/job_7\n")
    assert memory.cgroup_room(tmp_path / "v2", root) == GIB  # the parent's 3 - 2
    (root / "slurm" / "memory.max").write_text("max\n")
    assert memory.cgroup_room(tmp_path / "v2", root) == 3 * GIB + GIB // 2  # 4 - 1 + 0.5
    # cgroup v1: the memory hierarchy's own line; "no limit" is a number near 2**63
    _group(root / "memory" / "gcli", {"memory.limit_in_bytes": str(8 * GIB), "memory.usage_in_bytes": str(GIB),
                                      "memory.stat": f"cache 9\ntotal_inactive_file {GIB}\n"})
    _group(root / "memory", {"memory.limit_in_bytes": "9223372036854771712", "memory.usage_in_bytes": "1",
                             "memory.stat": "total_inactive_file 0\n"})
    (tmp_path / "v1").write_text("5:devices:/\n4:memory:/gcli\n0::/\n")
    assert memory.cgroup_room(tmp_path / "v1", root) == 8 * GIB
    # a container's group path from outside its namespace: the mount's top is its group
    (tmp_path / "ns").write_text("4:memory:/docker/abc\n")
    assert memory.cgroup_room(tmp_path / "ns", root) is None  # the top has no limit
    (root / "memory" / "memory.limit_in_bytes").write_text(str(2 * GIB))
    assert memory.cgroup_room(tmp_path / "ns", root) == 2 * GIB - 1
    # no limit anywhere, or nothing readable: MemAvailable alone
    assert memory.cgroup_room(tmp_path / "absent", root) is None
    monkeypatch.setattr(memory, "proc_bytes", lambda path, key: 6 * GIB)  # MemAvailable
    monkeypatch.setattr(memory, "cgroup_room", lambda: GIB)
    assert memory.available_memory() == GIB
    monkeypatch.setattr(memory, "cgroup_room", lambda: None)
    assert memory.available_memory() == 6 * GIB


def test_a_faiss_index_is_counted_only_for_a_collection_the_run_searches_by_knn(cache) -> None:
    """A collection's faiss index is built on its first kNN search (backends/memory.py): counted where a dense
    retriever searches it (the passage retriever, the triple retriever, T²RAG's own), not where the vectors are read
    whole (HippoRAG 2's fact and passage scores, the triple graph, GRIEVER's store) nor at stage=index."""
    from gear_repro.pipeline.wiring import knn_searched

    sizes = {"passages": (490_454, 0), "triples": (4_978_286, 0)}
    dense = DenseSettings()

    def faiss(over: list[str], index_stage: bool = False) -> dict[str, bool]:
        est = capacity.config_estimate(compose_config(["embedder=minilm", *over]), sizes, {}, None,
                                       index_stage=index_stage)
        return {name: "faiss index" in line for line in est.lines if (name := line.split(":")[0]) in sizes}

    assert index_bytes(dense, sizes["passages"][0], 384) > 0  # at this size the default index is faiss
    assert faiss(["retriever=hybrid", "expansion=sync"]) == {"passages": True, "triples": True}
    assert faiss(["retriever=hybrid", "expansion=sync"], index_stage=True) == {"passages": False, "triples": False}
    assert faiss(["agent=t2rag"]) == {"passages": False, "triples": True}
    assert faiss(["retriever=bm25", "expansion=naive"]) == {"passages": False, "triples": False}
    assert faiss(["agent=hipporag", "hipporag.version=v2"]) == {"passages": False, "triples": False}
    assert faiss(["agent=hipporag", "hipporag.version=v2", "hipporag.no_entity_fallback=retriever",
                  "retriever=sbert"]) == {"passages": True, "triples": False}
    assert knn_searched(compose_config(["retriever=griever"])) == frozenset()
    hybrid, exact = (capacity.config_estimate(compose_config(["embedder=minilm", "retriever=hybrid", *o]),
                                              sizes, {}, None) for o in ([], ["backend.dense.index=exact"]))
    assert hybrid.memory - exact.memory == index_bytes(dense, sizes["passages"][0], 384)  # its triples unsearched


def test_hipporag_2_without_synonyms_embeds_no_phrases_and_prices_its_passage_edges(cache) -> None:
    """HippoRAG 2 links a query by its fact (triple) vectors, so without synonym edges no phrase is embedded (its
    MuSiQue-size run wrote no phrase matrix): no phrase disk or encode, the phrases' records and the graph held; its
    graph adds a passage's edges to its triples' subjects and objects, at most three edges a triple."""
    from gear_repro.data.dataset import load_dataset
    from gear_repro.methods.hipporag.retriever import FACT_PHRASE_BYTES, GRAPH_EDGE_BYTES, HippoRAG
    from tests.conftest import SAMPLE

    triples = load_dataset(SAMPLE).triples
    v1 = HippoRAG.capacity_collections({"synonyms": False}, triples)["hipporag phrases"]
    v2 = HippoRAG.capacity_collections({"version": "v2", "synonyms": False}, triples)["hipporag phrases"]
    assert v1.embedded and not v2.embedded and "not embedded without synonyms" in v2.also[0]
    assert f"({len(triples):,} edges, at most one a triple" in v1.also[0]
    assert f"({3 * len(triples):,} edges, at most three a triple" in v2.also[0]
    assert v2.also[1] == v1.rows * FACT_PHRASE_BYTES + 2 * v1.chars + 3 * len(triples) * GRAPH_EDGE_BYTES
    assert HippoRAG.capacity_collections({"version": "v2"}, triples)["hipporag phrases"].rows == v1.rows  # synonyms
    ds = load_dataset(SAMPLE)
    built = HippoRAG(ds.passages, triples, embedder=HashEmbedder(), version="v2", synonyms=False, cache=False).graph
    assert len(triples) < built.stats["edges"] <= 3 * len(triples)  # the passage edges counted, within the bound
    cfg = compose_config(["agent=hipporag", "hipporag.version=v2", "hipporag.synonyms=false", "embedder=minilm"])
    est = capacity.config_estimate(cfg, {}, {"hipporag phrases": v2}, "m")
    assert est.disk == 0 and est.memory == capacity.BASE_BYTES + v2.also[1]


def test_hipporag_2_without_synonyms_builds_its_graph_within_the_bytes_a_phrase_counts() -> None:
    """The build of HippoRAG 2's graph without the synonym search (keys, index, the build's arrays) peaks within
    FACT_PHRASE_BYTES a phrase beside GRAPH_EDGE_BYTES an edge (Python's and numpy's allocations: tracemalloc)."""
    import tracemalloc

    from gear_repro.data.dataset import load_dataset
    from gear_repro.methods.hipporag.phrase_graph import build_phrase_graph
    from gear_repro.methods.hipporag.retriever import FACT_PHRASE_BYTES, GRAPH_EDGE_BYTES
    from tests.conftest import SAMPLE

    ds = load_dataset(SAMPLE)
    tracemalloc.start()
    try:
        graph = build_phrase_graph(ds.triples, [p.id for p in ds.passages], version="v2", synonyms=False)
        assert len(graph.phrase_index) == graph.n_phrases  # built as a run builds it
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert graph.n_phrases > 10_000 and len(ds.triples) < len(graph.edges)
    per_phrase = (peak - len(graph.edges) * GRAPH_EDGE_BYTES) / graph.n_phrases
    assert 0.5 * FACT_PHRASE_BYTES < per_phrase <= FACT_PHRASE_BYTES
