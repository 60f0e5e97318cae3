"""Compose one run from its config: load data, build what the method needs, retrieve, answer, score.

The runner holds no paper logic: methods (methods/), the QA reader (qa/) and metrics (evaluation/) do; the
wiring (pipeline/wiring.py) builds them. It owns the run directory:

    config.yaml        resolved config (secrets redacted)
    run.json           provenance: fingerprint, package versions, data/index hashes and warnings, question subset,
                       timings; an LLM run the hash of its prompt files (``prompts``), an extraction its own
                       fingerprint without ``dataset.limit_passages`` (``extraction_fingerprint``)
    predictions.jsonl  one line per finished question (appended, so an interrupted run resumes)
    metrics.json       recall@k (0-100), EM/F1 with qa=true, tokens, latency, n_errors, the evaluated question ids
    llm_stats.json     LLM cache hits/misses, retries, failures (when an LLM was used)
    failure.json       why the last attempt stopped, when it raised (error, traceback, host, SLURM job); removed by a
                       run that finishes; gear-repro-report lists it under "Unfinished runs"
    .lock              held while the run writes (utils/lock.py); a second run into the dir is refused

Bookkeeping rules (issue 9 §2): a question that errored is recorded (scored as a miss) but not finished, so a
resume retries it; the resume fingerprint covers the config (not ``dataset.path``) and the data files' hashes (and, for
LLM runs, the prompt files), and a refused resume names the settings and data files that differ; configuration errors
are found by :meth:`Runner.preflight` before any question runs.
"""

from __future__ import annotations

import copy
import logging
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict
from tqdm import tqdm

from gear_repro.config import resolved, to_container, validate
from gear_repro.data.dataset import check_gold_answers
from gear_repro.embedding.precision import Precision, QueryPrecision, resolve_precision
from gear_repro.evaluation.aggregate import aggregate, check_record
from gear_repro.evaluation.metrics import answer_metric_for
from gear_repro.extraction import EXTRACTION_LOG
from gear_repro.llm.gguf_weights import served_weights
from gear_repro.llm.ledger import call_scope
from gear_repro.methods.base import Method
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.setting import data_setting, run_setting
from gear_repro.pipeline.wiring import build_method, build_qa_reader
from gear_repro.prompts import prompts_hash
from gear_repro.qa.reader import AnswerReader, pass_for_qa, score_answer
from gear_repro.types import Question
from gear_repro.utils.concurrency import COMPUTE
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj, model_path_identity
from gear_repro.utils.io import (
    JsonlAppender,
    atomic_open,
    iter_jsonl,
    read_json_object,
    repair_jsonl_tail,
    require_writable_dir,
    write_json,
)
from gear_repro.utils.lock import RunDirLock
from gear_repro.utils.provenance import environment
from gear_repro.utils.secrets import redact_text, redact_url
from gear_repro.utils.settings import flat_settings

log = logging.getLogger("gear_repro")

# config keys that do not change results (excluded from the run fingerprint used for resuming)
_NON_RESULT_KEYS = {
    "run": {"progress", "resume", "fail_fast", "allow_errors", "workers"}, "hydra": None, "report": None, "name": None,
    "dataset": {"allow_unknown_source"},  # a start-up check: the data and the results are the same either way
    "embedder": {"num_threads", "show_progress", "batch_size", "cache"},
    "llm": {"timeout_s", "max_reply_bytes", "max_retries", "backoff_base_s", "backoff_max_s", "concurrency", "cache", "cache_dir", "cache_mode", "server",
            "record_prompts", "cache_lock_timeout_s", "check_endpoint",
            "base_url"},
}


