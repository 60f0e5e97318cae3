"""Lucene's BM25, computed as Lucene 9 computes it: the scores and rankings of an Elasticsearch 8 ``match`` query.

Lucene 9.5 ``BM25Similarity`` (k1, b) over a field analysed by :func:`gear_repro.backends.tokenize.standard_tokens`:

- a document's length is stored as one byte, ``SmallFloat.intToByte4(number of tokens)``, and read back as
  ``LENGTH_TABLE[byte]`` (lengths above 40 lose precision: 1,000 and 1,023 tokens share a byte);
- ``idf = (float) log(1 + (docCount - df + 0.5) / (df + 0.5))`` in double, ``avgdl = (float) (sumTotalTermFreq /
  docCount)``, both over the documents that hold a token;
- the per-byte factor ``1f / (k1 * ((1 - b) + b * LENGTH_TABLE[i] / avgdl))`` and the term score ``w - w / (1f +
  freq * factor)`` with ``w = boost * idf``, all in float32 (``BM25Similarity.BM25Scorer.score``);
- the ``match`` query is an OR of the query's tokens (``QueryBuilder``); ``BooleanQuery.rewrite`` merges a repeated
  token into one clause whose boost is its count, and a document's clause scores are summed in double and rounded
  to float32 (``WANDScorer.score``);
- hits are the documents that hold a query token, best first, ties by document order (``TopScoreDocCollector``).

tests/test_bm25_lucene.py compares the rankings and scores with the real Lucene 9.5 (the jar of pyserini 0.22.1) on
every question of the three bundled samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from gear_repro.utils.arrays import top_k_row


def _long_to_int4(i: int) -> int:
    """``SmallFloat.longToInt4``: a 4-bit mantissa and a shift."""
    bits = i.bit_length()
    if bits < 4:
        return i
    shift = bits - 4
    return ((i >> shift) & 0x07) | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits, shift = i & 0x07, (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_FREE = 255 - _long_to_int4(2**31 - 1)  # SmallFloat.NUM_FREE_VALUES: small lengths are stored exactly


def int_to_byte4(i: int) -> int:
    """``SmallFloat.intToByte4`` as an unsigned byte: how Lucene stores a document's length."""
    return i if i < _FREE else _FREE + _long_to_int4(i - _FREE)


def byte4_to_int(b: int) -> int:
    """``SmallFloat.byte4ToInt`` of an unsigned byte."""
    return b if b < _FREE else _FREE + _int4_to_long(b - _FREE)


LENGTH_TABLE = np.asarray([byte4_to_int(b) for b in range(256)], dtype=np.float32)
_NORM_OF_LENGTH: dict[int, int] = {}


def _norm(length: int) -> int:
    b = _NORM_OF_LENGTH.get(length)
    if b is None:
        b = _NORM_OF_LENGTH[length] = int_to_byte4(length)
    return b


