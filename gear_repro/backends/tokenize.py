"""BM25 text analysis for the memory backend.

``standard`` (the default): Lucene's ``StandardAnalyzer`` without stop words, the analysis of an Elasticsearch
``text`` field (GEAR App. B.1; HippoRAG legacy ``src/elastic_search_tool.py``): words split at Unicode word
boundaries (UAX#29, the ``regex`` module's WORD flag, as Lucene's ``StandardTokenizer``), every segment that holds a
letter or a digit kept (``love's``, ``u.s``, ``3.14``, ``1,000,000``, one token per ideograph), lower-cased one code
point at a time (Java's ``Character.toLowerCase``: ``İ`` -> ``i``, no final sigma), tokens longer than 255 characters
cut into pieces of 255 (``StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH``). tests/test_bm25_lucene.py checks it token for
token against the real Lucene 9.5 on every passage, triple and question of the three bundled samples.

``word2``: the earlier analysis (scikit-learn/bm25s's ``\\w\\w+``: one-character tokens dropped, words cut at
apostrophes, dots and commas), kept under its own name for the numbers recorded with it.

Either may be followed by a stop-word list and a Snowball stemmer (``backend.bm25.stopwords`` /
``backend.bm25.stemmer``, or ``analyzer=english``): close to, not identical with, Elasticsearch's ``english``
analyzer (which uses the Porter stemmer and a possessive filter).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import bm25s
import regex

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


class Tokenizer(Choice):
    """How text is split into tokens (backend.bm25.tokenizer)."""

    standard = "standard"  # Lucene's StandardTokenizer + LowerCaseFilter: Elasticsearch's default analysis
    word2 = "word2"  # the earlier \\w\\w+ split (bm25s's default pattern)


MAX_TOKEN_LENGTH = 255  # Lucene StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH
_BOUNDARY = regex.compile(r"(?wV1)\b")  # Unicode default word boundaries (UAX#29)
# the segments StandardTokenizer emits: words and numbers (Word_Break ALetter, Hebrew_Letter, Numeric, Katakana),
# single ideographs and hiragana, emoji; not spaces, punctuation, symbols or superscripts (², Word_Break Other)
_WORDLIKE = regex.compile(r"[\p{WB=ALetter}\p{WB=Hebrew_Letter}\p{WB=Numeric}\p{WB=Katakana}\p{Ideographic}"
                          r"\p{Script=Hiragana}\p{Extended_Pictographic}\u2600-\u26ff]")  # Lucene's emoji data are
# Unicode 11's, where the Miscellaneous Symbols block (♮, ★) is pictographic; later versions took much of it out
# Thai, Lao, Myanmar, Khmer (Line_Break Complex_Context): UAX#29 cuts every character, StandardTokenizer keeps a run
_SOUTHEAST_ASIAN = regex.compile(r"(\p{Lb=SA}+)")


def _lower(token: str) -> str:
    """Java's ``Character.toLowerCase`` per code point (Lucene's LowerCaseFilter): Python's ``str.lower`` maps
    ``İ`` to two code points and a word-final ``Σ`` to ``ς``; Java does neither."""
    low = token.lower()
    if len(low) == len(token) and "ς" not in low:
        return low
    return "".join("i" if c == "İ" else c.lower() for c in token)


# The same segmentation for ASCII text, where UAX#29 reduces to: runs of letters, digits and "_" (WB5, WB8-10, WB13),
# joined across one ":", "." or "'" between two letters (WB6-7) and one ".", ",", ";" or "'" between two digits
# (WB11-12); a run without a letter or digit ("_") is no token. Five times faster than the general path, which
# tests/test_bm25_lucene.py checks it against (and both against Lucene) on every sample text.
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]+(?:(?:(?<=[A-Za-z])[:.'](?=[A-Za-z])|(?<=[0-9])[.,;'](?=[0-9]))[A-Za-z0-9_]+)*")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")


def standard_tokens(text: str) -> list[str]:
    """Lucene's StandardAnalyzer (no stop words) tokens of ``text`` (module docstring)."""
    if text.isascii():
        return [t for w in _ASCII_WORD.findall(text.lower()) if _ASCII_ALNUM.search(w)
                for t in ([w] if len(w) <= MAX_TOKEN_LENGTH else _cut(w))]
    return unicode_standard_tokens(text)


def _cut(token: str) -> list[str]:
    return [token[i:i + MAX_TOKEN_LENGTH] for i in range(0, len(token), MAX_TOKEN_LENGTH)]


def unicode_standard_tokens(text: str) -> list[str]:
    """:func:`standard_tokens` by the general path (any text): UAX#29 segments of the ``regex`` module."""
    out: list[str] = []
    for i, piece in enumerate(_SOUTHEAST_ASIAN.split(text)):
        if i % 2:  # a Complex_Context run: one token
            _emit(_lower(piece), out)
            continue
        for seg in _BOUNDARY.split(piece):
            if seg and _WORDLIKE.search(seg):
                _emit(_lower(seg), out)
    return out


def _emit(seg: str, out: list[str]) -> None:
    """Append ``seg``, cut into pieces of at most MAX_TOKEN_LENGTH characters as StandardTokenizer cuts it."""
    if len(seg) <= MAX_TOKEN_LENGTH:
        out.append(seg)
    else:
        out.extend(_cut(seg))


@lru_cache(maxsize=4)
def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


def _analyse(texts: Sequence[str], stopwords: str | None, stemmer: str | None, return_ids: bool):
    return bm25s.tokenize(list(texts), lower=True, stopwords=stopwords, stemmer=_stemmer(stemmer),
                          return_ids=return_ids, show_progress=False)


def tokenize_ids(texts: Sequence[str], stopwords: str | None = None,
                 stemmer: str | None = None) -> bm25s.tokenization.Tokenized:
    """The same analysis as :func:`tokenize`, as bm25s ``Tokenized`` (token-id lists + vocabulary): what the
    index is built from. Ids instead of one string object per token occurrence keep the build's memory to
    the vocabulary; the BM25 scores are identical (tests/test_bm25_tokens.py)."""
    return _analyse(texts, stopwords, stemmer, return_ids=True)


def tokenize(texts: Sequence[str], stopwords: str | None = None, stemmer: str | None = None) -> list[list[str]]:
    """Token strings per text with the ``word2`` analysis (module docstring)."""
    return [list(t) for t in _analyse(texts, stopwords, stemmer, return_ids=False)]


def analyse(texts: Sequence[str], tokenizer: str = "standard", stopwords: str | None = None,
            stemmer: str | None = None) -> list[list[str]]:
    """Token strings per text: ``tokenizer``'s tokens, then the stop words left out and the stemmer applied."""
    if tokenizer == Tokenizer.word2.value:
        return tokenize(texts, stopwords, stemmer)
    docs = [standard_tokens(t) for t in texts]
    if stopwords:
        stop = set(bm25s.tokenization._infer_stopwords(stopwords))
        docs = [[t for t in d if t not in stop] for d in docs]
    stem = _stemmer(stemmer)
    return [stem.stemWords(d) for d in docs] if stem is not None else docs
