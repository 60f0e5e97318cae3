"""Joint named-entity + triple extraction with the K.1 prompt (GEAR §6.2), resumable and counted."""

from __future__ import annotations

import contextvars
import json
import logging
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from gear_repro.data import Dataset
from gear_repro.llm.base import LLM
from gear_repro.llm.context import check_fits
from gear_repro.llm.estimate import (
    EstimateSettings,
    RunEstimate,
    announce,
    estimate_calls,
    reply_tokens,
    settings_of,
)
from gear_repro.llm.parsing import parse_extraction
from gear_repro.prompts import render
from gear_repro.types import Passage, Triple
from gear_repro.utils.errors import GearError
from gear_repro.utils.io import JsonlAppender, read_jsonl, write_json, write_jsonl

log = logging.getLogger(__name__)

TRIPLES_FILE = "triples.jsonl"
LOG_FILE = "extraction_log.jsonl"
STATS_FILE = "extraction_stats.json"
_REFERENCE_SAMPLE = 5000  # passages whose reference triples measure the output tokens of an extraction reply


class ExtractionError(GearError):
    """Some extraction calls failed (the passages stay undone and are retried by a re-run)."""


def run_extraction(cfg: DictConfig, dataset: Dataset, llm: LLM, run_dir: str | Path) -> dict[str, Any]:
    """``stage=extract``: K.1 extraction with ``llm`` over ``dataset.passages`` (first ``dataset.limit_passages``).

    Optional ``cfg.extraction``: ``params`` (LLM request params, e.g. max_tokens), ``progress`` (tqdm; null =
    ``run.progress``). Returns the stats written to ``extraction_stats.json``.
    """
    limit = OmegaConf.select(cfg, "dataset.limit_passages")
    passages = dataset.passages[: int(limit)] if limit else dataset.passages
    params = dict(OmegaConf.select(cfg, "extraction.params", default=None) or {})
    llm.check_params(params, "extraction.params")  # before any passage
    progress = OmegaConf.select(cfg, "extraction.progress", default=None)
    if progress is None:
        progress = OmegaConf.select(cfg, "run.progress", default=True)
    return extract_triples(passages, llm, run_dir, reference=dataset.triples, progress=bool(progress),
                           params=params, dataset_name=dataset.name)


def _load_done(out: Path) -> dict[str, dict]:
    """Finished passages from the log; triples of unfinished passages are dropped from triples.jsonl."""
    log_path, t_path = out / LOG_FILE, out / TRIPLES_FILE
    for p in (log_path, t_path):  # truncate a torn last line left by a killed process
        if p.exists():
            JsonlAppender(p).close()
    done = {r["passage_id"]: r for r in read_jsonl(log_path)} if log_path.exists() else {}
    if t_path.exists():
        rows = read_jsonl(t_path)
        keep = [r for r in rows if r.get("passage_id") in done]
        seen: set[str] = set()
        keep = [r for r in keep if not (r["id"] in seen or seen.add(r["id"]))]  # type: ignore[func-returns-value]
        if len(keep) != len(rows):
            log.info("resume: dropping %d triples of unfinished passages or repeats", len(rows) - len(keep))
            write_jsonl(t_path, keep)
    return done


def _extract_one(llm: LLM, p: Passage, params: Mapping[str, Any]) -> tuple[list[dict], dict]:
    messages = render("extraction", wiki_title=p.title, passage=p.text)
    reply = llm.chat(messages, stage="extract", **params)
    entities, parsed = parse_extraction(reply.text)
    triples = [{"id": f"{p.id}-{n}", "subject": s, "predicate": r, "object": o, "passage_id": p.id}
               for n, (s, r, o) in enumerate(parsed.triples)]
    rec = {"passage_id": p.id, "n_triples": len(triples), "entities": entities, "failed": parsed.failed,
           "repaired": parsed.repaired, "dropped": parsed.dropped, "error": parsed.error,
           "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
           "cached": reply.cached, "latency_s": reply.latency_s, "finish_reason": reply.finish_reason}
    return triples, rec


