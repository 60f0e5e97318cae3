"""Compose one run from its config: load data, build what the method needs, retrieve, answer, score.

The runner holds no paper logic: methods (agent/), expansions (graph/), the QA reader (qa/) and
metrics (evaluation/) do. It owns the run directory:

    config.yaml        resolved config (secrets redacted)
    run.json           provenance: fingerprint, package versions, data/index hashes, timings
    predictions.jsonl  one line per finished question (appended, so an interrupted run resumes)
    metrics.json       recall@k (0-100), EM/F1 with qa=true, tokens, latency
    llm_stats.json     LLM cache hits/misses, retries, failures (when an LLM was used)
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import Path

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from gear_repro.agent import build_method
from gear_repro.config import to_container, validate
from gear_repro.evaluation.aggregate import aggregate
from gear_repro.run_resources import Resources
from gear_repro.types import Question
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.io import JsonlAppender, iter_jsonl, read_json, repair_jsonl_tail, write_json
from gear_repro.utils.provenance import environment

log = logging.getLogger("gear_repro")

# config keys that do not change results (excluded from the run fingerprint used for resuming)
_NON_RESULT_KEYS = {
    "run": {"progress", "resume", "fail_fast"}, "hydra": None, "report": None, "name": None,
    "embedder": {"num_threads", "show_progress", "batch_size", "cache"},
    "llm": {"timeout_s", "max_retries", "backoff_base_s", "backoff_max_s", "concurrency", "cache", "cache_dir", "server",
            "base_url"},
}


def run_fingerprint(cfg: DictConfig) -> str:
    c = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    for key, sub in _NON_RESULT_KEYS.items():
        if sub is None:
            c.pop(key, None)
        elif key in c:
            c[key] = {k: v for k, v in c[key].items() if k not in sub}
    c.get("dataset", {}).pop("limit", None)  # a larger limit extends a run; finished questions stay valid
    return hash_obj(c)


def load_finished(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    if repair_jsonl_tail(path):
        log.warning("%s: dropped a partial last line left by an interrupted run", path)
    return {rec["id"]: rec for _, rec in iter_jsonl(path)}


class Runner:
    def __init__(self, cfg: DictConfig, run_dir: str | Path, resources: Resources | None = None):
        self.cfg = validate(cfg)
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.res = resources or Resources(self.cfg)
        self.timings: dict[str, float] = {}

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _check_resume(self) -> str:
        fp = run_fingerprint(self.cfg)
        run_json = self.run_dir / "run.json"
        if run_json.exists() and (self.run_dir / "predictions.jsonl").exists():
            old = read_json(run_json).get("fingerprint")
            if old and old != fp:
                raise ConfigError(
                    f"{self.run_dir} holds predictions of a different config (fingerprint {old} != {fp}); "
                    "use a new run dir (hydra.run.dir=...) instead of mixing results")
        return fp

    def _write_provenance(self, fp: str, extra: dict | None = None) -> None:
        with open(self.run_dir / "config.yaml", "w", encoding="utf-8") as f:
            f.write(OmegaConf.to_yaml(OmegaConf.create(to_container(self.cfg))))
        rec = {"fingerprint": fp, "environment": environment(), "data_hashes": self.res.dataset.hashes,
               "data_warnings": self.res.dataset.warnings, "timings": self.timings, **(extra or {})}
        for name in ("passages", "triples"):
            coll = self.res.__dict__.get(name)
            if coll is not None:
                rec.setdefault("index_hashes", {})[name] = getattr(coll, "content_hash", None)
        emb = self.res.__dict__.get("embedder")
        if emb is not None and hasattr(emb, "stats"):
            rec["embedder_stats"] = emb.stats
        write_json(self.run_dir / "run.json", rec)
        llm = self.res.__dict__.get("llm")
        if llm is not None and hasattr(llm, "stats"):
            write_json(self.run_dir / "llm_stats.json", llm.stats())

    # -- stages --------------------------------------------------------------------------------------
    def run(self) -> dict:
        stage = self.cfg.get("stage", "retrieve")
        try:
            if stage == "extract":
                from gear_repro.extraction import run_extraction

                fp = run_fingerprint(self.cfg)
                result = run_extraction(self.cfg, self.res, self.run_dir)
                self._write_provenance(fp)
                return result
            if stage == "index":
                return self.build_indexes()
            return self.retrieve()
        finally:
            self.res.close()

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
        self._write_provenance(run_fingerprint(self.cfg), {"indexes": out})
        write_json(self.run_dir / "metrics.json", {"stage": "index", **out, "index_s": self.timings["index_s"]})
        return out

    def retrieve(self) -> dict:
        cfg = self.cfg
        fp = self._check_resume()
        t_setup = time.perf_counter()
        questions = self.res.dataset.questions  # load data first: its errors name the file
        method = build_method(cfg, self.res)
        qa_reader = instantiate(cfg.qa_reader, resources=self.res, _recursive_=False) if cfg.get("qa") else None
        self.timings["setup_s"] = time.perf_counter() - t_setup
        pred_path = self.run_dir / "predictions.jsonl"
        finished = load_finished(pred_path) if cfg.run.resume else {}
        if not cfg.run.resume and pred_path.exists():
            pred_path.unlink()
        todo = [q for q in questions if q.id not in finished]
        if finished:
            log.info("resuming %s: %d of %d questions already done", self.run_dir, len(questions) - len(todo),
                     len(questions))
        provenance = {"method": method.describe()}  # hub statistics, γ, switches (issue 13)
        self._write_provenance(fp, provenance)
        t_loop = time.perf_counter()
        with JsonlAppender(pred_path) as out:
            bar = tqdm(todo, desc=f"{cfg.dataset.name} {cfg.get('name', '')}", disable=not cfg.run.progress,
                       unit="q", dynamic_ncols=True)
            for q in bar:
                rec = self._one(q, method, qa_reader)
                out.write(rec)
                finished[q.id] = rec
        self.timings["questions_s"] = time.perf_counter() - t_loop
        preds = [finished[q.id] for q in questions if q.id in finished]
        max_rounds = (cfg.get("agent") or {}).get("max_rounds") or cfg.dataset.get("max_rounds")
        metrics = aggregate(preds, list(cfg.run.ks), max_rounds=max_rounds)
        metrics.update({"dataset": cfg.dataset.name, "name": cfg.get("name"), "fingerprint": fp})
        write_json(self.run_dir / "metrics.json", metrics)
        self._write_provenance(fp, provenance)
        log.info("metrics: %s", {k: round(v, 2) for k, v in metrics.items() if isinstance(v, float)})
        return metrics

    def _one(self, q: Question, method, qa_reader) -> dict:
        cfg = self.cfg
        ks = sorted(cfg.run.ks)
        llm = self.res.__dict__.get("llm")
        mark = llm.ledger.mark() if llm is not None else None
        rec: dict = {"id": q.id, "question": q.question, "gold_ids": q.gold_ids, "answers": q.answers, "type": q.type}
        t0 = time.perf_counter()
        try:
            rankings: dict[str, list[str]] = {}
            if method.k_dependent and cfg.run.matched_k:
                outs = {k: method.run(q, k) for k in ks}
                for k, o in outs.items():
                    rankings[str(k)] = o.ranking.ids[: cfg.run.save_depth]
                final = outs[ks[-1]]
                rec["trace"] = {str(k): o.trace for k, o in outs.items()}
            else:
                final = method.run(q, cfg.run.base_k or ks[-1])
                rec["trace"] = final.trace
            rankings["final"] = final.ranking.ids[: cfg.run.save_depth]
            rec["rankings"] = rankings
            rec["rounds"] = final.rounds
            if qa_reader is not None:
                rec.update(qa_reader.answer(q, final.ranking.ids))
        except Exception as e:  # one bad question never loses the run; counted in metrics
            if cfg.run.fail_fast:
                raise
            log.error("question %s failed: %s", q.id, e)
            rec["error"] = f"{type(e).__name__}: {e}"
            rec["traceback"] = traceback.format_exc(limit=5)
            rec.setdefault("rankings", {"final": []})
        llm = self.res.__dict__.get("llm")
        if llm is not None:
            rec["llm_calls"] = llm.ledger.since(mark) if mark is not None else list(llm.ledger.records)
        rec["timings"] = {"total_s": time.perf_counter() - t0}
        return rec