def fingerprint_settings(cfg: DictConfig, with_path: bool = False) -> dict:
    """What :func:`run_fingerprint` hashes: the resolved config less the keys that do not change results, plus the
    identities of what serves the LLM and of a local model folder. ``dataset.path`` is left out: the data are
    identified by their content (:func:`data_fingerprint`), so a byte-identical copy of them, or another clone or
    mount of the repo (``${repo:}/data/...``), resumes. ``with_path`` keeps it: the fingerprint run dirs were given
    before (accepted by :meth:`Runner._check_resume` when the run dir's own path gives it)."""
    c = resolved(cfg, enum_to_str=False)
    emb = c.get("embedder")
    if isinstance(emb, dict):  # the precisions that run (`auto` differs between machines); fp32 (queries too)
        # keeps the fingerprint of run dirs written before the settings existed, and bf16 with bf16 queries that of
        # bf16 runs before query_precision
        used = resolve_precision(emb.pop("precision", Precision.fp32), emb.get("device", "cpu"),
                                 emb.get("backend", "torch"))
        queries = QueryPrecision(emb.pop("query_precision", QueryPrecision.same))
        if used is not Precision.fp32:
            emb["precision"] = used.value
            if queries is QueryPrecision.fp32:
                emb["query_precision"] = queries.value
        if emb.get("backend") == "openvino":  # before session 21 its "fp32" ran OpenVINO's own default (bf16 here)
            emb["inference_precision"] = used.value
    for key, sub in _NON_RESULT_KEYS.items():
        if sub is None:
            c.pop(key, None)
        elif key in c:
            c[key] = {k: v for k, v in c[key].items() if k not in sub}
    c.get("dataset", {}).pop("limit", None)  # a larger limit extends a run; finished questions stay valid
    if not with_path:
        c.get("dataset", {}).pop("path", None)  # the files' content is in data_fingerprint
    url = OmegaConf.select(cfg, "llm.base_url", default=None)
    if url:  # another server may serve another model: a resume never mixes two servers' replies (secrets masked,
        c["llm"]["endpoint"] = redact_url(str(url))  # so a rotated key is the same endpoint); unset: as before
    elif (weights := served_weights(OmegaConf.select(cfg, "llm", default=None))):
        c["llm"]["weights"] = weights  # what the harness-started server serves (the shipped pairings: as before)
    if (files := model_path_identity(OmegaConf.select(cfg, "embedder.model", default=None))):
        c["embedder"]["files"] = files  # a local model folder by content, as its vectors' key
    return c


def run_fingerprint(cfg: DictConfig, with_path: bool = False) -> str:
    """Hash of the settings that change results (:func:`fingerprint_settings`)."""
    return hash_obj(fingerprint_settings(cfg, with_path))


def data_fingerprint(cfg: DictConfig, data_hashes: dict, with_path: bool = False) -> str:
    """Resume fingerprint: the result-relevant config plus the hashes of the data files (corpus, questions,
    triples), so editing the data and re-running into the same dir never reuses old predictions. Indexes are
    built from these files with settings that are part of the config, so they are covered too. ``with_path``:
    the fingerprint of run dirs written before ``dataset.path`` was left out."""
    return hash_obj({"config": run_fingerprint(cfg, with_path), "data": dict(sorted(data_hashes.items()))})


_DIFFS_SHOWN = 8  # differing settings a refused resume names at most


def what_differs(old_cfg: DictConfig | None, new_cfg: DictConfig, old_data: dict, new_data: dict) -> list[str]:
    """What tells a run dir's run from this one, for a refused resume: each fingerprinted setting that differs
    (``run.ks: [5, 10, 15] → [5, 10]``; secrets shown as ``***``, as in config.yaml) and each data file whose
    content hash differs. ``old_cfg``: the dir's config.yaml (None when it has none)."""
    from gear_repro.config import redact

    out = []
    if old_cfg is not None:
        old, new = (flat_settings(redact(fingerprint_settings(c))) for c in (old_cfg, new_cfg))
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                out.append(f"{key}: {old.get(key, '(unset)')} → {new.get(key, '(unset)')}")
    for name in sorted(old_data.keys() | new_data.keys()):
        if old_data.get(name) != new_data.get(name):
            out.append(f"the {name} file's content (sha256 {old_data.get(name) or '(none)'} → "
                       f"{new_data.get(name) or '(none)'})")
    return out[:_DIFFS_SHOWN] + ([f"{len(out) - _DIFFS_SHOWN} more"] if len(out) > _DIFFS_SHOWN else [])


_WHAT = {"predictions.jsonl": "predictions", EXTRACTION_LOG: "extracted triples"}  # a run dir's results, in messages