def extract_triples(
    passages: Sequence[Passage],
    llm: LLM,
    out_dir: str | Path,
    *,
    reference: Sequence[Triple] | None = None,
    progress: bool = True,
    params: Mapping[str, Any] | None = None,
    concurrency: int | None = None,
    dataset_name: str = "",
) -> dict[str, Any]:
    """Extract triples of ``passages`` with ``llm`` on ``concurrency`` workers (default ``llm.concurrency``).

    Appends per passage in passage order (whatever the worker count); skips passages already done in
    ``out_dir``. Failed LLM calls are counted (``call_errors``) and the passage stays undone, so a re-run
    retries it; :func:`extraction_error` turns them into one message.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    params = dict(params or {})
    check_fits(llm, render("extraction", wiki_title="", passage=""), "K.1 extraction", params)  # before any passage
    done = _load_done(out)
    todo = [p for p in passages if p.id not in done]
    workers = max(1, int(concurrency or llm.concurrency))
    log.info("extraction: %d passages, %d already done, %d to go (%d worker(s))", len(passages),
             len(passages) - len(todo), len(todo), workers)
    settings = settings_of(llm)
    est = extraction_estimate(todo, llm, params, workers, reference, settings)
    announce(est, settings, log)
    probe = max(100, 8 * workers)  # uncached calls after which the estimate is said again, measured
    revised: RunEstimate | None = None
    probe_tokens = n_probe = 0
    call_errors: list[str] = []
    t0 = time.perf_counter()
    n_new = 0
    with JsonlAppender(out / TRIPLES_FILE) as t_out, JsonlAppender(out / LOG_FILE) as l_out, \
            tqdm(total=len(todo), desc="extract", unit="passage", disable=not progress) as bar:
        ex = ThreadPoolExecutor(max_workers=workers)
        try:
            # Results are written in passage order whatever the completion order of the workers:
            # triples.jsonl order decides hub truncation, neighbour order and tie-breaks downstream.
            futures: dict[int, Future] = {}
            next_submit = 0
            for i, p in enumerate(todo):
                while next_submit < len(todo) and next_submit < i + workers * 2:  # bounded queue: a kill
                    futures[next_submit] = ex.submit(  # loses few calls; the caller's ledger tags (ledger.tags)
                        contextvars.copy_context().run, _extract_one, llm, todo[next_submit], params)
                    next_submit += 1
                fut = futures.pop(i)
                try:
                    triples, rec = fut.result()
                except Exception as e:  # a failed call must not end the run; counted and reported once
                    call_errors.append(f"{p.id}: {type(e).__name__}: {str(e)[:200]}")
                    log.debug("extraction of passage %s failed: %s", p.id, e)
                    bar.update(1)
                    continue
                t_out.write_many(triples)  # durable before the log line that marks the passage done
                l_out.write(rec)  # written last: the passage is done only once this line exists
                done[p.id] = rec
                n_new += 1
                bar.update(1)
                if not rec["cached"] and revised is None:
                    probe_tokens += int(rec["completion_tokens"] or 0)
                    n_probe += 1
                    if n_probe >= probe:
                        revised = est.revised(n_probe, time.perf_counter() - t0, probe_tokens)
                        log.info("%s", revised.line())
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
    wall = time.perf_counter() - t0
    stats = extraction_stats([done[p.id] for p in passages if p.id in done], out / TRIPLES_FILE, reference,
                             n_passages=len(passages))
    stats["dataset"] = dataset_name
    stats["session"] = {"passages_processed": n_new, "wall_s": round(wall, 2),
                        "passages_per_min": round(60 * n_new / wall, 2) if wall > 0 and n_new else None,
                        "call_errors": len(call_errors), "call_error_examples": call_errors[:5]}
    stats["estimate"] = est.to_dict()
    stats["estimate_revised"] = revised.to_dict() if revised is not None else None
    stats["llm_stats"] = llm.stats()
    write_json(out / STATS_FILE, stats)
    log.info("extraction: %d/%d passages done, %d triples (%.2f/passage), %d parse failures, %d repairs; %s",
             stats["n_done"], len(passages), stats["triples"], stats["triples_per_passage"]["mean"] or 0,
             stats["parse"]["failures"], stats["parse"]["repairs"], out / STATS_FILE)
    if stats["parse"]["failures"]:
        log.warning("extraction: %d of %d replies did not parse (no triples from those passages; first: %s)",
                    stats["parse"]["failures"], stats["n_done"], stats["parse"]["failure_examples"][0])
    return stats


def reference_reply(triples: Sequence[Triple]) -> str:
    """One passage's reference triples written as the K.1 reply that would give them (entities, then triples)."""
    ents = list(dict.fromkeys(x for t in triples for x in (t.subject, t.object)))
    return json.dumps({"named_entities": ents, "triples": [[t.subject, t.predicate, t.object] for t in triples]},
                      ensure_ascii=False)


