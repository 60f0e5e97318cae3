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


def tokenize(texts: Sequence[str], stopwords: str | None = "en", stemmer: str | None = "english") -> list[list[str]]:
    """Token strings per text, with the analysis described in the module docstring."""
    tok = bm25s.tokenize(list(texts), lower=True, stopwords=stopwords, stemmer=_stemmer(stemmer),
                         return_ids=False, show_progress=False)
    return [list(t) for t in tok]
