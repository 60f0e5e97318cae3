"""The tables of docs/scale.md ("Full-size dress rehearsal") from a rehearsal folder (scripts/fullsize_rehearsal.sh).

    python scripts/fullsize_table.py OUT

prints one markdown row per stage (from OUT/<stage>.time, /usr/bin/time -v, and OUT/<stage>.du: wall time, CPU
seconds, peak RSS, bytes under the cache and the stage's folder after it, how it ended), the kill -9 records
(OUT/killed_in_*.txt and the "already encoded" lines of the runs after them), the recall of each finished run
(OUT/runs/*/metrics.json) and, after a ``METHODS=1`` rehearsal, one row per method (:func:`method_rows`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
from estimate_methods import METHODS  # scripts/ (this script's folder) is on the path

from gear_repro.evaluation.per_question import timing

GIB, MIB = 1024 ** 3, 1024 ** 2
# the METHODS runs of scripts/fullsize_rehearsal.sh, in its order (their folder names under OUT/runs), and labels
METHOD_RUNS = {name: METHODS[name][0] for name in
               ("ircot_bm25", "hybrid_syncge", "gear_hybrid", "t2rag", "hipporag", "hipporag_ircot", "griever")}
_CAPACITY = re.compile(r"capacity: .*?~([\d.]+) GiB of memory")


def field(text: str, name: str) -> str | None:
    m = re.search(re.escape(name) + r"[^:]*: (.*)", text)
    return m.group(1).strip() if m else None


def stage_rows(out: Path) -> list[str]:
    rows = ["| stage | wall | CPU s | peak RSS GiB | cache / folder GiB after it | ended |", "|---|---|---|---|---|---|"]
    for t in sorted(out.glob("*.time"), key=lambda p: p.stat().st_mtime):
        text = t.read_text()
        if not text.strip():  # still running: /usr/bin/time writes at the end
            rows.append(f"| {t.stem} | running | | | | |")
            continue
        cpu = sum(float(field(text, k) or 0) for k in ("User time", "System time"))
        rss = int(field(text, "Maximum resident set size") or 0) * 1024 / GIB
        du = t.with_suffix(".du")
        sizes = [int(line.split()[0]) / GIB for line in du.read_text().splitlines()] if du.is_file() else []
        ended = "killed (signal 9)" if "signal 9" in text.splitlines()[0] else f"exit {field(text, 'Exit status')}"
        rows.append(f"| {t.stem} | {field(text, 'Elapsed (wall clock) time (h:mm:ss or m:ss)')} | {cpu:.0f} | {rss:.2f} | "
                    f"{' / '.join(f'{s:.3f}' for s in sizes)} | {ended} |")
    return rows


def kill_lines(out: Path) -> list[str]:
    lines = [p.read_text().strip() for p in sorted(out.glob("killed_in_*.txt"))]
    for log in sorted(out.glob("index*.log")):
        lines += [re.sub(r"^.*\] - ", "", x) for x in log.read_text(errors="replace").replace("\r", "\n").splitlines()
                  if "already encoded" in x]
    return lines


def recall_rows(out: Path) -> list[str]:
    rows = ["| run | R@5 | R@10 | R@15 | questions |", "|---|---|---|---|---|"]
    for m in sorted((out / "runs").glob("*/metrics.json")):
        d = json.loads(m.read_text())
        if "recall@5" in d:
            rows.append(f"| {m.parent.name} | {d['recall@5']:.1f} | {d['recall@10']:.1f} | {d['recall@15']:.1f} | "
                        f"{d.get('n_questions')} |")
    return rows


def wall_seconds(clock: str) -> float:
    """Seconds of /usr/bin/time's "h:mm:ss" or "m:ss.ss"."""
    total = 0.0
    for part in clock.split(":"):
        total = 60 * total + float(part)
    return total


def method_rows(out: Path) -> list[str]:
    """One row per METHODS run that finished its stage (OUT/<name>.time written): the run's wall time split into
    the build (everything before the question loop, loading, indexes, and the first question, where the methods
    that build lazily build: GRIEVER's structures, the triple graph, HippoRAG's phrase vectors) and the other
    questions (run.json ``timings.questions_s`` less the first question's ``timings.total_s``); their retrieval
    seconds per question, p50 / p95 (the method's own time, LLM calls included, as cost.md counts it); peak RSS;
    bytes under the cache and the run's folder after it; the start-up capacity check's memory estimate (the run
    log's "capacity: ..." line) and its ratio to the measured peak. [] when no such run is there."""
    rows = ["| method | questions (errors) | build + first question wall s | other questions wall s | "
            "their retrieval p50 / p95 s | peak RSS GiB | "
            "cache GiB / run dir MiB | capacity estimate GiB | estimate / peak | ended |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for name, label in METHOD_RUNS.items():
        t = out / f"{name}.time"
        if not t.is_file() or not t.read_text().strip():
            continue
        text, run = t.read_text(), out / "runs" / name
        wall = wall_seconds(field(text, "Elapsed (wall clock) time (h:mm:ss or m:ss)") or "0")
        peak = int(field(text, "Maximum resident set size") or 0) * 1024 / GIB
        info = json.loads((run / "run.json").read_text()) if (run / "run.json").is_file() else {}
        loop = (info.get("timings") or {}).get("questions_s")
        preds = [json.loads(x) for x in (run / "predictions.jsonl").read_text().splitlines() if x.strip()] \
            if (run / "predictions.jsonl").is_file() else []
        secs = [s for p in preds[1:] if (s := timing(p)["retrieval_s"]) is not None]
        lat = f"{np.percentile(secs, 50):.3f} / {np.percentile(secs, 95):.3f}" if secs else "—"
        du = t.with_suffix(".du")
        sizes = [int(line.split()[0]) for line in du.read_text().splitlines()] if du.is_file() else []
        disk = f"{sizes[0] / GIB:.3f} / {sizes[1] / MIB:.1f}" if len(sizes) == 2 else "—"  # du: the cache, the run
        log = t.with_suffix(".log")
        est = _CAPACITY.findall(log.read_text(errors="replace")) if log.is_file() else []
        capacity, ratio = (f"{float(est[-1]):.2f}", f"{float(est[-1]) / peak:.2f}") if est and peak else ("—", "—")
        errors = sum("error" in p for p in preds)
        first = float((preds[0].get("timings") or {}).get("total_s") or 0) if preds else 0.0
        # a run that stopped before its question loop: all of its wall time was build
        build, questions = (f"{wall - loop + first:.1f}", f"{loop - first:.1f}") if loop is not None else \
            (f"{wall:.1f}", "—")
        rows.append(f"| {label} | {len(preds)} ({errors}) | {build} | {questions} | {lat} | {peak:.2f} | "
                    f"{disk} | {capacity} | {ratio} | exit {field(text, 'Exit status')} |")
    return rows if len(rows) > 2 else []


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit("usage: python scripts/fullsize_table.py OUT (the rehearsal's folder)")
    out = Path(sys.argv[1])
    methods = method_rows(out)
    print("\n".join([*stage_rows(out), "", *kill_lines(out), "", *recall_rows(out), *(["", *methods] if methods else [])]))


if __name__ == "__main__":
    main()
