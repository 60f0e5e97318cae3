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


@pytest.mark.slow
def test_word_pieces_joined_from_the_triples_are_the_tokenizers() -> None:
    """``beam.scorer_options.triple_pieces``: on the MuSiQue sample's triples, paths of 2 and of 40 triples (past
    MiniLM's 256 word pieces), a path's pieces joined from its triples' give the tokenizer's own encoding of its
    text; a WordPiece tokenizer splitting at whitespace joins, a byte-level BPE one (a word's first piece carries
    its leading space) and one splitting at punctuation first do not."""
    import random

    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from gear_repro.data import load_dataset
    from gear_repro.embedding.word_pieces import PieceTable, encoding, joinable

    emb = _minilm()
    tok, max_len = emb.model.tokenizer, int(emb.model.max_seq_length)
    assert joinable(tok)
    triples = [t.text for t in load_dataset("data/musique_sample").triples]
    table = PieceTable(tok, triples)
    rng = random.Random(0)
    paths = [rng.sample(range(len(triples)), 2) for _ in range(300)] + [rng.sample(range(len(triples)), 40)]
    texts = [" ".join(triples[r] for r in p) for p in paths]
    pieces = [table.joined(p, np.zeros(0, dtype=np.int32)) for p in paths]
    empty = {k: list(v[0]) for k, v in tok([""], truncation=True, max_length=max_len).items()}
    assert encoding(empty, pieces, max_len) == dict(tok(texts, truncation=True, max_length=max_len))
    assert len(tok(texts[-1])["input_ids"]) > max_len  # the long path was truncated, as the tokenizer does
    asked: list[str] = []
    pieces_of = dict(zip(texts, pieces, strict=True))

    def given(text: str) -> np.ndarray:
        asked.append(text)
        return pieces_of[text]

    first = emb.encode_fixed(texts[:10], 8, given)
    again = emb.encode_fixed(texts[5:15], 8, given)
    assert asked == texts[:15]  # a text the LRU holds is not joined again
    assert np.array_equal(again[:5], first[5:]) and emb.stats["fixed_given_pieces"] == 15

    def fast(model, pre) -> PreTrainedTokenizerFast:
        t = Tokenizer(model)
        t.pre_tokenizer = pre
        return PreTrainedTokenizerFast(tokenizer_object=t)

    vocab = {"[UNK]": 0, "a": 1}
    assert joinable(fast(models.WordPiece(vocab, unk_token="[UNK]"), pre_tokenizers.BertPreTokenizer()))
    assert not joinable(fast(models.BPE(), pre_tokenizers.ByteLevel()))
    assert not joinable(fast(models.WordPiece(vocab, unk_token="[UNK]"), pre_tokenizers.Punctuation()))


@pytest.mark.slow
def test_the_exact_scorer_joins_its_triples_word_pieces_and_ranks_the_same(caplog, tmp_path) -> None:
    """With ``triple_pieces`` on, NaiveGE's exact rankings and scores on a slice of the MuSiQue sample equal those of
    tokenised texts, bit for bit; where the joined pieces differ from the tokenizer's encoding on the first call,
    the texts are tokenised (warned)."""
    import logging

    from gear_repro.backends.base import IndexDoc
    from gear_repro.backends.memory import MemoryBackend
    from gear_repro.core.triple_graph import TripleIndex, triple_docs
    from gear_repro.data import load_dataset
    from gear_repro.methods.gear.expansion import NaiveGE
    from gear_repro.retrieval.base import HybridRetriever
    from tests.helpers.gear_slice import make_slice

    ds = load_dataset(make_slice(tmp_path / "slice", n_passages=120, n_questions=5))
    questions = ds.questions
    base = _minilm()
    backend = MemoryBackend()
    pcoll = backend.open_collection("passages", [IndexDoc(p.id, p.content) for p in ds.passages], base)
    tcoll = backend.open_collection("triples", triple_docs(ds.triples), base)
    index = TripleIndex(tcoll, ds.triples)

    def run(joined: bool, spoil: bool = False):
        emb = _minilm()
        emb._model = base.model
        naive = NaiveGE(index, emb, beam={"scorer": "exact", "path_cache": False,
                                          "scorer_options": {"triple_pieces": joined}})
        if spoil:  # pieces of other ids than the tokenizer's: the first call's check must catch it
            table, between = naive.scorer._pieces
            table.ids = table.ids + 1
        hybrid = HybridRetriever(pcoll, emb)
        rankings = [naive.expand(q.question, hybrid.retrieve(q.question, 5)).ranking for q in questions]
        out = [(list(r.ids), [float(x) for x in r.scores]) for r in rankings]
        return out, naive.scorer, emb

    plain, plain_scorer, _ = run(False)
    joined, scorer, emb = run(True)
    assert joined == plain and scorer._pieces is not None and plain_scorer._pieces is None
    assert emb._pieces_ok is True and scorer.stats["paths_encoded"] == plain_scorer.stats["paths_encoded"] > 0
    assert emb.stats["fixed_given_pieces"] == scorer.stats["paths_encoded"]  # none tokenised
    with caplog.at_level(logging.WARNING):
        spoiled, spoiled_scorer, emb = run(True, spoil=True)
    assert spoiled == plain and emb._pieces_ok is False and "the texts are tokenised" in caplog.text
    assert emb.stats["fixed_given_pieces"] == 0