def _without_limit_passages(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` without ``dataset.limit_passages``: extracting more passages extends an extraction run."""
    out = copy.deepcopy(cfg)
    with open_dict(out.dataset):
        out.dataset.pop("limit_passages", None)
    return out


def question_ids_hash(ids: list[str]) -> str:
    """Hash of the evaluated question ids, in order (recorded in metrics.json beside the ids)."""
    return hash_obj(list(ids))


QUESTION_THREADS = "question"  # name prefix of the run.workers threads (the CLI's Ctrl-C exit looks for them)


def code_history(previous: dict, done: int, todo: int) -> list[dict]:
    """run.json ``code_history``: the commit (``git_commit``, ``-dirty`` for uncommitted edits) of every start that ran
    questions, with how many were finished before it; a resume after a code change appends a second commit, which the
    report names (the fingerprint leaves code out, so a changed method would otherwise mix two methods' records).
    A run.json from before the history counts as one start of its own commit."""
    history = [dict(h) for h in previous.get("code_history") or [] if isinstance(h, dict)] if done else []
    if not history and done:
        history = [{"git_commit": (previous.get("environment") or {}).get("git_commit"), "finished_before": 0}]
    if todo:
        history.append({"git_commit": environment().get("git_commit"), "finished_before": done})
    return history


def load_finished(path: Path) -> dict[str, dict]:
    """Finished questions of a run dir: the last record per id, without errored ones (they are retried)."""
    if not path.exists():
        return {}
    if repair_jsonl_tail(path):
        log.warning("%s: dropped a partial last line left by an interrupted run", path)
    last = {}
    for lineno, rec in iter_jsonl(path):
        check_record(rec, f"{path}:{lineno}")
        last[rec["id"]] = rec
    return {qid: rec for qid, rec in last.items() if not rec.get("error")}


FAILURE_FILE = "failure.json"


def record_failure(run_dir: Path, exc: BaseException) -> None:
    """Write why the run stopped to ``run_dir/failure.json`` (secrets redacted): what the report shows for it."""
    import socket

    from gear_repro.utils.slurm import slurm_job

    write_json(run_dir / FAILURE_FILE, {
        "error": redact_text(f"{type(exc).__name__}: {exc}"), "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "traceback": redact_text("".join(traceback.format_exception(exc, limit=-8))),
        "host": socket.gethostname(), "slurm": slurm_job()})


class Runner:
    def __init__(self, cfg: DictConfig, run_dir: str | Path, resources: Resources | None = None,
                 on_start: Callable[[], object] | None = None):
        """``on_start`` runs once the run dir is locked and checked, before the first write (the CLI's .hydra copies)."""
        self.cfg = validate(cfg)
        self.on_start = on_start
        self.run_dir = require_writable_dir(run_dir, "run dir")
        self.res = resources or Resources(self.cfg)
        self.timings: dict[str, float] = {}
        self._data_setting: dict | None = None  # run.json "setting"'s corpus/questions part (one pass over the corpus)
        # EM/F1 by the dataset's official script (dataset.answer_metric, default from dataset.paper_name)
        self.answer_metric = answer_metric_for(self.cfg.dataset.get("paper_name"), self.cfg.dataset.get("answer_metric"))

    # -- bookkeeping ---------------------------------------------------------------------------------
    def preflight(self, method: Method, qa_reader: AnswerReader | None) -> None:
        """Configuration errors found at start-up, before any question runs (issue 9 §2): beam options,
        scorer name and scorer options, ``run.workers``, the LLM's credentials when the method (``needs_llm``) or QA uses it, that the
        prompts of the method and the QA reader fit ``llm.context_window`` without passages, and (last: the machine,
        not the config) that the embedder's weights can be found when the run embeds."""
        from gear_repro.methods.gear.beam_search import BeamConfig
        from gear_repro.methods.gear.scorers import scorer_options

        if self.cfg.get("beam") is not None:
            beam = BeamConfig.from_any(self.cfg.beam)
            scorer_options(beam.scorer, beam.scorer_options)
        if int(self.cfg.run.workers) < 1:
            raise ConfigError(f"run.workers must be >= 1 (got {self.cfg.run.workers})")
        if method.answers_questions and qa_reader is not None and \
                str(OmegaConf.select(self.cfg, "qa_reader.mode", default="retrieved")) != "retrieved":
            raise ConfigError(f"qa_reader.mode={self.cfg.qa_reader.mode} is a bound of the K.3 reader, but this method "
                              "answers with its own prompt (the reader is not used; its row would stand as the paper's "
                              "bound): run the bound with agent=single, or drop qa_reader.mode")
        if qa_reader is not None or method.answers_questions:
            check_gold_answers(self.res.dataset, "qa=true" if qa_reader is not None and not method.answers_questions
                               else "agent.answer=false")
        if self.cfg.get("llm") is not None and (qa_reader is not None or method.needs_llm):
            self.res.llm.check_ready()
        # the prompts without passages must fit llm.context_window (llm/context.py)
        method.check_prompts(self.res.dataset.questions)
        if qa_reader is not None:
            qa_reader.check_prompts(self.res.dataset.questions)
        if self.res.needs_vectors and (embedder := self.res.built("embedder")) is not None:
            embedder.check_ready()  # the weights exist, before every question fails on the same missing model

    def _previous(self, results: str) -> dict:
        """run.json of the run whose results (``predictions.jsonl``, the extraction log) this dir holds, else {}."""
        run_json = self.run_dir / "run.json"
        return read_json_object(run_json) if run_json.exists() and (self.run_dir / results).exists() else {}

    def _check_resume(self, previous: dict, results: str = "predictions.jsonl", key: str = "fingerprint",
                      cfg: DictConfig | None = None) -> str:
        """The resume fingerprint of ``cfg`` (default: the run's config) and the data; a ConfigError naming what
        differs when the dir holds ``results`` whose run.json (``previous``) ``key`` differs (another config or
        data). A fingerprint of the format before ``dataset.path`` was left out is accepted when the dir's own
        config.yaml path gives it (same settings, same data content); the run then records the new one."""
        cfg = cfg if cfg is not None else self.cfg
        hashes = self.res.dataset.hashes
        fp = data_fingerprint(cfg, hashes)
        old = previous.get(key)
        if not old or old == fp:
            return fp
        old_cfg = self._old_config(cfg)
        if old_cfg is not None:
            as_before = copy.deepcopy(cfg)
            with open_dict(as_before):
                as_before.dataset.path = OmegaConf.select(old_cfg, "dataset.path", default=None)
            if old == data_fingerprint(as_before, hashes, with_path=True):
                log.info("%s: run.json's fingerprint is of the format that held dataset.path (%s); same settings "
                         "and data content: resuming, recorded under the new fingerprint", self.run_dir,
                         as_before.dataset.path)
                return fp
        try:
            diffs = what_differs(old_cfg, cfg, previous.get("data_hashes") or {}, hashes)
        except Exception:  # a config.yaml of an older layout: the refusal without its details
            diffs = what_differs(None, cfg, previous.get("data_hashes") or {}, hashes)
        why = ("; ".join(diffs) if diffs else "no setting of its config.yaml and no data file differs: what does "
               "is not recorded there (the files of a model given by path, a secret shown as ***)")
        raise ConfigError(
            f"{self.run_dir} holds {_WHAT[results]} of a different config or different data ({why}; fingerprint "
            f"{old} != {fp}); use a new run dir (hydra.run.dir=...) instead of mixing results")

    def _old_config(self, like: DictConfig) -> DictConfig | None:
        """The run dir's config.yaml (the run whose results it holds), None when absent or unreadable; without
        ``dataset.limit_passages`` when ``like`` is without it (an extraction's fingerprint)."""
        path = self.run_dir / "config.yaml"
        try:
            old = OmegaConf.load(path) if path.is_file() else None
        except Exception:  # a damaged copy only costs the message its details
            return None
        if not isinstance(old, DictConfig) or not isinstance(old.get("dataset"), DictConfig):
            return None
        return old if "limit_passages" in like.dataset else _without_limit_passages(old)

    def _check_prompts(self, previous: dict, results: str) -> dict[str, str]:
        """For a run that calls an LLM: its prompt files' hash (run.json ``prompts``), refused when the dir holds
        ``results`` made with other prompt files (``previous``: their run.json; an edited template would otherwise
        mix two prompts in one run)."""
        now = prompts_hash()
        old = previous.get("prompts")
        if old and old != now:
            raise ConfigError(
                f"{self.run_dir} holds {_WHAT[results]} made with other prompt files (gear_repro/prompts/: {old} != {now}); "
                "restore them or use a new run dir (hydra.run.dir=...) instead of mixing two prompts in one run")
        return {"prompts": now}

    def _start(self) -> None:
        """Checks passed: let the caller write its own records (``on_start``), once."""
        if self.on_start is not None:
            self.on_start()
            self.on_start = None

    def _write_config(self) -> None:
        with atomic_open(self.run_dir / "config.yaml") as f:
            f.write(OmegaConf.to_yaml(OmegaConf.create(to_container(self.cfg))))

    def _write_provenance(self, fp: str, extra: dict | None = None) -> None:
        self._write_config()
        rec = {"fingerprint": fp, "environment": environment(), "data_hashes": self.res.dataset.hashes,
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
        rec.update(self.res.provenance())  # e.g. HippoRAG's graph size, build/load time (docs/baselines.md "Costs")
        emb = self.res.built("embedder")
        if emb is not None:
            rec["embedder_stats"] = emb.stats
            rec["embedder"] = emb.describe()  # model, back-end, precision asked for and used (issue 25)
        write_json(self.run_dir / "run.json", rec)
        llm = self.res.built("llm")
        if llm is not None:
            write_json(self.run_dir / "llm_stats.json", llm.stats())

    # -- stages --------------------------------------------------------------------------------------
    def run(self) -> dict:
        try:
            with RunDirLock(self.run_dir):
                try:
                    result = self._run_stage()
                except (Exception, KeyboardInterrupt) as e:
                    if not (self.run_dir / "config.yaml").exists() and not (self.run_dir / "run.json").exists():
                        self._write_config()  # the report labels the failed run by it (a dir of another run: not)
                    record_failure(self.run_dir, e)
                    raise
                (self.run_dir / FAILURE_FILE).unlink(missing_ok=True)
                return result
        finally:
            self.res.close()

    def _run_stage(self) -> dict:
        """The configured stage (retrieve, index or extract) inside the locked run dir."""
        stage = self.cfg.get("stage", "retrieve")
        if stage == "extract":
            from gear_repro.extraction import extraction_error, run_extraction

            fp = data_fingerprint(self.cfg, self.res.dataset.hashes)
            # a resume never mixes two models' or settings' triples; more passages (limit_passages) extend it
            previous = self._previous(EXTRACTION_LOG)
            extraction_fp = self._check_resume(previous, EXTRACTION_LOG, "extraction_fingerprint",
                                               _without_limit_passages(self.cfg))
            prompts = self._check_prompts(previous, EXTRACTION_LOG)
            self.res.llm.check_ready()
            self._start()
            result = run_extraction(self.cfg, self.res.dataset, self.res.llm, self.run_dir)
            self._write_provenance(fp, {"extraction_fingerprint": extraction_fp, **prompts})
            err = extraction_error(result)
            if err is not None:
                raise err
            return result
        if stage == "index":
            if self.res.needs_vectors:
                self.res.embedder.check_ready()  # the weights, before building anything (one line, not a traceback)
            self._start()
            return self.build_indexes()
        return self.retrieve()

    def build_indexes(self) -> dict:
        t0 = time.perf_counter()
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
        write_json(self.run_dir / "metrics.json", {"stage": "index", **out, "index_s": self.timings["index_s"]})
        return out

    def retrieve(self) -> dict:
        cfg = self.cfg
        t_setup = time.perf_counter()
        questions = self.res.dataset.questions  # load data first: its errors name the file
        previous = self._previous("predictions.jsonl")
        fp = self._check_resume(previous)
        done = self._already_finished(fp, [q.id for q in questions])
        if done is not None:
            return done
        method = build_method(cfg, self.res)
        qa_reader = build_qa_reader(cfg, self.res)
        self.preflight(method, qa_reader)
        prompts = self._check_prompts(previous, "predictions.jsonl") if qa_reader is not None or method.needs_llm else {}
        self.timings["setup_s"] = time.perf_counter() - t_setup
        pred_path = self.run_dir / "predictions.jsonl"
        finished = load_finished(pred_path) if cfg.run.resume else {}
        if not cfg.run.resume and pred_path.exists():
            pred_path.unlink()
        todo = [q for q in questions if q.id not in finished]
        if finished:
            log.info("resuming %s: %d of %d questions already done", self.run_dir, len(questions) - len(todo),
                     len(questions))
        provenance = {"method": method.describe(), **prompts,  # hub statistics, γ, switches (issue 13)
                      "code_history": code_history(previous, len(questions) - len(todo), len(todo))}
        self._start()
        self._write_provenance(fp, provenance)
        t_loop = time.perf_counter()
        with JsonlAppender(pred_path) as out, tqdm(total=len(todo), desc=f"{cfg.dataset.name} {cfg.get('name', '')}",
                                                   disable=not cfg.run.progress, unit="q", dynamic_ncols=True) as bar:
            for rec in self._records(todo, method, qa_reader, int(cfg.run.workers), done=bar.update):
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
        write_json(self.run_dir / "metrics.json", metrics)
        # again after the questions, with the run's statistics over every finished record (a resume's earlier ones
        # too; T²RAG's iterations and stops)
        provenance["method"] = {**method.describe(), **method.summarize(preds)}
        self._write_provenance(fp, provenance)
        log.info("metrics: %s", {k: round(v, 2) for k, v in metrics.items() if isinstance(v, float)})
        return metrics

    def _already_finished(self, fp: str, ids: list[str]) -> dict | None:
        """The metrics.json of a run that already finished these questions without errors, under this fingerprint
        (a re-submitted sweep: its finished jobs load no model and write nothing); None when there is work to do."""
        metrics_path = self.run_dir / "metrics.json"
        if not self.cfg.run.resume or not metrics_path.exists():
            return None
        metrics = read_json_object(metrics_path)
        if (metrics.get("fingerprint") != fp or metrics.get("question_ids") != ids or metrics.get("n_errors")
                or not set(ids) <= set(load_finished(self.run_dir / "predictions.jsonl"))):
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
            position = {ex.submit(one, q): i for i, q in enumerate(todo)}
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
        cfg = self.cfg
        ks = sorted(cfg.run.ks)
        spans: list[tuple[int, int, int]] = []  # (k, first, end) positions in `calls` of each matched-k pass
        rec: dict = {"id": q.id, "question": q.question, "gold_ids": q.gold_ids, "answers": q.answers, "type": q.type}
        t0 = time.perf_counter()
        try:
            rankings: dict[str, list[str]] = {}
            if method.k_dependent and cfg.run.matched_k:
                outs = {}
                for k in ks:
                    start = len(calls)
                    outs[k] = method.run(q, k)
                    spans.append((k, start, len(calls)))
                for k, o in outs.items():
                    rankings[str(k)] = o.ranking.ids[: cfg.run.save_depth]
                final = outs[ks[-1]]
                # Table 3: QA reads the top passages of the pass whose k matches them (k=5), not the k=15 pass
                qa_source = outs[pass_for_qa(ks, qa_reader.top_k)] if qa_reader else final
                rec["trace"] = {str(k): o.trace for k, o in outs.items()}
            else:
                final = method.run(q, cfg.run.base_k or ks[-1])
                qa_source = final
                rec["trace"] = final.trace
            rankings["final"] = final.ranking.ids[: cfg.run.save_depth]
            rec["rankings"] = rankings
            rec["rounds"] = final.rounds
            if final.answer is not None:  # the method answered by itself (T²RAG): score that answer
                rec.update(score_answer(q, final.answer.text, self.answer_metric), qa_raw=final.answer.raw,
                           qa_mode="method")
            elif qa_reader is not None:
                rec.update(qa_reader.answer(q, qa_source.ranking.ids, self.answer_metric))
        except Exception as e:  # one bad question never loses the run; scored as a miss, retried on resume
            if cfg.run.fail_fast:
                raise
            log.error("question %s failed: %s", q.id, e)
            rec["error"] = redact_text(f"{type(e).__name__}: {e}")
            rec["traceback"] = redact_text(traceback.format_exc(limit=5))
            rec.setdefault("rankings", {"final": []})
        if self.res.built("llm") is not None:  # `calls` holds this question's own copies of the records
            for i, c in enumerate(calls):  # Fig. 4: each call tagged with the k of its matched-k pass
                c["k"] = next((k for k, a, b in spans if a <= i < b), None)
            rec["llm_calls"] = calls
        rec["timings"] = {"total_s": time.perf_counter() - t0}
        return rec
