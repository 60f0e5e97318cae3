"""Datasets in the canonical on-disk form (DESIGN.md): corpus.jsonl, questions.jsonl, triples.jsonl."""

from gear_repro.data.canonical import (
    load_corpus,
    load_questions,
    load_triples,
    save_corpus,
    save_questions,
    save_triples,
)
from gear_repro.data.dataset import Dataset, load_dataset

__all__ = [
    "Dataset", "load_dataset", "load_corpus", "load_questions", "load_triples",
    "save_corpus", "save_questions", "save_triples",
]
