"""BM25 text analysis for the memory backend.

Lower-casing, splitting on ``\\w\\w+`` (scikit-learn/bm25s default pattern); by default nothing else, close to
Elasticsearch's default ``standard`` analyzer (which also keeps one-character tokens). With
``backend.bm25.stopwords=en backend.bm25.stemmer=english`` (or ``analyzer=english``): English stop words removed
(bm25s "en" list) and Snowball English stemming (PyStemmer), close to, not identical with, Elasticsearch's
``english`` analyzer (which uses the Porter stemmer and possessive filter).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import bm25s

from gear_repro.utils.settings import Choice

StopWords = Choice("StopWords", {v: v for v in (  # bm25s's stop-word lists (backend.bm25.stopwords)
    "en", "english", "en_plus", "english_plus", "de", "german", "nl", "dutch", "fr", "french", "es", "spanish",
    "pt", "portuguese", "it", "italian", "ru", "russian", "sv", "swedish", "no", "norwegian", "zh", "chinese",
    "tr", "turkish", "ko", "korean", "da", "danish")})
StopWords.__doc__ = ("bm25s's stop-word lists (backend.bm25.stopwords; null keeps every token); ``en`` is Lucene's 33 "
                     "English stop words, the list of Elasticsearch's english analyzer.")
Snowball = Choice("Snowball", {v: v for v in (  # PyStemmer's Snowball algorithms (backend.bm25.stemmer)
    "arabic", "armenian", "basque", "catalan", "czech", "danish", "dutch", "dutch_porter", "english", "esperanto",
    "estonian", "finnish", "french", "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian",
    "lithuanian", "nepali", "norwegian", "persian", "polish", "porter", "portuguese", "romanian", "russian",
    "serbian", "sesotho", "spanish", "swedish", "tamil", "turkish", "yiddish")})
Snowball.__doc__ = "PyStemmer's Snowball stemmers (backend.bm25.stemmer; null: no stemming)."


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
