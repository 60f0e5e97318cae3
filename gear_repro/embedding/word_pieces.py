"""A path's word pieces joined from its triples' (``beam.scorer_options.triple_pieces``, docs/encoders.md).

The exact scorer encodes path texts, its triples' texts joined by a separator (GEAR §4.2). Tokenising a cold pass's
~75 path texts was 3.8 ms of a 17 ms NaiveGE pass on an H200 once the GPU's passes were graphs. For a tokenizer
that normalises character by character and splits words at whitespace before its WordPiece model (BERT's, hence
MiniLM's and mpnet's), a text joined at whitespace has exactly its parts' word pieces, joined: the collection's
triples are tokenised once, a path's pieces are concatenated, and the encoder sees the ids the tokenizer gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from gear_repro.utils.io import record_bar

# normalisers that act on characters one at a time (or on the ends of the whole text)
PER_CHARACTER = frozenset({"BertNormalizer", "Lowercase", "NFC", "NFD", "NFKC", "NFKD", "StripAccents", "Strip"})
WORD_SPLITTERS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})  # each splits at whitespace
CHUNK = 8192  # texts tokenised per call when a table is built


def _types(spec: dict[str, Any] | None, members: str) -> list[str]:
    """The component types of a tokenizer.json entry, a ``Sequence``'s members in order."""
    if spec is None:
        return []
    if spec.get("type") == "Sequence":
        return [t for s in spec.get(members, []) for t in _types(s, members)]
    return [str(spec.get("type"))]


def joinable(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` (a transformers fast tokenizer) tokenises a text joined at whitespace into its parts'
    word pieces joined: a WordPiece model after per-character normalisers and a pre-tokenizer splitting at
    whitespace (its tokenizer.json)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return False
    spec = json.loads(backend.to_str())
    pre = _types(spec.get("pre_tokenizer"), "pretokenizers")
    return (spec.get("model", {}).get("type") == "WordPiece" and set(_types(spec.get("normalizer"), "normalizers"))
            <= PER_CHARACTER and bool(pre) and pre[0] in WORD_SPLITTERS and set(pre) <= WORD_SPLITTERS)


class PieceTable:
    """Word pieces (no special tokens) of a list of texts, flat: the pieces of text ``i`` are
    ``ids[offsets[i]:offsets[i + 1]]``."""

    def __init__(self, tokenizer: Any, texts: Sequence[str]):
        parts: list[np.ndarray] = []
        lengths = np.zeros(len(texts), dtype=np.int64)
        with record_bar(len(texts), "word pieces of the triples", "triple") as bar:  # ~1 min at 1.5M triples
            for a in range(0, len(texts), CHUNK):
                enc = tokenizer(list(texts[a:a + CHUNK]), add_special_tokens=False)["input_ids"]
                lengths[a:a + len(enc)] = [len(ids) for ids in enc]
                parts.append(np.fromiter((i for ids in enc for i in ids), dtype=np.int32))
                bar.update(len(enc))
        self.ids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)])

    def joined(self, rows: Sequence[int], between: np.ndarray) -> np.ndarray:
        """The pieces of texts ``rows`` joined, ``between`` (a separator's pieces) between each two."""
        out: list[np.ndarray] = []
        for n, r in enumerate(rows):
            if n:
                out.append(between)
            out.append(self.ids[self.offsets[r]:self.offsets[r + 1]])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int32)


def encoding(empty: dict[str, list[int]], pieces: Sequence[np.ndarray], max_length: int) -> dict[str, list] | None:
    """What the tokenizer gives for texts with these word pieces (``truncation=True, max_length``), built from
    ``empty`` (its encoding of the empty text: the special tokens around nothing, and each other field's one
    value); None when that encoding has a field whose values differ (no single value to repeat)."""
    ids = empty["input_ids"]
    head, tail, room = ids[:1], ids[1:], max_length - len(ids)
    fill = {}
    for key, values in empty.items():
        if key != "input_ids":
            if len(set(values)) != 1:
                return None
            fill[key] = values[0]
    out: dict[str, list] = {key: [] for key in empty}
    for p in pieces:
        row = [*head, *p[:max(room, 0)].tolist(), *tail]
        out["input_ids"].append(row)
        for key, value in fill.items():
            out[key].append([value] * len(row))
    return out
