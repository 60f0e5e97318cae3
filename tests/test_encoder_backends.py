"""embedder.backend: choices are checked and the embedding cache key includes the back-end."""

from __future__ import annotations

import pytest

from gear_repro.embedding import SentenceEmbedder
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj
from tests.helpers.cpus import AVX2_ONLY, EPYC


def test_backend_in_the_cache_key_and_torch_key_unchanged():
    ids = {b: SentenceEmbedder("all-MiniLM-L6-v2", backend=b).model_id for b in ("torch", "onnx", "onnx-int8", "openvino")}
    assert len(set(ids.values())) == 4
    # torch keeps the key the corpus caches were written under before back-ends existed
    assert ids["torch"] == hash_obj({"model": "all-MiniLM-L6-v2", "normalize": True, "max_seq_length": None}, 12)
    with pytest.raises(ConfigError):
        SentenceEmbedder("all-MiniLM-L6-v2", backend="tensorrt")


def test_lossy_int8_backend_warns(caplog):
    with caplog.at_level("WARNING", logger="gear_repro.embedding.embedder"):
        SentenceEmbedder("all-MiniLM-L6-v2", backend="onnx")
        assert not caplog.records
        SentenceEmbedder("all-MiniLM-L6-v2", backend="onnx-int8")
    assert len(caplog.records) == 1 and "lossy" in caplog.records[0].getMessage()


def test_openvino_backend_keys_its_precision(cpu):
    """OpenVINO's own default precision is bf16 on a CPU with native bf16: its key names the precision that runs,
    so vectors of an explicit f32 and of bf16 never share a cache entry (nor those of older runs, keyed without the
    precision). On a CPU without native bf16 (AVX2 only), bf16 is refused, naming the CPU's lack."""
    cpu(AVX2_ONLY)
    with pytest.raises(ConfigError, match="no native bf16"):
        SentenceEmbedder("all-MiniLM-L6-v2", backend="openvino", precision="bf16")
    cpu(EPYC)
    ids = {p: SentenceEmbedder("all-MiniLM-L6-v2", backend="openvino", precision=p).model_id for p in ("fp32", "bf16")}
    assert ids["fp32"] != ids["bf16"]
    assert ids["fp32"] != hash_obj({"model": "all-MiniLM-L6-v2", "normalize": True, "max_seq_length": None,
                                    "backend": "openvino"}, 12)


@pytest.mark.slow
def test_openvino_runs_the_precision_asked_for():
    """The real OpenVINO path on MiniLM (skipped without `make install-encoders`): fp32 is f32 on every CPU (it was
    bf16 on this project's avx512_bf16 CPU, OpenVINO's default there, under the fp32 name), bf16 is bf16."""
    pytest.importorskip("openvino")
    pytest.importorskip("onnx")
    from gear_repro.embedding.precision import native_bf16

    texts = ["Barack Obama was born in Honolulu, the capital of Hawaii.", "The Eiffel Tower is in Paris.",
             "Lothair II was the son of Emperor Lothair I and Ermengarde of Tours."]
    ref = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)._encode(texts)
    f32 = SentenceEmbedder("all-MiniLM-L6-v2", backend="openvino", cache=False, show_progress=False)
    assert f32.model.inference_precision == "f32"
    assert float((f32._encode(texts) * ref).sum(1).min()) > 0.9999995
    if not native_bf16("cpu")[0]:
        pytest.skip("no native bf16 on this CPU: embedder.precision=bf16 is refused (test_precision.py)")
    # questions by the reference encoder (torch fp32): the vectors of an fp32 run
    assert SentenceEmbedder("all-MiniLM-L6-v2", backend="openvino", precision="bf16").queries.backend == "torch"
    bf16 = SentenceEmbedder("all-MiniLM-L6-v2", backend="openvino", precision="bf16", query_precision="same",
                            cache=False, show_progress=False)
    assert bf16.model.inference_precision == "bf16"
    cos = (bf16._encode(texts) * ref).sum(1)
    assert float(cos.min()) > 0.9999 and float(cos.max()) < 0.9999995  # bf16 indeed: close, never identical


def test_two_model_folders_of_one_name_never_share_an_export(monkeypatch, tmp_path):
    """the ONNX export was keyed by the folder's name, and the bundled MiniLM's folder is named ``model``:
    ``embedder.model=.../finetuned/model embedder.backend=onnx`` ran MiniLM's graph (cosine 1.0 to it, 0.05 to its
    own torch vectors) under the fine-tuned model's cache key; a model retrained in place kept its old graph."""
    from pathlib import Path

    from gear_repro.embedding import runtimes

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path / "cache"))
    made: list[Path] = []

    def fake_export(folder: Path, out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes((folder / "model.safetensors").read_bytes())
        made.append(folder)

    monkeypatch.setattr(runtimes, "_export_fp32", fake_export)
    a, b = tmp_path / "a" / "model", tmp_path / "b" / "model"
    for folder, weights in ((a, b"weights A"), (b, b"weights B")):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(weights)
    assert runtimes.exported(a, "onnx").read_bytes() == b"weights A"
    assert runtimes.exported(b, "onnx").read_bytes() == b"weights B"
    assert runtimes.exported(a, "openvino").read_bytes() == b"weights A" and made == [a, b]  # exported once each
    (a / "model.safetensors").write_bytes(b"weights A, retrained")  # in place: a new export
    assert runtimes.exported(a, "onnx").read_bytes() == b"weights A, retrained"
