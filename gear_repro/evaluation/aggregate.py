"""Turn predictions.jsonl records into metrics.json (DESIGN.md "Outputs").

Recall@k uses the k-matched ranking when the run saved one (Table 2 single-step), else the final
ranking. A question that errored is a miss (recall 0, EM/F1 0), never left out: otherwise a method that fails
on hard questions would score higher, and rows would average over different question sets.
Token counts of a matched-k run (one pass per k) are reported per pass: ``tokens_per_question`` is what one
run at k = max(ks) costs; ``tokens_per_question_by_k`` gives every k (Fig. 4). Per-round recall (Fig. 2): the ranking GEAR would return had it stopped at round n;
questions that stopped earlier carry their last value forward.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean, median

import numpy as np

from gear_repro.evaluation.metrics import MetricError, answer_metric_of, exact_match, f1_score, recall_at_k
from gear_repro.llm.parsing import ECHO_COUNTER, TRUNCATED_COUNTER
from gear_repro.utils.errors import DataError


def check_record(rec: dict, where: str) -> None:
    """DataError naming ``where`` (file:line) unless ``rec`` is a prediction record: an ``id``, and a ``rankings``
    object unless the question errored (an edited or foreign line would otherwise count as recall 0)."""
    rankings = rec.get("rankings")
    if "id" not in rec or not (isinstance(rankings, dict) or (rec.get("error") and rankings is None)):
        raise DataError(f"{where}: not a prediction record of this harness (no 'id', or a finished question "
                        "without a 'rankings' object); fix or remove the line, or use a new run dir")


def ranking_for_k(pred: dict, k: int) -> list[str]:
    r = pred.get("rankings") or {}
    return r.get(str(k), r.get("final", []))


def question_recalls(pred: dict, ks: Sequence[int]) -> dict[str, float]:
    return {f"recall@{k}": 100.0 * recall_at_k(ranking_for_k(pred, k), pred["gold_ids"], k) for k in ks}


def round_recalls(pred: dict, k: int, max_rounds: int) -> list[float]:
    """R@k after rounds 1..max_rounds, last value carried forward."""
    rankings = [r["ranking"] for r in pred.get("rounds", []) if "ranking" in r]
    if not rankings:
        rankings = [pred["rankings"]["final"]]
    vals = [100.0 * recall_at_k(r, pred["gold_ids"], k) for r in rankings[:max_rounds]]
    return vals + [vals[-1]] * (max_rounds - len(vals))


def calls_at_k(calls: Sequence[dict], k: int | None) -> list[dict]:
    """The LLM calls one run at ``k`` makes: those of the k pass plus untagged ones (QA, k-independent)."""
    return [c for c in calls if c.get("k") is None or k is None or c.get("k") == k]


def run_k(preds: Sequence[dict]) -> int | None:
    """The k whose pass counts as "one run" of a matched-k run: the largest tagged k (None: untagged)."""
    return max((c["k"] for p in preds for c in p.get("llm_calls") or [] if c.get("k") is not None), default=None)


def _tokens(preds: Sequence[dict], k: int | None) -> tuple[dict, dict]:
    tok: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                                            "cached": 0})
    for p in preds:
        for c in calls_at_k(p.get("llm_calls") or [], k):
            t = tok[c.get("stage", "?")]
            t["calls"] += 1
            t["prompt_tokens"] += c.get("prompt_tokens", 0) or 0
            t["completion_tokens"] += c.get("completion_tokens", 0) or 0
            t["cached"] += bool(c.get("cached"))
    per_q = {"prompt": sum(t["prompt_tokens"] for t in tok.values()) / len(preds),
             "completion": sum(t["completion_tokens"] for t in tok.values()) / len(preds)}
    return dict(tok), per_q


def _trace_counters(trace: object) -> dict:
    """``trace['counters']`` of a record; a k-dependent run's trace is ``{k: trace}``: the largest k's."""
    if not isinstance(trace, dict):
        return {}
    if "counters" not in trace:
        per_k = [k for k, v in trace.items() if str(k).isdigit() and isinstance(v, dict)]
        trace = trace[max(per_k, key=int)] if per_k else {}
    return trace.get("counters") or {}


CONTEXT_DROPPED = "context_dropped_passages"  # the suffix of every agent_stats counter of passages left out of a prompt


def context_dropped(stats: object) -> dict[str, int]:
    """The non-zero counters of ``agent_stats`` that count passages dropped to fit ``llm.context_window`` (IRCoT's
    thoughts, the K.2 reader of SyncGE and GEAR's gist read, the K.3 QA reader's ``qa_``)."""
    if not isinstance(stats, dict):
        return {}
    return {k: v for k, v in stats.items() if k.endswith(CONTEXT_DROPPED) and isinstance(v, int) and v > 0}


def agent_stats(preds: Sequence[dict]) -> dict:
    """Method counters summed over questions (GEAR reply failures, HippoRAG's no-entity fallbacks, passages
    dropped to fit the context window, replies that repeated their prompt ``llm_echoed_replies``, ...), with ``hipporag_no_entity_rate`` = fallbacks / HippoRAG searches and ``hipporag_ner_failed_rate`` = NER replies that
    did not parse / HippoRAG searches."""
    out: dict[str, float] = defaultdict(int)
    for p in preds:
        for key, val in _trace_counters(p.get("trace")).items():
            if isinstance(val, int) and not isinstance(val, bool):
                out[key] += val
        if p.get("qa_dropped"):  # QA reader: passages left out to fit llm.context_window
            out["qa_context_dropped_passages"] += p["qa_dropped"]
        echoed = sum(1 for c in p.get("llm_calls") or [] if c.get("echo"))
        if echoed:  # replies that repeated their prompt (llm.parsing.strip_echo): any method, any stage
            out[ECHO_COUNTER] += echoed
        truncated = sum(1 for c in p.get("llm_calls") or [] if c.get("truncated"))
        if truncated:  # replies cut off at max_tokens (the client marks them): any method, any stage
            out[TRUNCATED_COUNTER] += truncated
    if out.get("hipporag_searches"):
        out["hipporag_no_entity_rate"] = out["hipporag_no_entity"] / out["hipporag_searches"]
        out["hipporag_ner_failed_rate"] = out.get("hipporag_ner_failed", 0) / out["hipporag_searches"]
    return dict(sorted(out.items()))


def aggregate(preds: list[dict], ks: Sequence[int], max_rounds: int | None = None, qa: bool | None = None) -> dict:
    """Mean metrics over questions; questions without gold are excluded from recall and counted. An errored
    question's recall is that of the ranking it recorded (empty, so 0, when its retrieval did not finish; its
    ranking when only the QA call failed: per_question.py's rule too); its EM/F1 are 0.
    ``qa``: the run answered questions (None: inferred from the records)."""
    scored = [p for p in preds if p.get("gold_ids")]
    out: dict = {"n_questions": len(preds), "n_scored": len(scored),
                 "n_errors": sum(1 for p in preds if p.get("error")),
                 "n_without_gold": sum(1 for p in preds if not p.get("gold_ids"))}
    if not scored:
        raise MetricError("no question with gold passages: nothing to score")
    per_q = [question_recalls(p, ks) for p in scored]
    for key in per_q[0]:
        out[key] = mean(q[key] for q in per_q)
    by_type: dict[str, list[dict]] = defaultdict(list)
    for p, r in zip(scored, per_q, strict=True):
        by_type[p.get("type") or "all"].append(r)
    out["by_type"] = {t: {"n": len(rs), **{k: mean(r[k] for r in rs) for k in rs[0]}} for t, rs in sorted(by_type.items())}
    if any(p.get("rounds") for p in scored):
        n = max_rounds or max(len(p.get("rounds", [])) for p in scored)
        k = max(ks)
        per_round = [round_recalls(p, k, n) for p in scored]
        out[f"recall@{k}_by_round"] = [mean(v[i] for v in per_round) for i in range(n)]
        done = [p for p in scored if not p.get("error")]  # an errored question ran no whole round (method tables too)
        if done:
            out["rounds_mean"] = mean(len(p.get("rounds", [])) or 1 for p in done)
    if qa is None:
        qa = any("answer" in p for p in preds)
    if qa:  # an errored question has no answer: EM = F1 = 0
        out["em"] = 100.0 * mean(exact_match(p["answer"] or "", p["answers"], answer_metric_of(p))
                                 if "answer" in p else 0.0 for p in preds)
        out["f1"] = 100.0 * mean(f1_score(p["answer"] or "", p["answers"], answer_metric_of(p))
                                 if "answer" in p else 0.0 for p in preds)
        out["n_answered"] = sum(1 for p in preds if "answer" in p)
    stats = agent_stats(preds)
    if stats:
        out["agent_stats"] = stats
    calls = [c for p in preds for c in p.get("llm_calls", [])]
    done = [p for p in preds if not p.get("error")]  # tokens per question over the questions that did not error
    if calls and done:
        tagged = sorted({c["k"] for c in calls if c.get("k") is not None})
        k_run = run_k(preds)  # one run at the largest k, not the sum of the k passes
        out["tokens_by_stage"], out["tokens_per_question"] = _tokens(done, k_run)
        # share of the recorded LLM calls served from the reply cache (a replay from another endpoint shows here)
        out["llm_cache_hit_rate"] = round(sum(bool(c.get("cached")) for c in calls) / len(calls), 4)
        if tagged:
            out["tokens_k"] = k_run
            out["tokens_per_question_by_k"] = {str(k): _tokens(done, k)[1] for k in tagged}
    lat = [p["timings"]["total_s"] for p in preds if p.get("timings", {}).get("total_s") is not None]
    if lat:
        lat.sort()
        # p95 as the cost table's (numpy's linear rule): the index int(0.95 n) was the maximum for n <= 20
        out["latency_ms"] = {"mean": 1000 * mean(lat), "p50": 1000 * median(lat),
                             "p95": 1000 * float(np.percentile(lat, 95))}
    return out
