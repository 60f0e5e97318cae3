"""`gear-repro-plan [OVERRIDES...]`: a sweep's plan without running it (docs/sweeps.md, "A sweep's price before it
runs"): its runs as `gear-repro -m OVERRIDES` would start them, each with its questions, LLM calls and tokens,
dollars at list price, question and encode hours on this machine and a GPU, disk and memory, then the totals.

    gear-repro-plan experiment=table2_baselines llm=openai      # on the paper's three datasets
    gear-repro-plan experiment=table3_qa dataset=musique --json
    gear-repro-plan --all llm=openai                             # every preset of configs/experiment/

Without dataset=, a plan is of the paper's data (dataset=musique,2wiki,hotpotqa). Nothing is encoded or sent.
"""

from __future__ import annotations

import argparse
import json
import sys

from gear_repro.utils.errors import GearError

PAPER_DATASETS = "musique,2wiki,hotpotqa"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gear-repro-plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("overrides", nargs="*", help="Hydra overrides as for gear-repro -m (comma lists sweep)")
    ap.add_argument("--all", action="store_true", help="one plan per preset of configs/experiment/")
    ap.add_argument("--json", action="store_true", help="print JSON instead of markdown tables")
    args = ap.parse_args(argv)

    from gear_repro.api import compose
    from gear_repro.pipeline.plan import all_presets, markdown, plan_sweep, with_default

    base = with_default(args.overrides, "dataset", PAPER_DATASETS)
    sweeps = ([(p, [*base, f"experiment={p}"]) for p in all_presets()] if args.all else
              [(next((o.split("=", 1)[1] for o in base if o.startswith("experiment=")), "overrides"), base)])
    try:
        plans = [plan_sweep(name, overrides, compose) for name, overrides in sweeps]
    except GearError as e:
        print(f"gear-repro-plan: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([p.to_dict() for p in plans], indent=1))
    else:
        print("\n".join(markdown(p) for p in plans))
    return 0


if __name__ == "__main__":
    sys.exit(main())
