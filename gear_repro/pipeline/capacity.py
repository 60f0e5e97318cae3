"""Start-up capacity check: a run whose embedding caches need more free disk or memory than the machine has
stops before it starts encoding (docs/scale.md, "Full-size dress rehearsal"), not after an hour of encoding.

The estimate is from the corpus size alone (no model is loaded): each collection the run's components open
(:func:`opened_collections`) and whose vectors are not yet cached needs rows x dim x 4 bytes (float32,
:meth:`SentenceEmbedder.encode_corpus`) twice on disk while its resumable parts and the final file are both there
(:mod:`gear_repro.embedding.corpus_parts`), and in memory each such collection's matrix as the backend holds it
(``backend.dense_dtype``; an encode writes into a memory map of its cache file, and only one in a single piece, in
memory, is counted once more) and, where the run searches it by kNN, its faiss index
(:func:`~gear_repro.backends.ann.index_bytes`), the triple
graph where one is built (:data:`TRIPLE_GRAPH_BYTES` a triple), the corpus as Python objects
(:data:`BYTES_PER_RECORD` a passage or triple, :data:`BYTES_PER_CHAR` a character of its text) and the process
itself (:data:`BASE_BYTES`: interpreter, torch, the encoder). The per-row figures are fitted to the per-step RSS of
a Hybrid + SyncGE run at MuSiQue's size; the estimate came to 1.04-1.06 of the peaks of SyncGE, GEAR and T²RAG
there (docs/scale.md, "Every method at full size"); the check asks for :data:`MARGIN` of headroom over what the
machine has available and what the process holds already (:func:`~gear_repro.utils.memory.run_memory`). A component's
own matrices (:class:`OwnMatrix`, GRIEVER's names and units, HippoRAG's phrases) count as their build holds them,
with its records per row and the settings that need less (``hints``).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from gear_repro.backends.ann import DenseSettings, index_bytes
from gear_repro.data.dataset import Dataset
from gear_repro.pipeline.resources import target_class
from gear_repro.types import OwnMatrix, Triple
from gear_repro.utils import memory
from gear_repro.utils.errors import CapacityError
from gear_repro.utils.memory import GIB, MARGIN
from gear_repro.utils.paths import cache_dir

log = logging.getLogger(__name__)

# A passage or triple in a run: its dataset record and its collection's document as Python objects (ids and fields),
# and per character of its text, the strings held and the BM25 index built from them. Fitted to the per-step RSS of
# a Hybrid + SyncGE run at MuSiQue's size (docs/scale.md): passages +0.40 GiB for 148,793 records of 88M
# characters, triples +0.79 GiB for 1,514,009 of 90M, the dataset 0.96 GiB for both.
BYTES_PER_RECORD = 700
BYTES_PER_CHAR = 6
# of BYTES_PER_CHAR, the BM25 index's share (postings, norms, the analysis while it is built), not held by a
# collection no component searches by BM25: the passages of retriever=sbert, 1.0 GiB less than Hybrid's peak for
# 2Wiki size's 290M characters (docs/scale.md, "Peaks on hash vectors")
BM25_BYTES_PER_CHAR = 4
# A triple the dataset holds that no collection opens (Hybrid, GRIEVER, HippoRAG): its Triple and strings, 554 B a
# triple of 55 characters measured at MuSiQue size (RssAnon around load_triples), 563 B on the bundled sample
TRIPLE_RECORD_BYTES = 500
TRIPLE_GRAPH_BYTES = 550  # the triple graph's arrays and maps per triple (core/triple_graph.py; the same step: +0.80 GiB)
BASE_BYTES = int(1.5 * GIB)  # interpreter, torch, transformers and the encoder's weights
KNOWN_DIMS = {"all-minilm-l6-v2": 384, "all-mpnet-base-v2": 768}


@dataclass
class Estimate:
    """What a run's embedding caches need: bytes of disk in ``folder`` and of memory, with the lines that explain
    them (one per collection) and the settings that would need less (``hints``, named when refused);
    ``dense_bytes``, the bytes a vector value is held at (2: ``backend.dense_dtype=float16`` already), and
    ``vectors``, the bytes of the collections' vectors held at it (what ``backend.dense_dtype=float16`` halves)."""

    folder: Path
    disk: int = 0
    memory: int = BASE_BYTES
    lines: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    dense_bytes: int = 4
    vectors: int = 0


