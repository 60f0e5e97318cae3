"""CPU encoder back-ends for the SBERT embedder (GEAR §6.2 uses all-mpnet-base-v2): ONNX Runtime (fp32 or
dynamic int8) and OpenVINO, exported offline from the local sentence-transformers folder.

``embedder.backend``: ``torch`` (default, sentence-transformers itself; reproduces the recorded numbers),
``onnx`` (the transformer exported to ONNX, run by onnxruntime), ``onnx-int8`` (the same graph with dynamic int8
weight quantisation, ``onnxruntime.quantization.quantize_dynamic``) or ``openvino`` (the fp32 ONNX graph compiled
by OpenVINO in ``embedder.precision``: its CPU plugin's ``INFERENCE_PRECISION_HINT`` is always set, f32 or bf16,
because its own default is bf16 on a CPU with native bf16 and f32 elsewhere). Pooling and normalisation follow
the folder's sentence-transformers modules (mean pooling over the attention mask, L2 normalisation), done in
numpy. Exports live in $GEAR_CACHE/onnx/<model folder>-<its content identity>/ and are written atomically, so
concurrent runs may export at the same time. sentence-transformers' own ONNX path needs
``optimum``, whose releases require transformers < 4.58; this module needs only onnxruntime/onnx/openvino.
Agreement with torch fp32 and speed: docs/encoders.md (``benchmarks/bench_encoders.py``).
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from gear_repro.embedding.precision import Precision
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import model_path_identity
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice


class EncoderBackend(Choice):
    """The encoder runtime (embedder.backend); ``onnx-int8`` is not an identifier, so that member's name differs."""

    torch = "torch"  # sentence-transformers itself (the recorded numbers)
    onnx = "onnx"  # the transformer exported to ONNX, run by onnxruntime
    onnx_int8 = "onnx-int8"  # the same graph with dynamic int8 weights (lossy)
    openvino = "openvino"  # the fp32 ONNX graph compiled by OpenVINO, in embedder.precision (f32 or bf16)


BACKENDS = tuple(m.value for m in EncoderBackend)
LOSSY_BACKENDS = (EncoderBackend.onnx_int8.value,)  # vectors far from the model's (cosine 0.96 MiniLM, 0.77 mpnet)
OV_PRECISION = {Precision.fp32: "f32", Precision.bf16: "bf16"}  # OpenVINO's INFERENCE_PRECISION_HINT values


def _export_fp32(folder: Path, out: Path) -> None:
    """torch.onnx export of the folder's transformer: (input_ids, attention_mask) -> last_hidden_state."""
    import torch
    from transformers import AutoModel

    class _Hidden(torch.nn.Module):  # keyword call: the positional order of forward() differs by model
        def __init__(self, m: torch.nn.Module):
            super().__init__()
            self.m = m

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    model = _Hidden(AutoModel.from_pretrained(str(folder)).eval())
    dummy = {"input_ids": torch.ones(1, 8, dtype=torch.long), "attention_mask": torch.ones(1, 8, dtype=torch.long)}
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        # dynamo=False on purpose (the TorchScript exporter): its DeprecationWarning says so and is not shown (under
        # pytest's -W error for gear_repro it failed every first export, i.e. every test on a fresh $GEAR_CACHE)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(model, (dummy["input_ids"], dummy["attention_mask"]), tmp,
                              input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                              dynamic_axes={"input_ids": {0: "b", 1: "n"}, "attention_mask": {0: "b", 1: "n"},
                                            "last_hidden_state": {0: "b", 1: "n"}},
                              opset_version=17, dynamo=False)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _quantize(src: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".onnx.tmp")
    os.close(fd)
    try:
        quantize_dynamic(str(src), tmp, weight_type=QuantType.QInt8)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def export_dir(folder: Path) -> Path:
    """Where the model in ``folder`` is exported: ``$GEAR_CACHE/onnx/<folder name>-<its files' identity>``. By its
    content, as the embedding keys are (``utils.hashing.model_path_identity``): keyed by the folder's name alone, a
    fine-tuned ``.../model`` ran the bundled MiniLM's graph (its folder is named ``model`` too) and a model retrained
    in place its old graph, under the new model's cache key."""
    identity = model_path_identity(folder)
    return cache_dir() / "onnx" / (f"{folder.name}-{identity[:12]}" if identity else folder.name)


