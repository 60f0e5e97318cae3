"""A text's vector and a question's ranking do not depend on what else was encoded or retrieved
in the same call (alone, in a sweep, after a resume)."""

from __future__ import annotations

import numpy as np
import pytest

from gear_repro.backends.memory import top_k_dense
from tests.helpers.requirements import missing

TEXTS = ["Who is the spouse of the Green performer?", "Paris",
         "Kingdom of the Netherlands country Netherlands Antilles",
         "The Mekong river flows through six countries of Southeast Asia before reaching the South China Sea",
         "Marie Curie won Nobel Prize in Physics", "a b", "1986 FIFA World Cup held in Mexico",
         "What county is the city where the author of Dune was born in?"]


@pytest.fixture(scope="module")
def embedder():
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.sbert_weights import resolve_model

    if resolve_model("all-MiniLM-L6-v2") == "all-MiniLM-L6-v2":
        missing("MiniLM not installed offline (make install-test-models)")
    return SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)


@pytest.mark.slow
def test_query_vectors_do_not_depend_on_the_batch(embedder) -> None:
    from gear_repro.embedding import SentenceEmbedder

    alone = np.stack([SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False).encode([t])[0]
                      for t in TEXTS])
    fresh = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)
    fresh._model = embedder.model  # same weights, empty query cache
    in_batch = fresh.encode(TEXTS[::-1])[::-1]
    assert np.array_equal(alone, in_batch)  # bit for bit, not just close


def test_dense_scores_do_not_depend_on_other_queries() -> None:
    rng = np.random.default_rng(0)
    m = rng.standard_normal((500, 64)).astype(np.float32)
    qs = rng.standard_normal((7, 64)).astype(np.float32)
    together = top_k_dense(m, qs, 20)
    for i in range(len(qs)):
        idx, sc = top_k_dense(m, qs[i:i + 1], 20)[0]
        assert np.array_equal(idx, together[i][0]) and np.array_equal(sc, together[i][1])


PATHS = ["Marie Curie won Nobel Prize in Physics Marie Curie born in Warsaw",
         "1986 FIFA World Cup held in Mexico Mexico capital Mexico City",
         "Kingdom of the Netherlands country Netherlands Antilles Netherlands Antilles dissolved in 2010",
         "a b c d", "Paris capital of France France member of European Union",
         "The Mekong flows through Laos Laos borders Vietnam"]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_path_vectors_in_fixed_shape_batches_do_not_depend_on_the_batch(embedder, precision) -> None:
    """The exact scorer's batched path vectors (``encode_fixed``) are bit-identical whether a path is
    encoded alone, with others, in another order or position, or with other batch companions."""
    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding.precision import native_bf16

    if precision == "bf16" and not native_bf16("cpu")[0]:
        pytest.skip("no native bf16 on this CPU")

    if precision == "fp32":
        model = embedder.model
    else:  # a bf16 embedder packs the linear layers of the model it loads (gear_repro/embedding/bf16.py)
        model = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, precision=precision).model
    from gear_repro.embedding.bf16 import PackedLinear

    assert any(isinstance(m, PackedLinear) for m in model.modules()) == (precision == "bf16")

    def fresh() -> SentenceEmbedder:  # same weights, empty memo
        e = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, precision=precision)
        e._model = model
        return e

    rows = 4
    alone = np.stack([fresh().encode_fixed([t], rows)[0] for t in PATHS])
    together = fresh().encode_fixed(PATHS, rows)  # more paths than rows: several passes per length
    reversed_ = fresh().encode_fixed(PATHS[::-1], rows)[::-1]
    mixed = fresh().encode_fixed([*TEXTS, *PATHS, "Laos borders Vietnam"], rows)[len(TEXTS):len(TEXTS) + len(PATHS)]
    for other in (together, reversed_, mixed):
        assert np.array_equal(alone, other)  # bit for bit, not just close
    lone = fresh().encode(PATHS)  # each alone at its own length: the same text, the same meaning
    assert ((alone * lone).sum(axis=1) > 0.9999).all()


