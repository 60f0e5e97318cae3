"""``Pipeline``: one composed config, built once, asked question by question or over a whole question set.

A question goes through the runner's own per-question step (:func:`gear_repro.pipeline.runner.run_question`) and a
whole run through the runner itself (:class:`gear_repro.pipeline.runner.Runner`: lock, resume, fingerprint, failed
questions counted), so what the API returns is what ``gear-repro`` writes for the same config.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, open_dict

from gear_repro.data.dataset import Dataset, check_links
from gear_repro.data.records import (
    Records,
    content_hash,
    passage_dicts,
    passages_from,
    question_dicts,
    questions_from,
    triple_dicts,
    triples_from,
    write_dataset,
)
from gear_repro.types import Question
from gear_repro.utils.errors import ConfigError, DataError

__all__ = ["Evaluation", "Pipeline", "Result"]

_UNSET: Any = object()


@dataclass
class Result:
    """One question's outcome.

    Attributes:
        id, question: the question (an id made from its text when given as a string).
        ranking: one row per retrieved passage, best first: ``rank, id, title, score, passage``.
        answer: the answer (QA reader or a self-answering method), None without one; ``em``/``f1`` (0-1) only when
            the question has gold answers.
        rounds: GEAR's rounds as predictions.jsonl holds them (``query``, ``proximal`` triples, ``memory`` = the gist
            memory, ``reason`` = the verdict, ``rewrite``, ``ranking``, ...); [] for single-step methods.
        llm_calls: every LLM call (``stage``, ``round``, tokens, latency; ``messages`` and ``reply`` when the client
            records prompts, ``llm.record_prompts``).
        timings: seconds (``total_s``; the method's own in ``record["trace"]``).
        error: the error of a failed question (scored as a miss in a run), else None.
        record: the predictions.jsonl record itself.
    """

    id: str
    question: str
    ranking: pd.DataFrame
    answer: str | None = None
    em: float | None = None
    f1: float | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        """Prompt + completion tokens of every LLM call of the question."""
        return int(sum((c.get("prompt_tokens") or 0) + (c.get("completion_tokens") or 0) for c in self.llm_calls))

    def rounds_frame(self) -> pd.DataFrame:
        """GEAR's rounds, one row each: round, query, proximal triples, gist memory, verdict, next query."""
        rows = []
        for r in self.rounds:
            reason = r.get("reason") or {}
            rows.append({"round": r.get("round"), "query": r.get("query"), "proximal": r.get("proximal"),
                         "memory": r.get("memory"), "answerable": reason.get("answerable"),
                         "verdict": reason.get("answer") or reason.get("raw"),
                         "next_query": (r.get("rewrite") or {}).get("query")})
        return pd.DataFrame(rows, columns=["round", "query", "proximal", "memory", "answerable", "verdict",
                                           "next_query"])

    def calls_frame(self) -> pd.DataFrame:
        """The LLM calls, one row each (stage, round, tokens, latency, prompt and reply when recorded)."""
        rows = [{"stage": c.get("stage"), "round": c.get("round"), "prompt_tokens": c.get("prompt_tokens"),
                 "completion_tokens": c.get("completion_tokens"), "latency_s": c.get("latency_s"),
                 "prompt": "\n".join(str(m.get("content", "")) for m in c.get("messages") or []) or None,
                 "reply": c.get("reply")} for c in self.llm_calls]
        return pd.DataFrame(rows, columns=["stage", "round", "prompt_tokens", "completion_tokens", "latency_s",
                                           "prompt", "reply"])


@dataclass
class Evaluation:
    """A whole run: ``questions`` (one row per question: recall@k, EM/F1, tokens, rounds, error; as
    :func:`gear_repro.api.load_runs`), ``summary`` (one row: metrics.json's numbers), ``metrics`` and ``run_dir``."""

    run_dir: Path
    metrics: dict[str, Any]
    questions: pd.DataFrame
    summary: pd.DataFrame


def _question_id(text: str) -> str:
    return "q-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]


def as_question(question: str | Question | Mapping[str, Any]) -> Question:
    """A question from its text (no gold: an id from the text), a record dict or a Question."""
    if isinstance(question, Question):
        return question
    if isinstance(question, str):
        if not question.strip():
            raise DataError("question: empty question text")
        return Question(id=_question_id(question), question=question, answers=[], gold_ids=[])
    if isinstance(question, Mapping):
        rec = dict(question)
        if "id" not in rec and isinstance(rec.get("question"), str):
            rec["id"] = _question_id(rec["question"])
        return questions_from([rec], "question")[0]
    raise DataError(f"question: expected a string, a dict or a Question, got {type(question).__name__}")


def _as_question_records(questions: Records | Sequence[str]) -> list[Question]:
    """Questions given as records/a DataFrame (checked as the loader checks a file) or as plain strings."""
    if isinstance(questions, list | tuple) and questions and all(isinstance(q, str) for q in questions):
        return questions_from([{"id": _question_id(q), "question": q} for q in questions])
    return questions_from(questions)


def _data_folder(hashes: Mapping[str, str], data_dir: str | Path | None) -> Path:
    from gear_repro.utils.paths import cache_dir

    if data_dir is not None:
        return Path(data_dir)
    return cache_dir() / "datasets" / hashlib.sha256("|".join(f"{k}={v}" for k, v in sorted(hashes.items()))
                                                   .encode()).hexdigest()[:16]


class Pipeline:
    """A composed config, its data and its components, built once.

    Build it with :meth:`from_config`; ask :meth:`retrieve` / :meth:`answer` for one question and :meth:`evaluate`
    for a whole run. Attributes: ``cfg`` (the validated config), ``resources`` (the shared objects:
    ``resources.dataset``, ``.llm``, ``.embedder``), ``method`` and ``qa_reader`` (None unless ``qa=true``).
    """

    def __init__(self, cfg: DictConfig, resources: Any, method: Any, qa_reader: Any) -> None:
        from gear_repro.evaluation.metrics import answer_metric_for

        self.cfg = cfg
        self.resources = resources
        self.method = method
        self.qa_reader = qa_reader
        self.answer_metric = answer_metric_for(cfg.dataset.get("paper_name"), cfg.dataset.get("answer_metric"))

    # -- building ------------------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, cfg: DictConfig, *, passages: Records = None, questions: Records = None,
                    triples: Records = None, data_dir: str | Path | None = None, llm: Any = _UNSET,
                    embedder: Any = _UNSET, backend: Any = _UNSET, retriever: Any = None,
                    method: Any = None) -> Pipeline:
        """The pipeline of ``cfg`` (from :func:`gear_repro.api.compose`), its start-up checks run.

        Args:
            cfg: the run config; validated again here.
            passages, questions, triples: data from memory (lists of dicts or DataFrames, fields as corpus.jsonl,
                questions.jsonl, triples.jsonl; a question's ``answers`` and ``gold_ids`` may be left out), checked
                as the loaders check files (an error names the record) and written as a canonical folder (``data_dir``,
                default ``$GEAR_CACHE/datasets/<content hash>``) that ``dataset.path`` then names, so caches,
                fingerprints and the report's recognition of the data work as for a folder (a ``data_dir`` reused
                with other records loses the earlier ones' triples; one gear-repro-prepare wrote, or holding other
                data the API did not write, is refused). Without ``passages`` the config's ``dataset.path`` is read.
            llm, embedder, backend: objects to use instead of building them from the config (a hosted client you
                made, a stand-in LLM, an embedder shared across pipelines); ``embedder=None``: no embedder.
            retriever, method: objects of your own in place of the config's passage retriever / method (see
                :mod:`gear_repro.pipeline.components`; a component named by ``_target_`` in the config needs neither).

        Raises:
            ConfigError / DataError: a check failed (the message names the setting or the record).
        """
        from gear_repro.config import validate
        from gear_repro.pipeline.components import CheckedRetriever
        from gear_repro.pipeline.resources import Resources
        from gear_repro.pipeline.runner import preflight
        from gear_repro.pipeline.wiring import build_qa_reader, check_components, provide, run_method

        cfg = validate(copy.deepcopy(cfg))
        check_components(cfg)
        dataset = None
        if passages is not None:
            dataset = _memory_dataset(cfg, passages, questions, triples, data_dir)
        elif questions is not None or triples is not None:
            raise ConfigError("questions/triples given without passages: give the corpus too (passages=...), or "
                              "leave all three out to read dataset.path")
        given = {k: v for k, v in {"llm": llm, "embedder": embedder, "backend": backend}.items() if v is not _UNSET}
        if llm is not _UNSET and cfg.get("llm") is not None and getattr(llm, "model", None):
            # config.yaml names the model that answered (the report's row label, the resume fingerprint: a run
            # of another model is refused), not the one the llm group would have built
            with open_dict(cfg.llm):
                cfg.llm.model = str(llm.model)
        res = Resources(cfg, dataset=dataset, **given)
        # a retriever of the user's: its rankings checked against the corpus (pipeline/components.py)
        provide(res, retriever=None if retriever is None else CheckedRetriever(
            retriever, res.dataset.passage_by_id, "passages"), method=method)
        built = run_method(res)
        qa_reader = build_qa_reader(cfg, res)
        preflight(cfg, res, built, qa_reader, gold=False)
        return cls(cfg, res, built, qa_reader)

    # -- one question --------------------------------------------------------------------------------------
    def retrieve(self, question: str | Question | Mapping[str, Any], k: int | None = None) -> Result:
        """The method's ranking of one question at depth ``k`` (default: the largest of ``run.ks``), no QA.

        Raises:
            ConfigError: ``k`` is not a whole number >= 1."""
        from gear_repro.llm.ledger import call_scope
        from gear_repro.types import check_k
        from gear_repro.utils.concurrency import COMPUTE
        from gear_repro.utils.secrets import redact_text

        q = as_question(question)
        k = max(self.cfg.run.ks) if k is None else check_k(k, "Pipeline.retrieve: k")
        t0 = time.perf_counter()
        rec: dict[str, Any] = {"id": q.id, "question": q.question}
        out = None
        with COMPUTE.hold(), call_scope() as calls:
            try:
                out = self.method.run(q, k)
            except Exception as e:  # as the runner records a failed question: the error, not a lost session
                if self.cfg.run.fail_fast:
                    raise
                rec["error"] = redact_text(f"{type(e).__name__}: {e}")
        if out is not None:  # a method may rank deeper than k (single step saves run.save_depth ids): the top k
            out = replace(out, ranking=out.ranking.top(k))
            rec.update(rankings={"final": out.ranking.ids}, rounds=out.rounds, trace=out.trace)
        rec["llm_calls"] = list(calls)
        rec["timings"] = {"total_s": time.perf_counter() - t0}
        return self._result(q, rec, out)

    def answer(self, question: str | Question | Mapping[str, Any]) -> Result:
        """One question through the runner's per-question step: the method at the config's ranks, then the answer
        (the K.3 QA reader of ``qa_reader``, built from the config when ``qa=false``; a self-answering method's
        own). EM/F1 only for a question with gold answers."""
        from gear_repro.llm.ledger import call_scope
        from gear_repro.pipeline.runner import run_question
        from gear_repro.pipeline.wiring import answer_reader
        from gear_repro.utils.concurrency import COMPUTE

        q = as_question(question)
        reader = self.qa_reader
        if reader is None and not self.method.answers_questions:
            reader = answer_reader(self.resources)
        with COMPUTE.hold(), call_scope() as calls:
            rec, out = run_question(self.cfg, self.resources, q, self.method, reader, calls, self.answer_metric)
        return self._result(q, rec, out)

    def _result(self, q: Question, rec: dict[str, Any], out: Any) -> Result:
        by_id = self.resources.dataset.passage_by_id
        ranking = out.ranking if out is not None else None
        rows = []
        for i, (pid, score) in enumerate(zip(ranking.ids, ranking.scores, strict=True) if ranking else ()):
            p = by_id.get(pid)
            rows.append({"rank": i + 1, "id": pid, "title": p.title if p else None, "score": float(score),
                         "passage": p.text if p else None})
        frame = pd.DataFrame(rows, columns=["rank", "id", "title", "score", "passage"])
        em, f1 = rec.get("em"), rec.get("f1")
        return Result(id=q.id, question=q.question, ranking=frame, answer=rec.get("answer"),
                      em=None if em is None else float(em), f1=None if f1 is None else float(f1),
                      rounds=list(rec.get("rounds") or []), llm_calls=list(rec.get("llm_calls") or []),
                      timings=dict(rec.get("timings") or {}), error=rec.get("error"), record=rec)

    # -- a whole run -----------------------------------------------------------------------------------------
    def evaluate(self, questions: Records | Sequence[str] | None = None, *, run_dir: str | Path) -> Evaluation:
        """A run into ``run_dir`` by the runner itself, as ``gear-repro ... hydra.run.dir=RUN_DIR`` (lock, resume
        of finished questions, fingerprint refusal of another config or data, failed questions recorded and
        counted, config.yaml/run.json/metrics.json/predictions.jsonl; ``gear-repro-report`` reads it).

        ``questions``: records/a DataFrame/strings to run instead of the dataset's (written beside the corpus as
        the run's questions.jsonl, content-addressed); default: the dataset's questions (``dataset.limit``
        applied)."""
        from gear_repro.pipeline.resources import Resources
        from gear_repro.pipeline.runner import Runner
        from gear_repro.pipeline.wiring import carry_over

        res, cfg = self.resources, self.cfg
        if questions is not None:
            ds = res.dataset
            qs = _as_question_records(questions)
            cfg = copy.deepcopy(cfg)
            dataset = _folder_dataset(cfg, ds.passages, qs, ds.triples, None)
            given = {name: res.built(name) for name in ("llm", "embedder", "backend", "passages", "triples",
                                                        "triple_index") if res.built(name) is not None}
            res = Resources(cfg, dataset=dataset, **given)
            # the same retrievers (an index built once); an object of the user's stays the run's method
            carry_over(self.resources, res, method=not _from_config(self.cfg, self.method))
        elif not res.dataset.questions:
            raise DataError("evaluate: this pipeline's data has no questions; pass questions=[...]")
        # else the pipeline's method is the run's (registered in its resources by from_config)
        metrics = Runner(cfg, run_dir, resources=_KeepOpen(res)).run()
        from gear_repro.api.runs import load_runs

        per_question = load_runs([run_dir])
        summary = pd.DataFrame([{k: v for k, v in metrics.items() if isinstance(v, int | float | str)}])
        return Evaluation(Path(run_dir), metrics, per_question, summary)

    def close(self) -> None:
        """Stop what the pipeline started (a local LLM server)."""
        self.resources.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _from_config(cfg: DictConfig, method: Any) -> bool:
    """Whether ``method`` is of the class the config's ``agent._target_`` names (then the runner builds it again
    from the config for a new question set)."""
    target = str(cfg.agent.get("_target_", ""))
    return f"{type(method).__module__}.{type(method).__qualname__}" == target


