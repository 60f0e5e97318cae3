"""Compare the rankings of two run dirs question by question (refactor checks).

    python scripts/compare_rankings.py RUN_A RUN_B [RUN_A2 RUN_B2 ...]
    python scripts/compare_rankings.py --refuse RUN [RUN ...]

For each pair: how many questions have identical rankings (every saved k-list, the final list and every GEAR
round's ``ranking``), the first difference otherwise, and R@5/10/15 of both.

``--refuse``: R@5/10/15 of a single-step NaiveGE run under both Eq. 3 fusion orders, re-fused from its traces
(``trace[k].base`` and ``trace[k].expansion.expanded``): the run's own order and the other one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(run: Path) -> dict[str, dict]:
    rows = [json.loads(x) for x in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    return {r["id"]: r for r in rows}


def lists(rec: dict) -> dict[str, list[str]]:
    out = {f"rankings.{k}": v for k, v in sorted(rec.get("rankings", {}).items())}
    for i, r in enumerate(rec.get("rounds") or []):
        out[f"rounds[{i}].ranking"] = r.get("ranking", [])
    return out


def recall(preds: dict[str, dict], k: int) -> float:
    vals = []
    for r in preds.values():
        ranking = r["rankings"].get(str(k), r["rankings"]["final"])[:k]
        gold = set(r["gold_ids"])
        vals.append(len(gold & set(ranking)) / len(gold) if gold else 0.0)
    return 100 * sum(vals) / max(1, len(vals))


def compare(a: Path, b: Path) -> bool:
    pa, pb = load(a), load(b)
    same = [q for q in pa if q in pb and lists(pa[q]) == lists(pb[q])]
    ok = len(same) == len(pa) == len(pb)
    print(f"{a.name}: {len(same)}/{len(pa)} questions identical ({len(pb)} in {b.name})")
    for q in pa:
        if q not in same:
            la, lb = lists(pa[q]), lists(pb.get(q, {}))
            key = next((k for k in la if la[k] != lb.get(k)), None)
            print(f"  first difference: {q} {key}")
            break
    print("  R@5/10/15 A:", [round(recall(pa, k), 2) for k in (5, 10, 15)],
          "B:", [round(recall(pb, k), 2) for k in (5, 10, 15)])
    return ok


def refuse(run: Path) -> None:
    from gear_repro.core.fusion import rrf

    preds = load(run)
    for order in ("base_first", "expanded_first"):
        fused = {}
        for q, r in preds.items():
            rankings = {}
            for k, tr in r["trace"].items():
                base, exp = tr["base"], tr.get("expansion", {}).get("expanded", [])
                rankings[k] = rrf([base, exp] if order == "base_first" else [exp, base]).ids
            fused[q] = {**r, "rankings": {**rankings, "final": rankings[max(rankings, key=int)]}}
        same = sum(fused[q]["rankings"][k][:100] == preds[q]["rankings"][k] for q in preds for k in preds[q]["trace"])
        print(f"{run.name} {order}: R@5/10/15 {[round(recall(fused, k), 2) for k in (5, 10, 15)]} "
              f"({same} of {sum(len(r['trace']) for r in preds.values())} k-lists equal to the run's)")


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--refuse":
        for run in argv[1:]:
            refuse(Path(run))
        return
    pairs = list(zip(argv[::2], argv[1::2], strict=True))
    results = [compare(Path(a), Path(b)) for a, b in pairs]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main(sys.argv[1:])
