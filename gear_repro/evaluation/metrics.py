"""Retrieval and QA metrics, one named home each (DESIGN.md "Readings of the paper").

- Recall@k: |gold ∩ top-k| / |gold| per question (passage ids), averaged, ×100 (HippoRAG's definition).
- EM / F1: each dataset's official answer script (``answer_metric``, chosen by the dataset config's
  ``dataset.answer_metric``, never by question labels): the same SQuAD normalisation, token F1, max over
  the answer and its aliases, and
  - ``hotpotqa`` / ``2wiki``: if prediction or gold normalises to yes/no/noanswer and they differ, F1 is 0
    (hotpot_evaluate_v1.py:32-35; 2wikimultihop_evaluate_v1.1.py:39-42); empty vs empty: F1 0;
  - ``musique``: no yes/no rule; when either side has no tokens, F1 = 1 iff both have none
    (StonyBrookNLP/musique metrics/answer.py:32-35, 42-55).
A metric that cannot be computed raises: a number is never silently made up.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from gear_repro.utils.errors import GearError
from gear_repro.utils.settings import Choice, choice


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


class AnswerMetric(Choice):
    """The official answer script of ``dataset.answer_metric``; ``2wiki`` is not an identifier, so that one
    member's name differs from its value: the config takes the name (``dataset.answer_metric=twowiki``, as OmegaConf
    reads Enum fields), the code either."""

    musique = "musique"
    hotpotqa = "hotpotqa"
    twowiki = "2wiki"


ANSWER_METRICS = frozenset(m.value for m in AnswerMetric)
_YES_NO = frozenset({"yes", "no", "noanswer"})
# dataset.paper_name -> its official script (the default of dataset.answer_metric)
_BY_PAPER_NAME = {"musique": "musique", "hotpotqa": "hotpotqa", "2wiki": "2wiki", "2wikimultihopqa": "2wiki"}


def answer_metric_for(paper_name: str | None, answer_metric: str | None = None) -> str:
    """The official script of a dataset: ``answer_metric`` when set, else from the dataset's ``paper_name``
    (MuSiQue, HotpotQA, 2Wiki); other datasets (no official script) use HotpotQA's."""
    if answer_metric is not None:
        return choice(AnswerMetric, answer_metric, "dataset.answer_metric").value
    return _BY_PAPER_NAME.get(str(paper_name or "").casefold(), "hotpotqa")


def answer_metric_of(pred: dict) -> str:
    """The script a prediction record was scored with (``answer_metric``, written by ``qa.reader.score_answer``;
    runs written before it existed used HotpotQA's rule everywhere)."""
    return str(pred.get("answer_metric") or "hotpotqa")


def exact_match(prediction: str, golds: Sequence[str] | str, metric: str = "hotpotqa") -> float:
    """1.0 if the normalised prediction equals any normalised gold answer (the same in all three scripts:
    hotpot_evaluate_v1.py:49-50, musique metrics/answer.py:38-39, 2wikimultihop_evaluate_v1.1.py:56-57)."""
    p = normalize_answer(prediction)
    return float(any(p == normalize_answer(g) for g in _answers(golds)))


def _f1_single(prediction: str, gold: str, metric: str) -> float:
    p, g = normalize_answer(prediction), normalize_answer(gold)
    pt, gt = p.split(), g.split()
    if metric == "musique":
        if not pt or not gt:  # musique metrics/answer.py:47-49: empty vs empty scores 1
            return float(pt == gt)
    elif (p in _YES_NO or g in _YES_NO) and p != g:  # hotpot_evaluate_v1.py:32-35, 2wiki v1.1:39-42
        return 0.0
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Sequence[str] | str, metric: str = "hotpotqa") -> float:
    """Token-level F1 under ``metric``'s official script, max over the answer and its aliases
    (musique evaluate_v1.0.py:44-46 builds the answer + aliases list, metrics/answer.py:58-63, 78-83 takes the max;
    2wikimultihop_evaluate_v1.1.py:66-82)."""
    if metric not in ANSWER_METRICS:
        raise MetricError(f"answer metric must be one of {sorted(ANSWER_METRICS)}, got '{metric}'")
    return max(_f1_single(prediction, g, metric) for g in _answers(golds))

