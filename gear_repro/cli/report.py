"""`gear-repro-report RUN_DIR... --out DIR`: paper-layout tables (and figures) from finished runs.

Also writes the analyses that apply (Table 12 density, Table 9 rounds × beam length, tokens per stage, each
method's own statistics from its report hooks; gear_repro/reporting/analyses.py) and the cost/latency table (cost.md). Every
recall/EM/F1 value carries a 95% bootstrap interval over questions and N. ``--claims`` adds the claims
scoreboard (claims.md: paired tests of the papers' claims on the same question ids; docs/evidence.md).
``--trace QID`` prints the Table 6-style walk-through of one question instead. ``--html`` also writes DIR/index.html,
a static results explorer that opens from disk (overview, every question, each method's view of it side by side,
plots; docs/explorer.md); it implies ``--figures``. failures.md lists the run dirs
without metrics.json (a failed, cancelled or running job) with their error (failure.json, else their SLURM log) and
the runs with failed questions with the first error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gear_repro.evaluation.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, MIN_RESAMPLES
from gear_repro.reporting.evidence import EvidenceOptions
from gear_repro.reporting.output import MANIFEST, ReportDir, check_stem
from gear_repro.reporting.runs import find_runs, find_unfinished, write_failures
from gear_repro.reporting.tables import long_table, sources_note, wide_table, write_tables
from gear_repro.utils.errors import GearError
from gear_repro.utils.io import output_error, require_writable_dir


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="gear-repro-report", description=__doc__)
    ap.add_argument("runs", nargs="+", help="run dirs or multirun folders (searched recursively)")
    ap.add_argument("--out", default="outputs/report", help="output folder (default: outputs/report)")
    ap.add_argument("--stem", default="table", help="file name stem of the tables (default: table)")
    ap.add_argument("--figures", action="store_true", help="also draw the paper's figures from these runs")
    ap.add_argument("--trace", metavar="QID", default=None,
                    help="print the Table 6-style walk-through of question QID in these runs and exit")
    ap.add_argument("--html", action="store_true",
                    help="also write DIR/index.html: a static results explorer that opens from disk (implies --figures)")
    ap.add_argument("--claims", action="store_true",
                    help="write claims.md/csv: each paper claim these runs can test, with a paired test")
    ap.add_argument("--claims-file", default=None, help="claims YAML (default: gear_repro/resources/claims.yaml)")
    ap.add_argument("--intersect", action="store_true",
                    help="pair runs on different question sets over their shared questions (default: refuse)")
    ap.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                    help=f"bootstrap/permutation resamples (default {DEFAULT_RESAMPLES}, at least {MIN_RESAMPLES})")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the resampling (default {DEFAULT_SEED})")
    ap.add_argument("--prices", default=None, help="price table YAML (default: gear_repro/resources/prices.yaml)")
    ap.add_argument("--price-model", default=None, help="model of the price table (default: the table's default)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.trace is not None:  # works on unfinished runs too (no metrics.json yet)
            from gear_repro.reporting.analyses import runs_with_predictions, trace_report

            text = trace_report(runs_with_predictions(args.runs), args.trace)
            if not text:
                raise GearError(f"question {args.trace} is in none of the runs' predictions.jsonl")
            print(text)
            return 0
        if not args.stem or Path(args.stem).name != args.stem or args.stem in (".", ".."):
            raise GearError(f"--stem must be a file name stem without a folder, got '{args.stem}' (use --out DIR)")
        check_stem(args.stem)
        require_writable_dir(args.out, "--out")
        args.figures = args.figures or args.html
        if args.resamples < MIN_RESAMPLES:  # a "95 %" percentile interval from a handful of draws is not one
            raise GearError(f"--resamples must be at least {MIN_RESAMPLES} (a 95% interval's 2.5% tails need draws "
                            f"to sit in; default {DEFAULT_RESAMPLES}), got {args.resamples}")
        if not 0 <= args.seed < 2**32:  # numpy's seed range
            raise GearError(f"--seed must be in [0, 2^32), got {args.seed}")
        opts = EvidenceOptions(resamples=args.resamples, seed=args.seed, intersect=args.intersect)
        unfinished = find_unfinished(args.runs)
        if unfinished:
            print(f"skipped {len(unfinished)} unfinished run(s) (no metrics.json; re-run them to finish, errors in "
                  "failures.md): " + ", ".join(str(u.path) for u in unfinished), file=sys.stderr)
        runs = find_runs(args.runs)
        check_run_papers(runs)
        report = ReportDir(args.out, args.stem)
        with report as staging:  # the whole folder replaces --out at the end (reporting/output.py)
            write_report(runs, staging, args, opts)
            for p in write_failures(runs, unfinished, staging):
                print("\n" + p.read_text(encoding="utf-8").rstrip())
            if args.html:  # last: it shows the tables, figures and failures written above
                from gear_repro.reporting.html import write_explorer

                write_explorer(runs, unfinished, staging, opts, args.stem)
        for name in report.files:
            if name.startswith("fig"):
                print(f"figure: {report.out / name}")
        for note in dict.fromkeys(n for r in runs for n in r.notes):
            print(f"warning: {note}", file=sys.stderr)
    except GearError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # disk full or read-only while writing: one line naming the file
        print(f"error: {output_error(e.filename or args.out, e)}", file=sys.stderr)
        return 2
    if args.html:
        print(f"explorer: {report.out / 'index.html'} (open it in a browser; no server needed)")
    site = [f for f in report.files if f.startswith("explorer/")]  # the explorer's files: one line, not hundreds
    shown = [f for f in report.files if f not in site] + ([f"explorer/ ({len(site)} files)"] if site else [])
    print(f"\nwrote {len(report.files)} files to {report.out}/ (listed in {MANIFEST}): " + ", ".join(shown))
    return 0


def check_run_papers(runs: list) -> None:
    """Each run's ``report.paper`` / ``report.qa_paper`` must name a paper of paper_results.csv: another name would
    leave every paper column of its tables empty without a word. The error names the run's config.yaml."""
    from gear_repro.reporting.paper import check_papers

    for run in runs:
        try:
            check_papers(run.config.get("report") or {})
        except GearError as e:
            raise GearError(f"{run.path / 'config.yaml'}: {e}") from None


def write_report(runs: list, out: Path, args: argparse.Namespace, opts: EvidenceOptions) -> None:
    """Tables, analyses, cost, claims (``--claims``) and figures (``--figures``) into ``out``; Markdown shown."""
    long = long_table(runs, opts=opts)
    write_tables(long, out, args.stem)
    for table, sub in long.groupby("block", sort=False):
        print(f"\n{table}: ours [95% CI] n=questions (paper, delta)")
        wide = wide_table(sub)
        wide.columns = [f"{d} {m}" for d, m in wide.columns]
        print(wide.to_string())
        notes = sources_note(sub)
        if notes:
            print(notes)
    from gear_repro.reporting.analyses import write_analyses
    from gear_repro.reporting.cost import load_prices, write_cost

    prices = load_prices(args.prices, args.price_model)
    extra = write_analyses(runs, out, opts) + write_cost(runs, out, prices)
    if args.claims:
        from gear_repro.reporting.claims import write_claims

        extra += write_claims(runs, out, opts, args.claims_file)
    for p in extra:
        if p.suffix == ".md":
            print("\n" + p.read_text(encoding="utf-8").rstrip())
    if args.figures:
        from gear_repro.reporting.figures import draw_all

        for p in draw_all(runs, out, opts):
            if p.suffix == ".md":  # the runs a figure had to leave out
                print("\n" + p.read_text(encoding="utf-8").rstrip(), file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
