"""Vector-based entity matcher (GRIEVER §4.3, after Stoilos et al., 2022).

The query is encoded once: the sentence embedding enc(q) serves dense retrieval and the token-level
embeddings enc_t^q of the same forward pass give every n-gram's embedding. The paper's aggregation formula
is lost in the PDF; we take the mean of the n-gram's sub-word token embeddings (the same mean pooling the
SBERT models apply to a whole sentence), L2-normalised. The entity matching score s_e^q is the maximum
cosine between any n-gram and the entity or one of its aliases; the predicate score s_p^q likewise with the
predicate text (the paper does not say how s_p is obtained; the same matcher is the natural reading).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gear_repro.methods.griever.text import Word, ngram_spans, words


@dataclass
class QueryEncoding:
    """enc(q), the query's words, and one L2-normalised vector per n-gram span (word index [i, j))."""

    text: str
    sentence: np.ndarray
    words: list[Word]
    spans: list[tuple[int, int]]
    ngrams: np.ndarray  # (len(spans), dim)


class TokenEncoder(Protocol):
    """Gives the sentence vector and, per word of ``words(text)``, the sum and count of its token vectors."""

    def encode_tokens(self, text: str, ws: Sequence[Word]) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def _normalise(m: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return m / np.where(n > 0, n, 1.0)


def _cased_as_model(model, text: str) -> str:
    """``text`` lower-cased when the model's transformer module sets ``do_lower_case`` (sentence-transformers < 6
    lower-cased in ``tokenize``, >= 6 in the tokenizer: idempotent), one character for one, so that the tokenizer's
    offsets still index ``text``."""
    module = next(iter(model), None) if hasattr(model, "__iter__") else None
    if not getattr(module, "do_lower_case", False):
        return text
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


class SentenceTokenEncoder:
    """:class:`TokenEncoder` over a sentence-transformers model (one forward pass per text).

    Word vectors are sums of the sub-word tokens whose character offsets fall inside the word; special
    tokens and tokens cut off by the model's max length contribute nothing.
    """

    def __init__(self, embedder):
        self.embedder = embedder

    def encode_tokens(self, text: str, ws: Sequence[Word]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import torch

        model = self.embedder.model
        # one call of the model's own tokenizer gives its features and the character offsets (what
        # sentence-transformers' deprecated `tokenize` built for one text; the golden rankings pin the result)
        features = dict(model.tokenizer([_cased_as_model(model, text)], return_offsets_mapping=True,
                                        truncation=True, padding=True, max_length=model.max_seq_length,
                                        return_tensors="pt"))
        offsets = features.pop("offset_mapping")[0].tolist()
        with torch.no_grad(), self.embedder.autocast():  # the given embedder's precision (the wiring: the query side)
            out = model(features)
        tok = out["token_embeddings"][0].float().cpu().numpy()
        sent = _normalise(out["sentence_embedding"][0].float().cpu().numpy())
        sums = np.zeros((len(ws), tok.shape[1]), np.float32)
        counts = np.zeros(len(ws), np.float32)
        w = 0
        for t, (a, b) in enumerate(offsets[: tok.shape[0]]):
            if b <= a:
                continue
            while w < len(ws) and ws[w].end <= a:
                w += 1
            if w < len(ws) and ws[w].start <= a < ws[w].end:
                sums[w] += tok[t]
                counts[w] += 1
        return sent, sums, counts


class EntityMatcher:
    """n-gram vs entity/alias/predicate cosine scores from one query encoding (§4.3)."""

    def __init__(self, encoder: TokenEncoder, max_ngram: int = 6, trim_stopwords: bool = True,
                 cache_size: int = 4096):
        self.encoder = encoder
        self.max_ngram = max_ngram
        self.trim_stopwords = trim_stopwords
        self._cache: OrderedDict[str, QueryEncoding] = OrderedDict()
        self._cache_size = cache_size

    def encode(self, text: str) -> QueryEncoding:
        hit = self._cache.get(text)
        if hit is not None:
            self._cache.move_to_end(text)
            return hit
        ws = words(text)
        sent, sums, counts = self.encoder.encode_tokens(text, ws)
        spans = [(i, j) for i, j in ngram_spans(ws, self.max_ngram, self.trim_stopwords) if counts[i:j].sum() > 0]
        if spans:
            cs = np.vstack([np.zeros((1, sums.shape[1]), np.float32), np.cumsum(sums, axis=0)])
            cc = np.concatenate([[0.0], np.cumsum(counts)])
            ng = np.stack([(cs[j] - cs[i]) / (cc[j] - cc[i]) for i, j in spans])
            ng = _normalise(ng).astype(np.float32)
        else:
            ng = np.zeros((0, sums.shape[1]), np.float32)
        enc = QueryEncoding(text, sent, ws, spans, ng)
        self._cache[text] = enc
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return enc

    @staticmethod
    def best(enc: QueryEncoding, vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``vectors``: the best n-gram cosine and that n-gram's index (-1 with no n-grams)."""
        if len(enc.spans) == 0 or vectors.shape[0] == 0:
            return np.zeros(vectors.shape[0], np.float32), np.full(vectors.shape[0], -1)
        sims = vectors @ enc.ngrams.T
        arg = sims.argmax(axis=1)
        return sims[np.arange(sims.shape[0]), arg].astype(np.float32), arg