def extraction_estimate(todo: Sequence[Passage], llm: LLM, params: Mapping[str, Any], workers: int,
                        reference: Sequence[Triple] | None, settings: EstimateSettings) -> RunEstimate:
    """The estimate of extracting ``todo`` (llm/estimate.py): the K.1 prompts of these passages as they will be
    sent, less those the reply cache answers; output tokens per call measured on the reference triples of up to
    ``_REFERENCE_SAMPLE`` of these passages written as K.1 replies (:func:`reference_reply`; e.g. HippoRAG's GPT-3.5
    OpenIE of the MuSiQue sample), else ``llm.estimate_output_tokens``, capped at ``max_tokens``."""
    model = str(getattr(llm, "model", "?"))
    output: float | None = None
    source = None
    if reference:
        by: dict[str, list[Triple]] = {}
        for t in reference:
            by.setdefault(t.passage_id, []).append(t)
        sample = [by[p.id] for p in todo if p.id in by][:_REFERENCE_SAMPLE]
        measured = reply_tokens((reference_reply(ts) for ts in sample), model)
        if measured is not None:
            output, n = measured
            source = f"{output:.1f} per call, the dataset's reference triples of {n} passages as K.1 replies"
    cap = params.get("max_tokens", (getattr(llm, "default_params", None) or {}).get("max_tokens"))
    if cap:
        per_call = output if output is not None else settings.output_tokens
        if per_call > int(cap):
            output, source = int(cap), f"{cap} per call, the max_tokens cap"
    is_cached = getattr(llm, "is_cached", None)
    prompts = (render("extraction", wiki_title=p.title, passage=p.text) for p in todo)
    return estimate_calls(prompts, stage="extraction", model=model, concurrency=workers, settings=settings,
                          output_tokens=output, output_source=source,
                          is_cached=(lambda m: is_cached(m, **params)) if callable(is_cached) else None)


def extraction_error(stats: Mapping[str, Any]) -> ExtractionError | None:
    """One error for an extraction that cannot be used (None otherwise): this session's LLM calls that failed, or
    finished passages that gave no triple at all (every reply unparsable or empty: a wrong model or setting, not a
    corpus to index)."""
    session = stats.get("session") or {}
    n = int(session.get("call_errors") or 0)
    if n:
        first = (session.get("call_error_examples") or ["?"])[0]
        return ExtractionError(
            f"extraction: {n} LLM call(s) failed, {stats.get('n_done')}/{stats.get('n_passages')} passages done; "
            f"first failure: {first}. Fix the cause and re-run: finished passages are kept, failed ones retried")
    if stats.get("n_done") and not stats.get("triples"):
        parse = stats.get("parse") or {}
        first = (parse.get("failure_examples") or ["every reply parsed and was empty"])[0]
        return ExtractionError(
            f"extraction: no triple from any of the {stats['n_done']} passages done ({parse.get('failures', 0)} "
            f"replies did not parse; first: {first}); check the model and the llm settings "
            f"({stats.get('triples_file')} is empty)")
    return None


def _dist(values: list[int]) -> dict[str, Any]:
    if not values:
        return {"mean": None, "median": None, "min": None, "max": None, "p90": None, "histogram": {}}
    s = sorted(values)
    return {"mean": round(statistics.fmean(s), 3), "median": statistics.median(s), "min": s[0], "max": s[-1],
            "p90": s[min(len(s) - 1, int(0.9 * len(s)))],
            "histogram": {str(k): v for k, v in sorted(Counter(s).items())}}