def missing_modules(folder: Path, backend: str) -> list[str]:
    """The Python modules ``backend`` needs for the model in ``folder`` that are not installed: its runtime
    (onnxruntime | openvino), and ``onnx`` while the model is not exported yet (start-up check)."""
    need = ["openvino" if backend == EncoderBackend.openvino else "onnxruntime"]
    if not (export_dir(folder) / "model.onnx").exists():
        need.append("onnx")
    return [m for m in need if find_spec(m) is None]


def exported(folder: Path, backend: str) -> Path:
    """The ONNX file ``backend`` runs for the model in ``folder`` (exported on first use)."""
    d = export_dir(folder)
    fp32 = d / "model.onnx"  # (missing_modules knows this path)
    if not fp32.exists():
        _export_fp32(folder, fp32)
    if backend != "onnx-int8":
        return fp32
    int8 = d / "model-int8.onnx"
    if not int8.exists():
        _quantize(fp32, int8)
    return int8


class RuntimeSentenceModel:
    """The subset of ``SentenceTransformer`` the embedder uses (``encode``, ``tokenizer``, ``max_seq_length``,
    ``get_embedding_dimension``), run by onnxruntime or OpenVINO."""

    def __init__(self, folder: str | os.PathLike, backend: str, num_threads: int | None = None,
                 precision: Precision = Precision.fp32):
        if backend not in BACKENDS[1:]:
            raise ConfigError(f"embedder.backend must be one of {BACKENDS}, got '{backend}'")
        from transformers import AutoTokenizer

        self.folder = Path(folder)
        self.backend = backend
        pooling = json.loads((self.folder / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ConfigError(f"embedder.backend={backend} supports mean-pooling models only ({self.folder})")
        self.dim = int(pooling["word_embedding_dimension"])
        st_cfg = self.folder / "sentence_bert_config.json"
        self.max_seq_length = int(json.loads(st_cfg.read_text()).get("max_seq_length", 512)) if st_cfg.exists() else 512
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        path = exported(self.folder, backend)
        threads = num_threads or 0
        if backend == "openvino":
            import openvino as ov

            core = ov.Core()
            if threads:
                core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads})
            # explicit: OpenVINO's default is bf16 wherever the CPU has it (avx512_bf16 / AMX), which made
            # "fp32" runs bf16 on such machines and f32 on others under one cache key (why the key names the precision run)
            self._ov = core.compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": OV_PRECISION[precision]})
            self.inference_precision = self._ov.get_property("INFERENCE_PRECISION_HINT").get_type_name()  # f32, bf16
            self._run = lambda feed: self._ov(feed)[0]
        else:
            if precision is not Precision.fp32:
                raise ConfigError(f"embedder.backend={backend} runs fp32 only (embedder.precision={precision})")
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            self._run = lambda feed: sess.run(None, feed)[0]

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool = True,
               **_: object) -> np.ndarray:
        texts = list(texts)
        order = np.argsort([-len(t) for t in texts], kind="stable")  # similar lengths share a batch
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for a in range(0, len(texts), batch_size):
            idx = order[a:a + batch_size]
            enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                 max_length=self.max_seq_length, return_tensors="np")
            mask = enc["attention_mask"].astype(np.int64)
            hidden = self._run({"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": mask})
            m = mask[..., None].astype(np.float32)
            vec = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            if normalize_embeddings:
                vec /= np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)
            out[idx] = vec
        return out
