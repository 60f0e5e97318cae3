"""embedder.backend (issue 11 §2): choices are checked and the embedding cache key includes the back-end."""

from __future__ import annotations

import pytest

from gear_repro.embedding import SentenceEmbedder
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj


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
