"""Compose one run from its config: load data, build what the method needs, retrieve, answer, score.

The runner holds no paper logic: methods (methods/), the QA reader (qa/) and metrics (evaluation/) do; the
wiring (pipeline/wiring.py) builds them. It writes the run directory (its files and their format: pipeline/run_folder.py; the
resume fingerprint and the finished questions: pipeline/resume.py; whether a run dir's results may be resumed:
pipeline/resume_guard.py).

Bookkeeping rules: a question that errored is recorded (scored as a miss) but not finished, so a
resume retries it; the resume fingerprint covers the config (not ``dataset.path``) and the data files' hashes (and, for
LLM runs, the prompt files), and a refused resume names the settings and data files that differ; configuration errors
are found by :meth:`Runner.preflight` before any question runs.
"""

from __future__ import annotations

import contextvars
import logging
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path

from omegaconf import DictConfig

from gear_repro.config import to_container, validate
from gear_repro.evaluation.aggregate import aggregate
from gear_repro.evaluation.metrics import answer_metric_for
from gear_repro.extraction import EXTRACTION_LOG
from gear_repro.llm.ledger import call_scope
from gear_repro.methods import is_figure2_reference
from gear_repro.methods.base import Method
from gear_repro.pipeline import capacity
from gear_repro.pipeline import run_folder as rf
from gear_repro.pipeline.preflight import preflight
from gear_repro.pipeline.progress import QuestionBar
from gear_repro.pipeline.question import run_question
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.resume import code_history, data_fingerprint, fingerprinted_environ, load_finished
from gear_repro.pipeline.resume_guard import check_prompts, check_resume, previous_run, without_limit_passages
from gear_repro.pipeline.run_folder import PREDICTIONS
from gear_repro.pipeline.setting import data_setting, run_setting
from gear_repro.pipeline.user_code import given_classes, user_sources
from gear_repro.pipeline.wiring import build_qa_reader, check_components, run_method
from gear_repro.qa.reader import AnswerReader
from gear_repro.types import Question
from gear_repro.utils.concurrency import COMPUTE
from gear_repro.utils.errors import OutputError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.io import JsonlAppender, require_writable_dir
from gear_repro.utils.lock import RunDirLock, RunDirTaken
from gear_repro.utils.provenance import environment
from gear_repro.utils.secrets import redact_text

__all__ = ["QUESTION_THREADS", "QuestionBar", "Runner", "preflight", "question_ids_hash", "record_failure",
           "run_question"]

log = logging.getLogger("gear_repro")

def question_ids_hash(ids: list[str]) -> str:
    """Hash of the evaluated question ids, in order (recorded in metrics.json beside the ids)."""
    return hash_obj(list(ids))


QUESTION_THREADS = "question"  # name prefix of the run.workers threads (the CLI's Ctrl-C exit looks for them)


def record_failure(run_dir: Path, exc: BaseException) -> None:
    """Write why the run stopped to ``run_dir/failure.json`` (secrets redacted): what the report shows for it."""
    import socket

    from gear_repro.utils.slurm import slurm_job

    rf.write_json_file(run_dir, rf.FAILURE, {
        "error": redact_text(f"{type(exc).__name__}: {exc}"), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "traceback": redact_text("".join(traceback.format_exception(exc, limit=-8))),
        "host": socket.gethostname(), "slurm": slurm_job()})


