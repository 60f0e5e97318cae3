"""Named evaluation metrics (one module, DESIGN.md "Readings"): recall@k, EM, F1."""

from gear_repro.evaluation.metrics import (
    exact_match,
    f1_score,
    normalize_answer,
    recall_at_k,
)

__all__ = ["exact_match", "f1_score", "normalize_answer", "recall_at_k"]