def free_disk(folder: Path) -> int:
    """Free bytes on the file system of ``folder`` (its nearest existing parent)."""
    p = Path(folder)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def embedder_dim(node: DictConfig) -> int:
    """The embedder's vector size without loading it: its folder's config (sentence-transformers' pooling
    config, else transformers' ``hidden_size``), else the known models' sizes, else 768."""
    from gear_repro.embedding.sbert_weights import resolve_model

    name = str(node.get("model", ""))
    try:
        path = Path(resolve_model(name))
    except Exception:  # an unknown name: check_ready says so; the estimate takes the larger size
        path = Path(name)
    for sub, key in (("1_Pooling/config.json", "word_embedding_dimension"), ("config.json", "hidden_size")):
        f = path / sub
        if f.is_file():
            try:
                return int(json.loads(f.read_text())[key])
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return KNOWN_DIMS.get(Path(name).name.lower(), 768)


# an own matrix's rows are counted on the raw strings, an upper bound of the distinct normalised texts its build
# embeds (2Wiki size: 4,836,455 GRIEVER names counted, 4,826,006 embedded); a cached matrix this much smaller counts
ROWS_SLACK = 0.01


def cached_rows(model_id: str, rows: int, upper_bound: bool = False) -> bool:
    """Whether $GEAR_CACHE/embeddings holds a finished matrix of ``rows`` vectors of this embedder (its
    ``model_id``, the key's first part, implies the dimension); of ``rows`` down to :data:`ROWS_SLACK` fewer where
    ``rows`` is an ``upper_bound``."""
    least = rows - int(rows * ROWS_SLACK) if upper_bound else rows
    for f in (cache_dir() / "embeddings").glob(f"{model_id}-*.npy"):
        try:
            if least <= np.load(f, mmap_mode="r").shape[0] <= rows:
                return True
        except (OSError, ValueError):
            continue
    return False


def estimate(collections: dict[str, tuple[int, int]], dim: int, model_id: str | None, dense_bytes: int = 4,
             record_bytes: int = BYTES_PER_RECORD, in_place: bool = False, char_bytes: int = BYTES_PER_CHAR,
             dense: DenseSettings | None = None, no_bm25: Collection[str] = (), no_knn: Collection[str] = (),
             no_vectors: Collection[str] = (), upper_bound: bool = False) -> Estimate:
    """The needs of embedding ``collections`` (name -> (rows, characters of text)) at ``dim``, held at
    ``dense_bytes`` a value (0: a memory map of the cache file) with the faiss index ``dense`` gives each (none:
    exact search) but those in ``no_knn`` (never searched by kNN, so never indexed), with ``record_bytes`` of objects per row and ``char_bytes`` per character of text, less
    :data:`BM25_BYTES_PER_CHAR` for those in ``no_bm25`` (no BM25 index built); a collection whose matrix is cached
    (``model_id``; rows counted as an ``upper_bound``: :func:`cached_rows`) needs no disk and no encode buffer, nor
    one that is encoded ``in_place`` (into a memory map of its cache file: :func:`encodes_in_place`), nor one in
    ``no_vectors`` (opened, its vectors never read: its records alone)."""
    est = Estimate(cache_dir() / "embeddings", dense_bytes=dense_bytes)
    encode_buffer = 0
    for name, (rows, chars) in collections.items():
        objects = rows * record_bytes + (char_bytes - (BM25_BYTES_PER_CHAR if name in no_bm25 else 0)) * chars
        if name in no_vectors:
            est.memory += objects
            est.lines.append(f"{name}: {rows:,} records, never embedded: {objects / GIB:.2f} GiB"
                             + (", no BM25 index" if name in no_bm25 else ""))
            continue
        vec = rows * dim * 4
        cached = model_id is not None and cached_rows(model_id, rows, upper_bound)
        index = index_bytes(dense, rows, dim) if dense is not None and name not in no_knn else 0
        est.memory += rows * dim * dense_bytes + objects + index
        est.vectors += rows * dim * dense_bytes
        if not cached:
            est.disk += 2 * vec
            encode_buffer = max(encode_buffer, 0 if in_place else vec)
        est.lines.append(f"{name}: {rows:,} x {dim} float32 = {vec / GIB:.2f} GiB"
                         + (" (cached)" if cached else f", {2 * vec / GIB:.2f} GiB on disk while its parts are "
                            "assembled") + (", memory-mapped" if dense_bytes == 0 else "")
                         + (", held as float16" if dense_bytes == 2 else "")
                         + (f", faiss index {index / GIB:.2f} GiB" if index else "")
                         + f"; {objects / GIB:.2f} GiB of records" + (", no BM25 index" if name in no_bm25 else ""))
    est.memory += encode_buffer
    return est


def encodes_in_place(cfg: DictConfig) -> bool:
    """Whether the embedder writes a large collection's vectors into a memory map of its cache file as they are
    encoded (its cache on and ``embedder.cache_chunk_rows`` set: :meth:`~gear_repro.embedding.embedder.
    SentenceEmbedder.encode_corpus`), so that the encode holds no copy of the matrix in memory."""
    node = cfg.get("embedder")
    return node is not None and bool(node.get("cache", True)) and node.get("cache_chunk_rows") is not None