class _KeepOpen:
    """The pipeline's resources for one runner: everything but ``close`` (the runner closes its resources at the end
    of a run; the pipeline keeps its LLM, e.g. a local server, for the next question)."""

    def __init__(self, res: Any) -> None:
        object.__setattr__(self, "_res", res)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._res, name)

    def close(self) -> None:
        """Left to :meth:`Pipeline.close`."""


def _memory_dataset(cfg: DictConfig, passages: Records, questions: Records, triples: Records,
                    data_dir: str | Path | None) -> Dataset:
    ps = passages_from(passages)
    qs = _as_question_records(questions) if questions is not None else None
    ts = triples_from(triples) if triples is not None else None
    return _folder_dataset(cfg, ps, qs, ts, data_dir)


def _folder_dataset(cfg: DictConfig, ps: list, qs: list[Question] | None, ts: list | None,
                    data_dir: str | Path | None) -> Dataset:
    """The dataset of these records: checked across sets (gold ids, triples' passages) naming the records, written
    as a canonical folder, ``cfg.dataset.path`` set to it; loaded from it by the file loader when it has questions
    (``dataset.limit``/``subset`` then apply as for any folder), else built here with the same hashes."""
    from gear_repro.data import load_dataset

    missing_gold = str(cfg.dataset.get("missing_gold", "warn"))
    warnings = check_links(ps, qs or [], ts, missing_gold, questions_ref="questions", corpus_ref="passages",
                           triples_ref="triples")
    hashes = {"corpus": content_hash(passage_dicts(ps))}
    if qs is not None:
        hashes["questions"] = content_hash(question_dicts(qs))
    if ts is not None:
        hashes["triples"] = content_hash(triple_dicts(ts))
    folder = write_dataset(_data_folder(hashes, data_dir), ps, qs, ts)
    with open_dict(cfg.dataset):
        cfg.dataset.path = str(folder)
        if ts is not None:
            cfg.dataset.triples_file = "triples.jsonl"
    if qs is not None:
        d = cfg.dataset
        return load_dataset(folder, name=d.name, limit=d.get("limit"), triples_file=d.get("triples_file"),
                            missing_gold=missing_gold, subset=d.get("subset", "first"),
                            subset_seed=d.get("subset_seed", 0))
    return Dataset(name=str(cfg.dataset.name), path=folder, passages=ps, questions=[], triples=ts,
                   triples_path=folder / "triples.jsonl" if ts is not None else None, hashes=hashes,
                   warnings=warnings)

