"""One question through a method (and the QA reader): its predictions.jsonl record, the step the runner and the
Python API share."""

from __future__ import annotations

import logging
import time
import traceback

from omegaconf import DictConfig

from gear_repro.llm.ledger import tags
from gear_repro.methods.base import Method, MethodOutput
from gear_repro.pipeline.resources import Resources
from gear_repro.qa.reader import AnswerReader, pass_for_qa, score_answer
from gear_repro.types import Question
from gear_repro.utils.errors import ComponentError
from gear_repro.utils.io import write_failure
from gear_repro.utils.secrets import redact_text

__all__ = ["run_question"]

log = logging.getLogger("gear_repro")


def run_question(cfg: DictConfig, res: Resources, q: Question, method: Method, qa_reader: AnswerReader | None,
                 calls: list[dict], answer_metric: str) -> tuple[dict, MethodOutput | None]:
    """One question's predictions.jsonl record and the method's final output (its ranking's scores, which the
    record does not keep; None when the question errored): the runner's per-question step, which the Python API
    (:class:`gear_repro.api.Pipeline`) calls too, so one question gives the same record either way. ``calls``
    collects its LLM calls (:func:`~gear_repro.llm.ledger.call_scope`)."""
    rec: dict = {"id": q.id, "question": q.question, "gold_ids": q.gold_ids, "answers": q.answers, "type": q.type}
    t0 = time.perf_counter()
    with tags(k=None):  # Fig. 4: each call is tagged with the k of its matched-k pass (None outside one)
        final = _question_body(cfg, q, method, qa_reader, answer_metric, rec)
    if res.built("llm") is not None:  # `calls` holds this question's own copies of the records
        rec["llm_calls"] = calls
    rec["timings"] = {"total_s": time.perf_counter() - t0}
    return rec, (final if "error" not in rec else None)


def _question_body(cfg: DictConfig, q: Question, method: Method, qa_reader: AnswerReader | None,
                   answer_metric: str, rec: dict) -> MethodOutput | None:
    """Fill ``rec`` with the method's rankings, rounds, trace and answer (or the error); the final output."""
    final = None
    ks = sorted(cfg.run.ks)
    try:
        rankings: dict[str, list[str]] = {}
        if method.k_dependent and cfg.run.matched_k:
            outs = {}
            for k in ks:
                with tags(k=k):
                    outs[k] = method.run(q, k)
            for k, o in outs.items():
                rankings[str(k)] = o.ranking.ids[: cfg.run.save_depth]
            final = outs[ks[-1]]
            # Table 3: QA reads the top passages of the pass whose k matches them (k=5), not the k=15 pass
            qa_source = outs[pass_for_qa(ks, qa_reader.top_k)] if qa_reader else final
            rec["trace"] = {str(k): o.trace for k, o in outs.items()}
        else:
            final = method.run(q, cfg.run.fixed_k or ks[-1])
            qa_source = final
            rec["trace"] = final.trace
        rankings["final"] = final.ranking.ids[: cfg.run.save_depth]
        rec["rankings"] = rankings
        rec["rounds"] = final.rounds
        if final.answer is not None:  # the method answered by itself (T²RAG): score that answer
            rec.update(score_answer(q, final.answer.text, answer_metric), qa_raw=final.answer.raw,
                       qa_mode="method")
        elif qa_reader is not None:
            rec.update(qa_reader.answer(q, qa_source.ranking.ids, answer_metric))
    except Exception as e:  # one bad question never loses the run; scored as a miss, retried on resume
        if cfg.run.fail_fast:
            raise
        failed = write_failure(e)
        if failed is e or isinstance(e, ComponentError):  # every later question would fail the same way (after
            raise  # redoing its work: a corpus encode)
        if failed is not None:
            raise failed from e
        log.error("question %s failed: %s", q.id, e)
        rec["error"] = redact_text(f"{type(e).__name__}: {e}")
        rec["traceback"] = redact_text(traceback.format_exc(limit=5))
        rec.setdefault("rankings", {"final": []})
    return final