def check(est: Estimate, *, disk_free: Callable[[Path], int] | None = None,
          memory_free: Callable[[], int] | None = None) -> None:
    """CapacityError when ``est`` (with :data:`MARGIN`) exceeds the free disk of its folder or the memory the run's
    process can hold (measured by :func:`free_disk` and :func:`~gear_repro.utils.memory.run_memory` unless given)."""
    disk_free, memory_free = disk_free or free_disk, memory_free or memory.run_memory
    detail = "; ".join(est.lines)
    have_disk = disk_free(est.folder)
    if est.disk * MARGIN > have_disk:
        raise CapacityError(
            f"not enough free disk for the embedding caches in {est.folder}: they need about "
            f"{est.disk / GIB:.1f} GiB ({detail}), {have_disk / GIB:.1f} GiB free. Free space there, point "
            "GEAR_CACHE at a larger disk, or set run.capacity_check=false to start anyway")
    have_mem = memory_free()
    if est.memory * MARGIN > have_mem:
        raise CapacityError(
            f"not enough memory for this run's corpus and vectors: it needs about {est.memory / GIB:.1f} GiB "
            f"({detail}; {BASE_BYTES / GIB:.1f} GiB for the process and model), {have_mem / GIB:.1f} GiB "
            "available to this process. "
            "Use " + ("backend.dense_dtype=float16 (half the vectors' memory), " if est.dense_bytes == 4 and est.vectors else "")
            + "".join(f"{h}, " for h in est.hints)
            + "a machine with more memory, or set run.capacity_check=false to start anyway")
    log.info("capacity: the embedding caches need ~%.1f GiB of disk in %s (%.1f GiB free) and ~%.1f GiB of "
             "memory (%.1f GiB available)", est.disk / GIB, est.folder, have_disk / GIB, est.memory / GIB,
             have_mem / GIB)


def run_estimate(cfg: DictConfig, res, opened: Collection[str], index_stage: bool = False) -> Estimate | None:
    """The estimate of a run (``res``: its :class:`~gear_repro.pipeline.resources.Resources`) that opens the
    ``opened`` collections (``"passages"``, ``"triples"``: :func:`opened_collections`; ``index_stage``: stage=index,
    which builds every BM25 index); None when it embeds nothing or the backend keeps no vectors here
    (Elasticsearch stores them on its server)."""
    if not res.needs_vectors or OmegaConf.select(cfg, "backend.dense_dtype") is None:
        return None
    ds = res.dataset
    model_id = getattr(res.embedder, "model_id", None)  # the run builds it anyway; no model is loaded for its key
    return config_estimate(cfg, dataset_collections(ds, opened), own_collections(cfg, ds.triples), model_id,
                           dataset_triples=None if "triples" in opened else triple_sizes(ds),
                           index_stage=index_stage)


def triple_sizes(ds: Dataset) -> tuple[int, int] | None:
    """(rows, characters of text) of the triples ``ds`` holds, as the triple collection embeds them; None
    without."""
    if not ds.triples:
        return None
    return len(ds.triples), sum(len(t.subject) + len(t.predicate) + len(t.object) + 2 for t in ds.triples)


def dataset_collections(ds: Dataset, opened: Collection[str]) -> dict[str, tuple[int, int]]:
    """name -> (rows, characters of text) of the ``opened`` collections of ``ds`` (``"passages"``,
    ``"triples"``)."""
    collections = {}
    if "passages" in opened:
        collections["passages"] = (len(ds.passages), sum(len(p.content) for p in ds.passages))
    if "triples" in opened and (sizes := triple_sizes(ds)) is not None:
        collections["triples"] = sizes
    return collections


OWN_NODES = ("retriever", "hipporag")  # config nodes whose component may embed matrices of its own


def own_collections(cfg: DictConfig, triples: Sequence[Triple] | None) -> dict[str, OwnMatrix]:
    """The matrices a run's components embed of their own over ``triples`` (the ``capacity_collections`` of the
    retriever's and the ``hipporag`` node's classes: GRIEVER's names and units as float32 memory maps of their
    cache files, HippoRAG's phrase vectors read whole), with the records their builds keep per row; {} for the
    others or without triples."""
    own: dict[str, OwnMatrix] = {}
    for node, cls in _own_nodes(cfg) if triples else ():
        if (counted := getattr(cls, "capacity_collections", None)) is not None:
            own |= counted(node, triples)
    return own


def _own_nodes(cfg: DictConfig) -> list[tuple[DictConfig, type | None]]:
    """The :data:`OWN_NODES` that ``cfg`` sets, each with its ``_target_`` class."""
    return [(node, target_class(node)) for key in OWN_NODES if (node := cfg.get(key)) is not None]


