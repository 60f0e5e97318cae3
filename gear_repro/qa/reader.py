"""The QA reader of Table 3: K.3 prompt over the top-``top_k`` passages, answer post-processing, EM/F1.

Modes (``qa_reader.mode``):

- ``retrieved`` (default): the top ``top_k`` (5) passages of the method's final ranking;
- ``none``: the K.3 prompt without passages (Table 3 "No Passages", lower bound);
- ``gold``: the question's gold passages, in ``gold_ids`` order (Table 3 "Gold Passages", upper bound;
  not truncated to ``top_k``: MuSiQue has at most 4).

The answer is the reply's text after the last echoed ``Answer:`` label (if any), first non-empty line,
stripped of white space, quotes and Markdown emphasis. EM and F1 come from
:mod:`gear_repro.evaluation.metrics` only (per question in [0, 1]; metrics.json reports them ×100).
Built by :func:`gear_repro.pipeline.wiring.build_qa_reader` when ``qa=true``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from gear_repro.evaluation.metrics import exact_match, f1_score
from gear_repro.llm.base import LLM
from gear_repro.llm.context import check_fits, fit_passages
from gear_repro.types import Passage, Question
from gear_repro.utils.component import Component, PlannedCall
from gear_repro.utils.settings import Choice, Settings, as_dict, num

PAPER_QA_TOP_K = 5  # GEAR Table 3: "QA top-5 passages" (App. K.3) of the k = 5 pass


def pass_for_qa(ks: Sequence[int], top_k: int) -> int:
    """The matched-k pass QA reads (Table 3): the smallest evaluated k holding the reader's top_k passages
    (k=5 for the paper's 5 passages), else the largest."""
    return next((k for k in sorted(ks) if k >= top_k), max(ks))


class QAMode(Choice):
    """Which passages the K.3 reader sees (qa_reader.mode; Table 3)."""

    retrieved = "retrieved"  # the top_k of the method's ranking
    none = "none"  # no passages ("No Passages")
    gold = "gold"  # the gold passages ("Gold Passages")


_ANSWER_LABEL = re.compile(r"\banswer\s*[:：]", re.IGNORECASE)
_QUESTION_LABEL = re.compile(r"\W*question\s*[:：]", re.IGNORECASE)
_STRIP = " \t\r\n\"'`*“”‘’"


def extract_answer(text: str | None) -> str:
    """The answer in a K.3 reply (the prompt ends with "Answer:"), first non-empty line, stripped: the reply's own
    first line, unless that line echoes a label ("Answer: X", "Question: ...\nAnswer: X"), then what follows the
    first "Answer:". A model that answers and goes on writing the demonstrations' Q/A pairs is scored on its answer,
    not on its last invented pair."""
    if not text:
        return ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    label = _ANSWER_LABEL.search(text)
    echoed = label is not None and (_ANSWER_LABEL.search(first) is not None or _QUESTION_LABEL.match(first))
    body = text[label.end():] if echoed else text
    if echoed and not body.strip():  # "Answer:" at the very end: take what came before it
        body = text[: label.start()]
    for line in body.splitlines():
        line = line.strip().strip(_STRIP).strip()
        if line:
            return line
    return ""


def score_answer(question: Question, answer: str, metric: str = "hotpotqa") -> dict[str, Any]:
    """``{"answer", "em", "f1", "answer_metric"}`` of one answer (em/f1 per question in [0, 1]; absent without
    gold answers) under the dataset's official script ``metric`` (``dataset.answer_metric``), which is recorded
    so that a report recomputing EM/F1 uses the same script.

    The one scoring path of every answer: the QA reader's and a method's own (``MethodOutput.answer``).
    """
    out: dict[str, Any] = {"answer": answer, "answer_metric": metric}
    if question.answers:
        out["em"] = exact_match(answer, question.answers, metric)
        out["f1"] = f1_score(answer, question.answers, metric)
    return out


QA_STAGE = "qa"  # the ledger stage of the K.3 reader's calls


class AnswerReader(Protocol):
    """The QA role the runner reads: ``top_k`` (the matched-k pass it reads, Table 3) and ``answer``."""

    top_k: int

    def answer(self, question: Question, ranked_ids: Sequence[str], metric: str = "hotpotqa") -> dict[str, Any]: ...

    def check_prompts(self, questions: Sequence[Question]) -> None: ...


@dataclass
class QAReaderSettings(Settings):
    """The ``qa_reader`` group (configs/qa_reader/default.yaml): its schema and :class:`QAReader`'s settings
    (GEAR App. K.3, Table 3)."""

    config_key: ClassVar[str] = "qa_reader"

    _target_: str = "gear_repro.qa.QAReader"
    top_k: int = num(5, ge=1)  # passages bound in ``retrieved`` mode (5, Table 3)
    mode: QAMode = QAMode.retrieved  # retrieved | none | gold (Table 3's bounds)
    prompt: str = "qa"  # App. K.3 template
    prompt_no_passages: str = "qa_no_passages"  # its variant without passages (mode=none)
    llm_params: dict[str, Any] = field(default_factory=dict)  # extra llm.chat kwargs (e.g. {max_tokens: 64})


class QAReader:
    """K.3 QA over a ranked list (or no passages / the gold passages for Table 3's bounds).

    Args:
        llm: the K.3 reader's client.
        passage_by_id: passage texts of the corpus.
        settings, **given: :class:`QAReaderSettings` (an instance, or its fields as keywords).
    """

    def __init__(self, llm: LLM, passage_by_id: Mapping[str, Passage], settings: QAReaderSettings | None = None,
                 **given: Any):
        s = self.settings = QAReaderSettings.of(settings, "QAReader", **given)
        self.llm = llm
        self.passage_by_id = passage_by_id
        self.top_k = s.top_k
        self.mode = s.mode
        self.prompt = s.prompt
        self.prompt_no_passages = s.prompt_no_passages
        self.llm_params = as_dict(s.llm_params)
        llm.check_params(self.llm_params, "qa_reader.llm_params")  # a param the API lacks: one error now, not one per call

    def passages_for(self, question: Question, ranked_ids: Sequence[str]) -> list[str]:
        """Ids of the passages bound in the prompt for this mode."""
        if self.mode == "none":
            return []
        by_id = self.passage_by_id
        ids = question.gold_ids if self.mode == "gold" else list(ranked_ids)[: self.top_k]
        return [p for p in dict.fromkeys(ids) if p in by_id]

    def messages(self, question: Question, passage_ids: Sequence[str]) -> list[dict]:
        from gear_repro.prompts import render

        if self.mode == "none":
            return render(self.prompt_no_passages, question=question.question)
        by_id = self.passage_by_id
        return render(self.prompt, passages=[by_id[p] for p in passage_ids], question=question.question)

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check: the K.3 prompt without passages, for the longest question, fits ``llm.context_window``."""
        longest = max(questions, key=lambda q: len(q.question), default=None)
        if longest is not None:
            check_fits(self.llm, self.messages(longest, []), "QA", self.llm_params)

    def answer(self, question: Question, ranked_ids: Sequence[str], metric: str = "hotpotqa") -> dict[str, Any]:
        """Answer one question; returns answer, qa_raw, qa_mode, qa_passages (those in the prompt), qa_dropped
        (passages dropped to fit ``llm.context_window``, lowest-ranked first) and per-question em/f1 under the
        dataset's answer ``metric``."""
        ids = self.passages_for(question, ranked_ids)
        msgs, dropped = fit_passages(self.llm, lambda ps: self.messages(question, ps), ids, self.llm_params)
        reply = self.llm.chat(msgs, stage=QA_STAGE, **self.llm_params)
        ans = extract_answer(reply.text)
        return {**score_answer(question, ans, metric), "qa_raw": reply.text, "qa_mode": self.mode,
                "qa_passages": ids[: len(ids) - dropped], "qa_dropped": dropped}


def qa_plan(cfg: Any) -> list[PlannedCall]:
    """The reader's LLM call of a question (``qa=true``): one K.3 prompt over ``qa_reader.top_k`` passages."""
    from omegaconf import OmegaConf

    top_k = int(OmegaConf.select(cfg, "qa_reader.top_k", default=5) or 5)
    return [PlannedCall("qa", 1, top_k, lambda s: {"passages": s.passages, "question": s.question})]


# the registry's declaration (gear_repro/registry.py)
COMPONENTS = (Component("qa_reader", "qa_reader_schema", QAReaderSettings, QAReaderSettings._target_,
                        aliases=("gear_repro.qa.reader.QAReader",), llm_plan=qa_plan),)
