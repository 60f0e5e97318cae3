"""Retrieval and QA metrics, one named home each (DESIGN.md "Readings of the paper").

- Recall@k: |gold ∩ top-k| / |gold| per question (passage ids), averaged, ×100 (HippoRAG's definition).
- EM / F1: SQuAD/HotpotQA official normalisation, token F1, max over answer and aliases.
  The HotpotQA/2Wiki yes/no rule: if prediction or gold normalises to yes/no/noanswer and they
  differ, F1 is 0 (no partial token credit).
A metric that cannot be computed raises: a number is never silently made up.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from gear_repro.utils.errors import GearError


class MetricError(GearError):
    """A metric was asked for something it cannot measure (no gold, bad k, no answers)."""


def recall_at_k(ranked_ids: Sequence[str], gold_ids: Sequence[str], k: int) -> float:
    """Fraction of the gold passages found in the top k (in [0, 1])."""
    if k <= 0:
        raise MetricError(f"recall@k needs k > 0, got {k}")
    gold = set(gold_ids)
    if not gold:
        raise MetricError("recall@k on a question without gold passages")
    top = set(list(ranked_ids)[:k])
    return len(gold & top) / len(gold)


_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(s: str) -> str:
    """Lower-case, drop punctuation, drop articles a/an/the, squeeze white space (official SQuAD)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _answers(golds: Sequence[str] | str) -> list[str]:
    golds = [golds] if isinstance(golds, str) else list(golds)
    if not golds:
        raise MetricError("EM/F1 on a question without gold answers")
    return golds


def exact_match(prediction: str, golds: Sequence[str] | str) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in _answers(golds)))


def _f1_single(prediction: str, gold: str) -> float:
    p, g = normalize_answer(prediction), normalize_answer(gold)
    special = {"yes", "no", "noanswer"}
    if (p in special or g in special) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str] | str) -> float:
    """Token-level F1, max over the answer and its aliases."""
    return max(_f1_single(prediction, g) for g in _answers(golds))