class LuceneBM25:
    """An in-memory inverted index scored as Lucene's BM25Similarity (module docstring). Built from each
    document's tokens; :meth:`scores` gives a query's full score vector, :meth:`top` its hits."""

    def __init__(self, docs_tokens: Sequence[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = float(k1), float(b)
        self.n_docs = len(docs_tokens)
        vocab: dict[str, int] = {}
        rows: list[int] = []  # term id per posting
        cols: list[int] = []  # doc per posting
        freqs: list[int] = []
        norms = np.zeros(self.n_docs, dtype=np.uint8)
        total = 0
        for d, toks in enumerate(docs_tokens):
            if not toks:
                continue
            total += len(toks)
            norms[d] = _norm(len(toks))
            for t, f in Counter(toks).items():
                rows.append(vocab.setdefault(t, len(vocab)))
                cols.append(d)
                freqs.append(f)
        self.vocab = vocab
        order = np.argsort(np.asarray(rows, dtype=np.int64), kind="stable")  # term-major, docs ascending
        self.docs = np.asarray(cols, dtype=np.int32)[order]
        self.freqs = np.asarray(freqs, dtype=np.float32)[order]
        df = np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(vocab))
        self.indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        self.norms = norms
        doc_count = int(np.count_nonzero([len(t) for t in docs_tokens])) if self.n_docs else 0
        self.doc_count = doc_count
        avgdl = np.float32(total / doc_count) if doc_count else np.float32(1.0)
        k1_, b_ = np.float32(self.k1), np.float32(self.b)
        with np.errstate(divide="ignore"):
            self.cache = (np.float32(1.0) / (k1_ * ((np.float32(1.0) - b_) + b_ * LENGTH_TABLE / avgdl))).astype(
                np.float32)
        self.idf = np.log(1.0 + (doc_count - df + 0.5) / (df + 0.5)).astype(np.float32)
        # every posting's score at boost 1: what nearly every query clause adds
        self.unit = self._term_scores(np.repeat(self.idf, df), self.freqs, self.norms[self.docs])
        self._boost_memo: dict[tuple[int, int], np.ndarray] = {}

    def _term_scores(self, weight: np.ndarray, freqs: np.ndarray, norm_bytes: np.ndarray) -> np.ndarray:
        """``BM25Scorer.score``: ``w - w / (1f + freq * cache[norm])`` in float32."""
        w = weight.astype(np.float32, copy=False)
        return (w - w / (np.float32(1.0) + freqs * self.cache[norm_bytes])).astype(np.float32, copy=False)

    def scores(self, query_tokens: Sequence[str]) -> np.ndarray | None:
        """The query's score of every document (float32; 0 where no token matches), or None when no query
        token is indexed."""
        docs, vals = [], []
        for term, count in Counter(query_tokens).items():
            t = self.vocab.get(term)
            if t is None:
                continue
            a, z = self.indptr[t], self.indptr[t + 1]
            docs.append(self.docs[a:z])
            vals.append(self.unit[a:z] if count == 1 else self._boosted(t, count))
        if not docs:
            return None
        # per document, the clause scores summed in double in clause order, as sequential adds from 0 would
        summed = np.bincount(np.concatenate(docs), weights=np.concatenate(vals), minlength=self.n_docs)
        return summed.astype(np.float32)

    def _boosted(self, t: int, count: int) -> np.ndarray:
        """A repeated token's clause (BooleanQuery.rewrite: boost = count, weight = boost * idf in float32);
        memoised, since questions repeat the same common words ("the", "of")."""
        memo = self._boost_memo
        vals = memo.get((t, count))
        if vals is None:
            a, z = self.indptr[t], self.indptr[t + 1]
            vals = self._term_scores(np.full(z - a, np.float32(count) * self.idf[t], np.float32), self.freqs[a:z],
                                     self.norms[self.docs[a:z]])
            if len(memo) >= 256:
                memo.pop(next(iter(memo)))
            memo[(t, count)] = vals
        return vals

    _ARRAYS = ("docs", "freqs", "indptr", "norms", "cache", "idf", "unit")

    def save(self, folder: str) -> None:
        """Write the index into ``folder`` (one .npz; the vocabulary in id order, as one UTF-8 text)."""
        terms = sorted(self.vocab, key=self.vocab.__getitem__)  # no token holds a line break (a word boundary)
        np.savez(Path(folder) / "lucene_bm25.npz", terms=np.frombuffer("\n".join(terms).encode("utf-8"), np.uint8),
                 meta=np.asarray([self.k1, self.b, self.n_docs, self.doc_count], dtype=np.float64),
                 **{a: getattr(self, a) for a in self._ARRAYS})

    @classmethod
    def load(cls, folder: str | Path) -> LuceneBM25:
        """An index :meth:`save` wrote."""
        with np.load(Path(folder) / "lucene_bm25.npz") as z:
            self = cls.__new__(cls)
            for a in cls._ARRAYS:
                setattr(self, a, z[a])
            terms = z["terms"].tobytes().decode("utf-8").split("\n") if z["terms"].size else []
            self.vocab = {t: i for i, t in enumerate(terms)}
            self._boost_memo = {}
            k1, b, n_docs, doc_count = z["meta"].tolist()
        self.k1, self.b, self.n_docs, self.doc_count = k1, b, int(n_docs), int(doc_count)
        return self

    def top(self, query_tokens: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` matching documents (indices, float32 scores), ties by document order."""
        s = self.scores(query_tokens)
        if s is None or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        order = np.asarray([d for d in top_k_row(s, k) if s[d] > 0], dtype=np.int64)
        return order, s[order]
