"""The exact scorer's fixed-shape passes (``SentenceEmbedder.encode_fixed``) tokenise their texts once per call and
build each pass's tensors from those word pieces: the tensors, and so the vectors, are bit for bit those of
tokenising every pass again with ``padding="max_length"`` (the implementation before, ``per_pass_reference``)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.requirements import missing

TEXTS = ["Marie Curie won Nobel Prize in Physics Marie Curie born in Warsaw",
         "1986 FIFA World Cup held in Mexico Mexico capital Mexico City", "", "a b c d", "Paris",
         "Kingdom of the Netherlands country Netherlands Antilles Netherlands Antilles dissolved in 2010",
         "Paris capital of France France member of European Union", "The Mekong flows through Laos Laos borders Vietnam",
         "Who is the spouse of the Green performer?", "Laos borders Vietnam", "x " * 400,
         "What county is the city where the author of Dune was born in?", "1986 FIFA World Cup held in Mexico",
         "Stanley Kubrick directed 2001: A Space Odyssey 2001: A Space Odyssey released in 1968"]


def _minilm(precision: str = "fp32"):
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    return SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, precision=precision)


def per_pass_reference(emb, texts: list[str], rows: int) -> np.ndarray:
    """encode_fixed as it was first written: every pass tokenised again, padded to its shape by the tokenizer."""
    import torch

    from gear_repro.embedding.embedder import LENGTH_STEP

    model = emb.model
    tok, max_len = model.tokenizer, int(model.max_seq_length)
    groups: dict[int, list[int]] = {}
    for i, ids in enumerate(tok(texts, truncation=True, max_length=max_len)["input_ids"]):
        groups.setdefault(min(max_len, -(-len(ids) // LENGTH_STEP) * LENGTH_STEP), []).append(i)
    out = np.empty((len(texts), emb.dim), dtype=np.float32)
    for length, idx in sorted(groups.items()):
        for a in range(0, len(idx), rows):
            part = idx[a:a + rows]
            batch = [texts[i] for i in part] + [""] * (rows - len(part))
            feats = tok(batch, padding="max_length", truncation=True, max_length=length, return_tensors="pt")
            with torch.inference_mode(), emb.autocast():
                vecs = model(dict(feats))["sentence_embedding"]
            out[part] = emb._unit(vecs[:len(part)])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("side", ["right", "left"])
def test_fixed_batches_are_the_tokenizers_padded_batches(side: str) -> None:
    """Every field (ids, token types, attention mask) equals the tokenizer's own ``padding="max_length"`` output,
    on either padding side, with the empty text of unused rows and a text truncated at the model's length."""
    emb = _minilm()
    tok = emb.model.tokenizer
    was = tok.padding_side
    tok.padding_side = side
    try:
        max_len = int(emb.model.max_seq_length)
        texts = [*TEXTS, ""]
        enc = tok(texts, truncation=True, max_length=max_len)
        assert len(enc["input_ids"][TEXTS.index("x " * 400)]) == max_len  # truncated at 256
        for picks, length in (([0, 1, 3, 4], 24), ([2, len(TEXTS), len(TEXTS)], 8),
                              ([TEXTS.index("x " * 400), len(TEXTS)], max_len), ([5, 13, 9], 32)):
            got = emb._fixed_batch(tok, enc, picks, length)
            want = tok([texts[i] for i in picks], padding="max_length", truncation=True, max_length=length,
                       return_tensors="pt")
            assert list(got) == list(want) == ["input_ids", "token_type_ids", "attention_mask"]
            for key in want:
                assert got[key].dtype == want[key].dtype and got[key].shape == (len(picks), length)
                assert got[key].tolist() == want[key].tolist(), key
        with pytest.raises(ValueError, match="do not fit a pass of length 8"):
            emb._fixed_batch(tok, enc, [0], 8)
    finally:
        tok.padding_side = was


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_encode_fixed_tokenises_once_and_keeps_every_bit(precision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One tokenizer call for a call of several passes (before: one per pass more), and the vectors of the
    per-pass tokenisation, bit for bit; the fixed-token and slot counters as before."""
    from gear_repro.embedding.precision import native_bf16

    if precision == "bf16" and not native_bf16("cpu")[0]:
        pytest.skip("no native bf16 on this CPU")
    emb = _minilm(precision)
    rows = 4
    want = per_pass_reference(emb, TEXTS, rows)
    tok_type = type(emb.model.tokenizer)
    calls: list[int] = []
    real_call = tok_type.__call__

    def counting(self, *args, **kwargs):
        calls.append(len(args[0]) if args else 0)
        return real_call(self, *args, **kwargs)

    monkeypatch.setattr(tok_type, "__call__", counting)
    got = emb.encode_fixed(TEXTS, rows)
    assert calls == [len(TEXTS) + 1]  # the texts and the empty text of unused rows, once
    assert np.array_equal(got, want)  # bit for bit, not just close
    lengths = [len(ids) for ids in real_call(emb.model.tokenizer, TEXTS, truncation=True, max_length=256)["input_ids"]]
    assert emb.stats["fixed_tokens"] == sum(lengths)
    groups: dict[int, int] = {}
    for n in lengths:
        groups[min(256, -(-n // 8) * 8)] = groups.get(min(256, -(-n // 8) * 8), 0) + 1
    assert emb.stats["fixed_slots"] == sum(rows * length * -(-count // rows) for length, count in groups.items())