def test_identical_rows_score_exactly_alike_wherever_they_stand() -> None:
    """A BLAS product rounds a row by its place in the block (AVX2 and AVX-512 kernels block differently), so two
    triples or paths of one text could score apart and the tie between them flip by CPU. The scorers sum each row
    on its own: identical rows score identically, and the tie goes to the lower row."""
    from gear_repro.methods.gear.scorers import cosines

    rng = np.random.default_rng(0)
    v, q = (x / np.linalg.norm(x) for x in rng.standard_normal((2, 384)).astype(np.float32))
    m = np.vstack([rng.standard_normal((5, 384)).astype(np.float32), np.tile(v, (37, 1))])
    scores = cosines(m, np.arange(m.shape[0]), q)
    assert len(set(scores[5:].tolist())) == 1
    assert np.array_equal(cosines(m, np.arange(5, 42)[::-1], q), scores[5:])


@pytest.mark.slow
def test_a_repeated_text_gets_one_vector_in_a_corpus_encode(embedder, tmp_path, monkeypatch) -> None:
    """encode_corpus encodes each distinct text once: its copies at other places (other batches, other padding)
    share its vector bit for bit, so ties between duplicate triples are decided by row, not by float noise."""
    from gear_repro.embedding import SentenceEmbedder

    monkeypatch.setenv("GEAR_CACHE", str(tmp_path))
    e = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, batch_size=3)
    e._model = embedder.model
    dup = "Virginia is bordered by West Virginia"
    texts = [dup, *TEXTS[:4], dup, *TEXTS[4:], "a", dup]
    vecs = e.encode_corpus(texts)
    assert e.stats["encoded"] == len(set(texts))
    assert np.array_equal(vecs[0], vecs[5]) and np.array_equal(vecs[0], vecs[-1])


@pytest.mark.slow
def test_fixed_shape_passes_replayed_from_graphs_give_the_eager_vectors(embedder, monkeypatch, caplog) -> None:
    """``embedder.cuda_graphs``: the passes go through one static input and output per shape (a CPU stand-in
    replays them, tests/helpers/doubles.py), the call's vectors come back in one copy, in their texts' order, equal
    to the eager passes' bit for bit and independent of the batch; a first capture that fails leaves the run eager
    and says why; one failing after others were captured stops, naming the setting."""
    import logging

    from gear_repro.embedding import SentenceEmbedder
    from gear_repro.embedding import embedder as module
    from tests.helpers.doubles import EagerShapeGraphs

    texts = [*PATHS, *TEXTS, "Laos borders Vietnam"]
    rows = 4
    eager = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False)
    eager._model = embedder.model
    assert eager._pass_graphs() is None  # a CPU: the setting has no effect
    want = eager.encode_fixed(texts, rows)
    built: list[EagerShapeGraphs] = []

    def graphed(fail_at: int | None = None, **settings) -> SentenceEmbedder:
        e = SentenceEmbedder("all-MiniLM-L6-v2", cache=False, show_progress=False, **settings)
        e._model = embedder.model
        e.device = "cuda"  # the graph branch, with the CPU stand-in below
        monkeypatch.setattr(module, "ShapeGraphs",
                            lambda fwd, device, dim: built.append(EagerShapeGraphs(fwd, device, dim, fail_at)) or built[-1])
        return e

    e = graphed()
    got = e.encode_fixed(texts, rows)
    shapes = {(rows, -(-len(ids) // 8) * 8) for ids in embedder.model.tokenizer(texts)["input_ids"]}
    passes = e.stats["fixed_graph_passes"]
    assert np.array_equal(got, want) and built[-1].captured == len(shapes) < passes == built[-1].replays
    assert e.describe()["cuda_graphs"] is True
    e.forget()
    assert np.array_equal(e.encode_fixed(texts[::-1], rows)[::-1], want)  # the same graphs, other companions
    assert np.array_equal(e.encode_fixed(texts[:1], rows)[0], want[0])
    assert built[-1].captured == len(shapes)  # no shape captured twice

    off = graphed(cuda_graphs=False)
    assert np.array_equal(off.encode_fixed(texts, rows), want) and off.stats["fixed_graph_passes"] == 0

    with caplog.at_level(logging.WARNING, logger=module.__name__):
        failed = graphed(fail_at=0)
        assert np.array_equal(failed.encode_fixed(texts, rows), want)
    assert failed.stats["fixed_graph_passes"] == 0 and failed._pass_graphs() is None
    assert failed.describe()["cuda_graphs"].startswith("failed, eager: RuntimeError: CUDA error: operation not")
    assert "the exact scorer's passes run eagerly" in caplog.text
    with pytest.raises(RuntimeError, match=r"after 1 shape\(s\) were captured.*embedder.cuda_graphs=false"):
        graphed(fail_at=1).encode_fixed(texts, rows)
