"""The tables of docs/scale.md ("Full-size dress rehearsal") from a rehearsal folder (scripts/fullsize_rehearsal.sh).

    python scripts/fullsize_table.py OUT

prints one markdown row per stage (from OUT/<stage>.time, /usr/bin/time -v, and OUT/<stage>.du: wall time, CPU
seconds, peak RSS, bytes under the cache and the stage's folder after it, how it ended), the kill -9 records
(OUT/killed_in_*.txt and the "already encoded" lines of the runs after them) and the recall of each finished run
(OUT/runs/*/metrics.json).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

GIB = 1024 ** 3


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


def main() -> None:
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        raise SystemExit("usage: python scripts/fullsize_table.py OUT (the rehearsal's folder)")
    out = Path(sys.argv[1])
    print("\n".join([*stage_rows(out), "", *kill_lines(out), "", *recall_rows(out)]))


if __name__ == "__main__":
    main()