def extraction_stats(records: list[dict], triples_path: Path, reference: Sequence[Triple] | None,
                     n_passages: int) -> dict[str, Any]:
    """Stats over finished passages' log records (and the reference triples on the same passages)."""
    counts = [int(r["n_triples"]) for r in records]
    uncached = [r for r in records if not r.get("cached")]
    llm_s = sum(float(r.get("latency_s") or 0) for r in uncached)
    pt = sum(int(r.get("prompt_tokens") or 0) for r in records)
    ct = sum(int(r.get("completion_tokens") or 0) for r in records)
    n = len(records)
    stats: dict[str, Any] = {
        "n_passages": n_passages,
        "n_done": n,
        "n_remaining": n_passages - n,
        "triples": sum(counts),
        "triples_per_passage": _dist(counts),
        "passages_without_triples": sum(1 for c in counts if c == 0),
        "entities_per_passage_mean": round(statistics.fmean(len(r.get("entities") or []) for r in records), 3)
        if records else None,
        "parse": {
            "failures": sum(1 for r in records if r.get("failed")),
            "repairs": sum(1 for r in records if r.get("repaired")),
            "dropped_triples": sum(int(r.get("dropped") or 0) for r in records),
            "truncated_replies": sum(1 for r in records if r.get("finish_reason") == "length"),
            "failure_examples": [f"{r['passage_id']}: {r.get('error')}" for r in records if r.get("failed")][:5],
        },
        "tokens": {
            "prompt": pt, "completion": ct,
            "prompt_per_passage": round(pt / n, 1) if n else None,
            "completion_per_passage": round(ct / n, 1) if n else None,
            "total_per_passage": round((pt + ct) / n, 1) if n else None,
        },
        "calls": {"cached": n - len(uncached), "uncached": len(uncached)},
        "llm_seconds_uncached": round(llm_s, 2),
        "passages_per_min_llm": round(60 * len(uncached) / llm_s, 2) if llm_s > 0 else None,
        "triples_file": str(triples_path),
    }
    if reference is not None:
        stats["reference"] = compare_with_reference(records, triples_path, reference)
    return stats


def _key(s: str, r: str, o: str) -> tuple[str, str, str]:
    return (" ".join(s.casefold().split()), " ".join(r.casefold().split()), " ".join(o.casefold().split()))


def compare_with_reference(records: list[dict], triples_path: Path, reference: Sequence[Triple]) -> dict[str, Any]:
    """Counts of ours vs the reference triples (e.g. GPT-3.5 OpenIE) on the same finished passages."""
    ids = {r["passage_id"] for r in records}
    ref_by: dict[str, set] = {}
    for t in reference:
        if t.passage_id in ids:
            ref_by.setdefault(t.passage_id, set()).add(_key(t.subject, t.predicate, t.object))
    ours_by: dict[str, set] = {}
    if triples_path.exists():
        for t in read_jsonl(triples_path):
            if t["passage_id"] in ids:
                ours_by.setdefault(t["passage_id"], set()).add(_key(t["subject"], t["predicate"], t["object"]))
    n = len(ids)
    ours_n = sum(int(r["n_triples"]) for r in records)
    ref_n = sum(len(v) for v in ref_by.values())
    exact = sum(len(ours_by.get(pid, set()) & ref_by.get(pid, set())) for pid in ids)
    ent_ours = {pid: {x for t in v for x in (t[0], t[2])} for pid, v in ours_by.items()}
    ent_ref = {pid: {x for t in v for x in (t[0], t[2])} for pid, v in ref_by.items()}
    ent_shared = sum(len(ent_ours.get(p, set()) & ent_ref.get(p, set())) for p in ids)
    ent_ref_n = sum(len(v) for v in ent_ref.values())
    return {
        "passages": n,
        "ours_triples": ours_n,
        "reference_triples": ref_n,
        "ours_per_passage": round(ours_n / n, 3) if n else None,
        "reference_per_passage": round(ref_n / n, 3) if n else None,
        "ratio_ours_to_reference": round(ours_n / ref_n, 3) if ref_n else None,
        "reference_passages_without_triples": sum(1 for pid in ids if not ref_by.get(pid)),
        "exact_triple_matches": exact,
        "reference_entities_recovered": round(ent_shared / ent_ref_n, 3) if ent_ref_n else None,
    }
