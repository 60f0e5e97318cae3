"""BM25 text analysis for the memory backend.

Lower-casing, splitting on ``\\w\\w+`` (scikit-learn/bm25s default pattern), English stop words
removed (bm25s "en" list), Snowball English stemming (PyStemmer). Close to, not identical with,
Elasticsearch's ``english`` analyzer (which uses the Porter stemmer and possessive filter).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import bm25s


@lru_cache(maxsize=4)
def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


def _analyse(texts: Sequence[str], stopwords: str | None, stemmer: str | None, return_ids: bool):
    return bm25s.tokenize(list(texts), lower=True, stopwords=stopwords, stemmer=_stemmer(stemmer),
                          return_ids=return_ids, show_progress=False)


def tokenize_ids(texts: Sequence[str], stopwords: str | None = "en",
                 stemmer: str | None = "english") -> bm25s.tokenization.Tokenized:
    """The same analysis as :func:`tokenize`, as bm25s ``Tokenized`` (token-id lists + vocabulary): what the
    index is built from. Ids instead of one string object per token occurrence keep the build's memory to
    the vocabulary; the BM25 scores are identical (tests/test_bm25_tokens.py)."""
    return _analyse(texts, stopwords, stemmer, return_ids=True)


def tokenize(texts: Sequence[str], stopwords: str | None = "en", stemmer: str | None = "english") -> list[list[str]]:
    """Token strings per text, with the analysis described in the module docstring."""
    return [list(t) for t in _analyse(texts, stopwords, stemmer, return_ids=False)]