class Runner:
    def __init__(self, cfg: DictConfig, run_dir: str | Path, resources: Resources | None = None,
                 on_start: Callable[[], object] | None = None):
        """``on_start`` runs once the run dir is locked and checked, before the first write (the CLI's .hydra copies)."""
        self.cfg = validate(cfg)
        check_components(self.cfg)  # the classes it names, before the data loads
        self.on_start = on_start
        self.run_dir = require_writable_dir(run_dir, "run dir")
        self.res = resources or Resources(self.cfg)
        self.timings: dict[str, float] = {}
        self._data_setting: dict | None = None  # run.json "setting"'s corpus/questions part (one pass over the corpus)
        # EM/F1 by the dataset's official script (dataset.answer_metric, default from dataset.paper_name)
        self.answer_metric = answer_metric_for(self.cfg.dataset.get("paper_name"), self.cfg.dataset.get("answer_metric"))

    # -- bookkeeping ---------------------------------------------------------------------------------
    def preflight(self, method: Method, qa_reader: AnswerReader | None) -> None:
        """The start-up checks (:func:`preflight`) of this run's config and resources."""
        preflight(self.cfg, self.res, method, qa_reader)

    def _start(self) -> None:
        """Checks passed: let the caller write its own records (``on_start``), once."""
        if self.on_start is not None:
            self.on_start()
            self.on_start = None

    def _write_config(self) -> None:
        rf.write_config(self.run_dir, to_container(self.cfg))

    def _write_provenance(self, fp: str, extra: dict | None = None) -> None:
        self._write_config()
        rec = {"fingerprint": fp, "environment": environment(), "environ": fingerprinted_environ(),
               "components": given_classes(self.res),  # the user's objects the API handed the run, by class
               "data_hashes": self.res.dataset.hashes,
               "data_warnings": self.res.dataset.warnings, "subset": self.res.dataset.selection,
               "timings": self.timings,
               "cwd": str(Path.cwd()),  # a relative dataset.path is read against it (hydra.job.chdir=false; the explorer)
               **(extra or {})}
        for name in ("passages", "triples"):
            coll = self.res.built(name)
            if coll is not None:
                rec.setdefault("index_hashes", {})[name] = getattr(coll, "content_hash", None)
        if self._data_setting is None:
            self._data_setting = data_setting(self.res)
        rec["setting"] = run_setting(self.res, self._data_setting)  # what the report's placement compares
        rec.update(self.res.provenance())  # the method's index sizes and build times (docs/baselines.md "Costs")
        backend = self.res.built("backend")
        if backend is not None and callable(getattr(backend, "describe", None)):
            rec["backend"] = backend.describe()  # the engine that ranked (backend=lucene: Lucene's version, its jar)
        emb = self.res.built("embedder")
        if emb is not None:
            rec["embedder_stats"] = emb.stats
            rec["embedder"] = emb.describe()  # model, back-end, precision asked for and used
        rf.write_run_info(self.run_dir, rec)
        llm = self.res.built("llm")
        if llm is not None:
            rf.write_json_file(self.run_dir, rf.LLM_STATS, llm.stats())

    # -- stages --------------------------------------------------------------------------------------
    def run(self) -> dict:
        try:
            with RunDirLock(self.run_dir):
                self._check_stage()  # before the failure handler: a refusal writes nothing into another run's dir
                try:
                    result = self._run_stage()
                except (Exception, KeyboardInterrupt) as e:
                    try:
                        if not (self.run_dir / rf.CONFIG).exists() and not (self.run_dir / rf.RUN_INFO).exists():
                            self._write_config()  # the report labels the failed run by it (another run's dir: not)
                        record_failure(self.run_dir, e)
                    except (OSError, OutputError) as not_recorded:  # often the full disk that stopped the run
                        log.warning("could not record the failure in %s: %s", self.run_dir, not_recorded)
                    raise  # the error that stopped the run, not failure.json's
                (self.run_dir / rf.FAILURE).unlink(missing_ok=True)
                return result
        finally:
            self.res.close()

    def _check_stage(self) -> None:
        """:class:`~gear_repro.utils.lock.RunDirTaken` when the dir holds a run of another stage: this one would
        overwrite its config.yaml, run.json and metrics.json (an extract over a BM25 run left the BM25 numbers
        labelled with the extraction's config). A run of the same stage is checked by its resume fingerprint."""
        stage = str(self.cfg.get("stage", "retrieve"))
        held = rf.recorded_stage(self.run_dir)
        if held is not None and held != stage:
            raise RunDirTaken(f"{self.run_dir} holds a stage={held} run; a stage={stage} run into it would overwrite "
                              "its config.yaml, run.json and metrics.json: use a new run dir (hydra.run.dir=...)")

    def _run_stage(self) -> dict:
        """The configured stage (retrieve, index or extract) inside the locked run dir."""
        stage = self.cfg.get("stage", "retrieve")
        if stage == "extract":
            from gear_repro.extraction import extraction_error, run_extraction

            fp = data_fingerprint(self.cfg, self.res.dataset.hashes)
            # a resume never mixes two models' or settings' triples; more passages (limit_passages) extend it
            previous = previous_run(self.run_dir, EXTRACTION_LOG)
            extraction_fp = check_resume(self.run_dir, without_limit_passages(self.cfg), self.res, previous,
                                         EXTRACTION_LOG, "extraction_fingerprint")
            prompts = check_prompts(self.run_dir, previous, EXTRACTION_LOG)
            self.res.llm.check_ready()
            self._start()
            result = run_extraction(self.cfg, self.res.dataset, self.res.llm, self.run_dir)
            self._write_provenance(fp, {"extraction_fingerprint": extraction_fp, **prompts})
            err = extraction_error(result)
            if err is not None:
                raise err
            return result
        if stage == "index":
            # another config's index run: refused
            check_resume(self.run_dir, self.cfg, self.res, previous_run(self.run_dir, rf.METRICS), rf.METRICS)
            if self.res.needs_vectors:
                self.res.embedder.check_ready()  # the weights, before building anything (one line, not a traceback)
            self._start()
            return self.build_indexes()
        return self.retrieve()

    def build_indexes(self) -> dict:
        t0 = time.perf_counter()
        # before an hour of encoding, not after it
        capacity.check_run(self.cfg, self.res, capacity.ALL_COLLECTIONS, index_stage=True)
        out = {"passages": len(self.res.passages)}
        self.res.passages.bm25(["warm up"], 1)
        if self.res.needs_vectors:
            self.res.passages.vectors()
        if self.res.dataset.triples:
            out["triples"] = len(self.res.triples)
            self.res.triples.bm25(["warm up"], 1)
            if self.res.needs_vectors:
                self.res.triples.vectors()
        self.timings["index_s"] = time.perf_counter() - t0
        self._write_provenance(data_fingerprint(self.cfg, self.res.dataset.hashes), {"indexes": out})
        rf.write_json_file(self.run_dir, rf.METRICS, {"stage": "index", **out, "index_s": self.timings["index_s"]})
        return out

    def retrieve(self) -> dict:
        cfg = self.cfg
        t_setup = time.perf_counter()
        questions = self.res.dataset.questions  # load data first: its errors name the file
        previous = previous_run(self.run_dir, PREDICTIONS)
        fp = check_resume(self.run_dir, cfg, self.res, previous)
        done = self._already_finished(fp, [q.id for q in questions])
        if done is not None:
            return done
        # a method object given to the API (gear_repro.api.Pipeline) is the run's method; else the config's
        method = run_method(self.res)
        qa_reader = build_qa_reader(cfg, self.res)
        self.preflight(method, qa_reader)
        needs_llm = qa_reader is not None or method.needs_llm
        prompts = check_prompts(self.run_dir, previous, PREDICTIONS) if needs_llm else {}
        self.timings["setup_s"] = time.perf_counter() - t_setup
        pred_path = self.run_dir / PREDICTIONS
        finished = load_finished(pred_path) if cfg.run.resume else {}
        if not cfg.run.resume and pred_path.exists():
            pred_path.unlink()
        todo = [q for q in questions if q.id not in finished]
        if todo and (llm := self.res.built("llm")) is not None:  # calls, tokens, $, time: before the first call
            from gear_repro.pipeline.estimate import announce_questions

            announce_questions(cfg, todo, self.res.dataset.passages, llm)
        if finished:
            log.info("resuming %s: %d of %d questions already done", self.run_dir, len(questions) - len(todo),
                     len(questions))
        flags = {"k_dependent": bool(method.k_dependent), "needs_vectors": self.res.needs_vectors,
                 "figure2_reference": is_figure2_reference(cfg)}
        provenance = {"method": method.describe(), **prompts, rf.REPORT_FLAGS: flags,  # hub statistics, γ, switches
                      "code_history": code_history(previous, len(questions) - len(todo), len(todo),
                                                   user_sources(cfg, self.res))}
        self._start()
        self._write_provenance(fp, provenance)
        t_loop = time.perf_counter()
        with JsonlAppender(pred_path) as out, QuestionBar(len(todo), f"{cfg.dataset.name} {cfg.get('name', '')}",
                                                          disable=not cfg.run.progress) as bar:
            for rec in self._records(todo, method, qa_reader, int(cfg.run.workers), done=bar.done):
                out.write(rec)  # an errored record is scored as a miss now and retried by a resume
                finished[rec["id"]] = rec
        self.timings["questions_s"] = time.perf_counter() - t_loop
        preds = [finished[q.id] for q in questions if q.id in finished]
        max_rounds = method.max_rounds or cfg.dataset.get("max_rounds")  # per-round recall length
        metrics = aggregate(preds, list(cfg.run.ks), max_rounds=max_rounds,
                            qa=qa_reader is not None or method.answers_questions)
        ids = [q.id for q in questions]
        metrics.update({"dataset": cfg.dataset.name, "name": cfg.get("name"), "fingerprint": fp,
                        "question_ids": ids, "question_ids_hash": question_ids_hash(ids),
                        "method_class": f"{type(method).__module__}.{type(method).__qualname__}"})
        rf.write_json_file(self.run_dir, rf.METRICS, metrics)
        # again after the questions, with the run's statistics over every finished record (a resume's earlier ones
        # too; T²RAG's iterations and stops)
        provenance["method"] = {**method.describe(), **method.summarize(preds)}
        self._write_provenance(fp, provenance)
        log.info("metrics: %s", {k: round(v, 2) for k, v in metrics.items() if isinstance(v, float)})
        return metrics

    def _already_finished(self, fp: str, ids: list[str]) -> dict | None:
        """The metrics.json of a run that already finished these questions without errors, under this fingerprint
        (a re-submitted sweep: its finished jobs load no model and write nothing); None when there is work to do."""
        metrics_path = self.run_dir / rf.METRICS
        if not self.cfg.run.resume or not metrics_path.exists():
            return None
        metrics = rf.read_json_file(self.run_dir, rf.METRICS)
        if (metrics.get("fingerprint") != fp or metrics.get("question_ids") != ids or metrics.get("n_errors")
                or not set(ids) <= set(load_finished(self.run_dir / PREDICTIONS))):
            return None
        log.info("%s already finished its %d questions: nothing to do", self.run_dir, len(ids))
        return metrics

    def _records(self, todo: Sequence[Question], method, qa_reader, workers: int, *,
                 done: Callable[[], object]) -> Iterator[dict]:
        """Each question's record, in question order; ``done()`` as each question finishes (the progress bar).

        With ``workers`` > 1 that many questions are in flight: their LLM waits overlap while
        :data:`~gear_repro.utils.concurrency.COMPUTE` keeps their computation one at a time, so every record
        equals the one ``workers=1`` writes (docs/llm.md, "Concurrency"). A finished record waits until every
        earlier question has finished, so the records come (and a killed run keeps them) in question order; with
        ``run.fail_fast`` a question's error is raised in that order too, after the records before it."""
        def one(q: Question) -> dict:
            with COMPUTE.hold(), call_scope() as calls:
                return self._one(q, method, qa_reader, calls)

        if workers == 1:
            for q in todo:
                rec = one(q)
                done()
                yield rec
            return
        ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=QUESTION_THREADS)
        abandoned = False
        try:
            # each question in a copy of the caller's context: its ledger tags, as with workers=1
            position = {ex.submit(contextvars.copy_context().run, one, q): i for i, q in enumerate(todo)}
            ready: dict[int, Future[dict]] = {}
            head = 0  # position of the first question not yielded yet
            for fut in as_completed(position):
                ready[position.pop(fut)] = fut  # popped: a written record is not kept
                done()
                while head in ready:
                    yield ready.pop(head).result()
                    head += 1
        except (KeyboardInterrupt, GeneratorExit):  # Ctrl-C here or in the caller: not waiting for running questions
            abandoned = True  # (an LLM request may wait llm.timeout_s × retries); the CLI exits without them
            raise
        finally:  # fail_fast: questions not started are dropped, running ones finish unrecorded
            ex.shutdown(wait=not abandoned, cancel_futures=True)

    def _one(self, q: Question, method, qa_reader, calls: list[dict]) -> dict:
        """One question's record; ``calls`` collects its LLM calls (:func:`~gear_repro.llm.ledger.call_scope`)."""
        return run_question(self.cfg, self.res, q, method, qa_reader, calls, self.answer_metric)[0]