def config_estimate(cfg: DictConfig, collections: dict[str, tuple[int, int]],
                    own: dict[str, OwnMatrix], model_id: str | None,
                    dataset_triples: tuple[int, int] | None = None, index_stage: bool = False) -> Estimate:
    """The needs of a run of ``cfg`` embedding ``collections`` and a retriever's ``own`` ones
    (:func:`own_collections`, with the retriever's ``capacity_hints``: the settings that need less), at the
    embedder's dimension and the backend's ``dense_dtype``, with the records of the ``dataset_triples`` (rows,
    characters) that no collection holds, the BM25 indexes of the collections it searches by BM25 (all at
    ``index_stage``, else :func:`~gear_repro.pipeline.wiring.bm25_searched`) and the faiss indexes of those it
    searches by kNN (:func:`~gear_repro.pipeline.wiring.knn_searched`; none at ``index_stage``, since an index is
    built on its collection's first search), the vectors of those whose vectors it reads (every one at
    ``index_stage``, else :func:`~gear_repro.pipeline.wiring.vectors_read`); by sizes alone, so a plan prices a corpus that is not on this
    machine."""
    from gear_repro.pipeline.wiring import bm25_searched, knn_searched, requested, vectors_read

    dense_bytes = 2 if str(cfg.backend.dense_dtype) == "float16" else 4
    dim = embedder_dim(cfg.embedder)
    in_place = encodes_in_place(cfg)
    dense = DenseSettings.from_config(cfg.backend.get("dense"))
    asked = requested(cfg)
    no_knn = set(collections) - (frozenset() if index_stage else knn_searched(cfg, asked))
    est = estimate(collections, dim, model_id, dense_bytes, in_place=in_place, dense=dense,
                   no_bm25=() if index_stage else set(collections) - bm25_searched(cfg, asked), no_knn=no_knn,
                   no_vectors=() if index_stage else set(collections) - vectors_read(cfg))
    faiss = sum(index_bytes(dense, rows, dim) for name, (rows, _) in collections.items() if name not in no_knn)
    if faiss:
        est.hints.append(f"backend.dense.index=exact (no faiss index: {faiss / GIB:.1f} GiB less; exact search, "
                         "slower)")
    if dataset_triples is not None and "triples" not in collections:  # loaded with the dataset all the same
        rows, chars = dataset_triples
        held = rows * TRIPLE_RECORD_BYTES + chars
        est.memory += held
        est.lines.append(f"the dataset's {rows:,} triples (no triple collection): {held / GIB:.2f} GiB of records")
    if "triples" in collections and "triple_index" in asked:
        graph = collections["triples"][0] * TRIPLE_GRAPH_BYTES
        est.memory += graph
        est.lines.append(f"triple graph: {graph / GIB:.2f} GiB")
    for name, m in own.items():  # their record sizes were fitted with each text counted twice
        if m.embedded:
            more = estimate({name: (m.rows, m.chars)}, dim, model_id, dense_bytes=4 if m.resident else 0,
                            record_bytes=m.record_bytes, in_place=in_place, char_bytes=2, upper_bound=True)
            est.disk += more.disk
            est.memory += more.memory - BASE_BYTES
            est.lines += more.lines
        if m.also is not None:
            est.memory += m.also[1]
            est.lines.append(f"{m.also[0]}: {m.also[1] / GIB:.2f} GiB")
    for node, cls in _own_nodes(cfg) if own else ():
        if (hints := getattr(cls, "capacity_hints", None)) is not None:
            est.hints += hints(node, own, dim)
    return est


def check_run(cfg: DictConfig, res, opened: Collection[str], index_stage: bool = False, **free) -> None:
    """The start-up check of a run (``run.capacity_check``, default true)."""
    if not bool(OmegaConf.select(cfg, "run.capacity_check", default=True)):
        return
    est = run_estimate(cfg, res, opened, index_stage)
    if est is not None:
        check(est, **free)


ALL_COLLECTIONS = frozenset({"passages", "triples"})  # what stage=index opens and embeds


def opened_collections(cfg: DictConfig) -> frozenset[str]:
    """The collections a retrieval run opens, and so embeds when it keeps vectors: ``"passages"`` where a
    component asks for ``passage_collection``, ``"triples"`` for ``triple_collection`` (itself or through the
    triple graph or the triple retriever; :func:`~gear_repro.pipeline.wiring.requested`). HippoRAG v1 (alone or
    in IRCoT) opens neither (it embeds its phrases), T²RAG only the triples, IRCoT only the passages."""
    from gear_repro.pipeline.wiring import requested

    asked = requested(cfg)
    return frozenset(name for name, node in (("passages", "passage_collection"), ("triples", "triple_collection"))
                     if node in asked)
