"""The paper's figures from finished runs (PNG + PDF, matplotlib Agg).

- Figure 2 / 5 (``fig2_r15_by_round_<dataset>``): R@15 after each round (``metrics['recall@15_by_round']``,
  questions that stopped earlier carried forward) per multi-step run; a horizontal line per single-step run
  whose expansion's report hooks set ``figure2_reference`` (its R@15); the paper's labelled points
  (paper_results.csv, Figure 2) as grey markers.
  More than 4 rounds -> named ``fig5_...`` as in the paper's appendix.
- Figure 3 (``fig3_r15_by_type_<dataset>``): per-question R@15 by MuSiQue hop type, box plots per method
  with the mean as a dot (from predictions.jsonl; bars of ``metrics['by_type']`` means if predictions are gone).
- Figure 4 (``fig4_tokens_by_round_<dataset>``): cumulative input and output LLM tokens per question after
  each round, per method, from the ``llm_calls`` records (``round``, tokens) of predictions.jsonl; QA and
  extraction calls excluded. Single-step methods (round 0) appear as one point at n = 1.

Every title states N (the questions of each plotted run). A run with fewer than :data:`SMALL_N` questions is kept off a
figure that has a run with more (named in ``figures.md``), so a 1-question run never shares axes with 100-question
ones; when every run is that small the figure is drawn with "examples only" in its title.

Recall points carry 95% bootstrap intervals over questions as error bars (gear_repro/reporting/evidence.py;
none when predictions.jsonl is gone); the horizontal single-step lines of Figure 2 carry a shaded band.

``draw_all(runs, out_dir)`` draws every figure the runs support and returns the written paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gear_repro.evaluation.aggregate import calls_at_k, question_recalls, run_k  # noqa: E402
from gear_repro.reporting.analyses import scored  # noqa: E402
from gear_repro.reporting.evidence import DEFAULT_OPTIONS, EvidenceOptions, interval, values_interval  # noqa: E402
from gear_repro.reporting.paper import DEFAULT_PAPER, paper_results  # noqa: E402
from gear_repro.reporting.runs import RunResult, load_predictions  # noqa: E402
from gear_repro.reporting.setting import placement  # noqa: E402

HOP_ORDER = ["2hop", "3hop1", "3hop2", "4hop1", "4hop2", "4hop3"]
HOP_LABELS = {"2hop": "2 Hop", "3hop1": "3 Hop Type 1", "3hop2": "3 Hop Type 2", "4hop1": "4 Hop Type 1",
              "4hop2": "4 Hop Type 2", "4hop3": "4 Hop Type 3"}


def _label(run: RunResult) -> str:
    setting = run.report.get("setting")
    return f"{run.label} ({setting})" if setting else run.label


def retrieval_stages() -> frozenset[str]:
    """The LLM stages Fig. 4 counts as retrieval tokens: each method's ``figure4_stages`` (its report hooks)."""
    from gear_repro.methods import report_hooks

    return frozenset(s for h in report_hooks() for s in h.figure4_stages)


def _is_figure2_reference(run: RunResult) -> bool:
    """A single-step run with the expansion Fig. 2 draws as its reference line (the expansion whose hooks set
    ``figure2_reference``; recorded in run.json by the runner, :attr:`RunResult.figure2_reference`)."""
    return run.figure2_reference


def _save(fig, out: Path, stem: str) -> list[Path]:
    paths = [out / f"{stem}.png", out / f"{stem}.pdf"]
    fig.savefig(paths[0], dpi=150, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def _by_dataset(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    out: dict[str, list[RunResult]] = defaultdict(list)
    for r in runs:
        out[r.dataset].append(r)
    return out


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in s).strip("_").lower()


SMALL_N = 20  # fewer questions than this: an example, not a result (kept off shared axes; the explorer greys it)


def _n(run: RunResult) -> int:
    return int(run.metrics.get("n_scored", run.metrics.get("n_questions", 0)) or 0)


def _n_label(runs: Sequence[RunResult]) -> str:
    """"N=100" (every plotted run's question count), "N=100/50" when they differ, with an "examples only" warning
    when every run has fewer than SMALL_N questions."""
    ns = sorted({_n(r) for r in runs})
    label = "N=" + "/".join(map(str, ns))
    return label + f": examples only, < {SMALL_N} questions" if ns and max(ns) < SMALL_N else label


def large_enough(group: Sequence[RunResult], figure: str, dataset: str,
                 left_out: list[str] | None = None) -> list[RunResult]:
    """The runs of one figure: those with at least SMALL_N questions when there is one (the others are named in
    ``left_out``), else all of them (the title then says "examples only")."""
    if all(_n(r) < SMALL_N for r in group):
        return list(group)
    keep = [r for r in group if _n(r) >= SMALL_N]
    if left_out is not None:
        left_out += [f"{figure} ({dataset}): {_label(r)} ({r.path.name}) is left out: {_n(r)} question{'s' * (_n(r) != 1)} (fewer than "
                     f"{SMALL_N}; the other runs have {min(_n(x) for x in keep)} or more)"
                     for r in group if _n(r) < SMALL_N]
    return keep


# -- Figure 2 / 5 -----------------------------------------------------------------------------------------
def _yerr(cis: Sequence, ys: Sequence[float]) -> list[list[float]] | None:
    """matplotlib asymmetric error bars from intervals (None if any is missing)."""
    if not cis or any(c is None for c in cis):
        return None
    return [[y - c.low for c, y in zip(cis, ys, strict=True)], [c.high - y for c, y in zip(cis, ys, strict=True)]]


def spread(values: Sequence[float], gap: float) -> list[float]:
    """Label heights for ``values``: each at least ``gap`` from the next in sorted order, in the same order as
    ``values``, the group's mean unchanged (round-1 labels of many runs no longer overprint each other)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ys = [values[i] for i in order]
    for j in range(1, len(ys)):
        ys[j] = max(ys[j], ys[j - 1] + gap)
    shift = (sum(values) - sum(ys)) / len(ys) if ys else 0.0
    out = [0.0] * len(values)
    for j, i in enumerate(order):
        out[i] = ys[j] + shift
    return out


LEGEND_INSIDE_CHARS = 28  # a longer label (a row tag) put inside would cover data


def legend_inside(labels: Sequence[str]) -> bool:
    """Whether a legend of ``labels`` goes inside the axes: up to four entries of at most LEGEND_INSIDE_CHARS."""
    return len(labels) <= 4 and all(len(t) <= LEGEND_INSIDE_CHARS for t in labels)


def _legend(ax, loc: str) -> None:
    """Inside the axes for a few short entries; below them, in one or two columns, otherwise (it covered the boxes
    and lines)."""
    labels = ax.get_legend_handles_labels()[1]
    if legend_inside(labels):
        ax.legend(fontsize=8, loc=loc)
    else:
        wide = any(len(t) > 2 * LEGEND_INSIDE_CHARS for t in labels)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1 if wide else 2, frameon=False)


def _rounds(run: RunResult) -> int:
    """Rounds of a multi-step run's per-round recall (``recall@<largest k>_by_round``; 0 for a single-step run)."""
    return max((len(v) for key, v in run.metrics.items() if key.endswith("_by_round") and isinstance(v, list)),
               default=0)


def draw_rounds(runs: Sequence[RunResult], out: Path, k: int = 15, opts: EvidenceOptions = DEFAULT_OPTIONS,
                left_out: list[str] | None = None) -> list[Path]:
    """Figure 2 / 5. A multi-step run whose ``run.ks`` lacks ``k`` is left out and named in ``left_out``; one
    whose largest k is another (its metrics hold ``recall@20_by_round``) is drawn from its predictions."""
    paths: list[Path] = []
    key = f"recall@{k}_by_round"
    for dataset, group in _by_dataset(runs).items():
        group = large_enough(group, "Figure 2", dataset, left_out)
        multi = []
        for r in group:
            if not _rounds(r):
                continue
            why = (f"R@{k} is not among its run.ks {sorted(r.ks)}" if not r.evaluates(k) else
                   None if r.metrics.get(key) or load_predictions(r) else
                   f"its largest k is not {k} and its predictions.jsonl is gone")
            if why:
                if left_out is not None:
                    left_out.append(f"Figure 2 ({dataset}): {_label(r)} ({r.path.name}) is left out: {why}")
                continue
            multi.append(r)
        if not multi:
            continue
        n_max = max(_rounds(r) for r in multi)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs = list(range(1, n_max + 1))
        firsts: list[tuple[float, str]] = []  # each run's round-1 value and line colour
        for r in multi:
            cis = [interval(r, f"recall@{k}@round{n}", opts) for n in xs]
            if all(c is not None for c in cis):
                ys = [c.mean for c in cis]
            else:  # predictions gone: the run's own per-round means (carried forward)
                ys = list(r.metrics[key])
                ys += [ys[-1]] * (n_max - len(ys))
            line = ax.errorbar(xs, ys, yerr=_yerr(cis, ys), marker="o", capsize=3, label=_label(r))
            firsts.append((ys[0], line.lines[0].get_color()))
        lo, hi = ax.get_ylim()
        for (y, color), y_label in zip(firsts, spread([y for y, _ in firsts], 0.045 * (hi - lo)), strict=True):
            ax.annotate(f"{y:.1f}", (1, y_label), textcoords="offset points", xytext=(-9, 0), ha="right",
                        va="center", fontsize=8, color=color)
        ax.set_xlim(1 - 0.12 * n_max, n_max + 0.15)  # room for the round-1 labels left of the first round
        for r in group:
            if _is_figure2_reference(r) and f"recall@{k}" in r.metrics:
                ci = interval(r, f"R@{k}", opts)
                y = ci.mean if ci else float(r.metrics[f"recall@{k}"])
                # named in the legend, its value at the line's end: the label with the run's tag ran past the frame
                ax.axhline(y, linestyle="--", color="tab:gray", linewidth=1, label=f"{_label(r)} (single-step)")
                if ci:
                    ax.axhspan(ci.low, ci.high, color="tab:gray", alpha=0.12, linewidth=0)
                ax.annotate(f"{y:.1f}", (n_max, y), textcoords="offset points", xytext=(-4, 4),
                            ha="right", fontsize=8, color="tab:gray")
        df = paper_results()
        pts = df[(df.paper == DEFAULT_PAPER) & (df.table == "Figure 2") & (df.dataset == dataset)]
        # like for like (reporting/setting.py): the paper's points on another setting than the runs' are named so
        on_setting = all(placement(r.run_info.get("setting"), DEFAULT_PAPER, "Figure 2", dataset).beside for r in group)
        paper_word = "paper" if on_setting else "paper (other setting)"
        for _, p in pts.iterrows():
            if p["metric"] == f"R@{k} n=1":
                ax.scatter([1], [p["value"]], marker="x", color="black", zorder=5)
                ax.annotate(f"{paper_word} {p['method']} {p['value']:.1f}", (1, p["value"]), textcoords="offset points",
                            xytext=(6, 2), fontsize=7, color="black")
            elif p["metric"] == f"R@{k}":
                ax.axhline(p["value"], linestyle=":", color="black", linewidth=0.8)
                ax.annotate(f"{paper_word} {p['method']} {p['value']:.1f}", (n_max, p["value"]),
                            textcoords="offset points", xytext=(-4, -10), ha="right", fontsize=7)
        ax.set_xticks(xs)
        ax.set_xlabel("Number of Iterations (n)")
        ax.set_ylabel(f"R@{k}")
        drawn = multi + [r for r in group if _is_figure2_reference(r) and f"recall@{k}" in r.metrics]
        ax.set_title(f"R@{k} per round on {dataset}\n({_n_label(drawn)}; carried forward; 95% CI)", fontsize=10)
        ax.grid(alpha=0.3)
        _legend(ax, "lower right")
        fig_no = "fig5" if n_max > 4 else "fig2"
        paths += _save(fig, out, f"{fig_no}_r{k}_by_round_{_slug(dataset)}")
    return paths


# -- Figure 3 -------------------------------------------------------------------------------------------------
def draw_hop_types(runs: Sequence[RunResult], out: Path, k: int = 15, opts: EvidenceOptions = DEFAULT_OPTIONS,
                   left_out: list[str] | None = None) -> list[Path]:
    """Figure 3; a run whose ``run.ks`` lacks ``k`` (its rankings hold fewer passages) is named in ``left_out``."""
    paths: list[Path] = []
    for dataset, group in _by_dataset(runs).items():
        group = large_enough(group, "Figure 3", dataset, left_out)
        data: dict[str, dict[str, list[float]]] = {}
        plotted: list[RunResult] = []
        for r in group:
            if not r.evaluates(k):
                if left_out is not None:
                    left_out.append(f"Figure 3 ({dataset}): {_label(r)} ({r.path.name}) is left out: R@{k} is not "
                                    f"among its run.ks {sorted(r.ks)}")
                continue
            # in question-id order: the boxes' intervals resample by id, whatever order the file lists them in
            preds = sorted(scored(load_predictions(r)), key=lambda p: str(p["id"]))
            vals: dict[str, list[float]] = defaultdict(list)
            if preds:
                for p in preds:
                    vals[p.get("type") or "all"].append(question_recalls(p, [k])[f"recall@{k}"])
            else:
                for t, m in (r.metrics.get("by_type") or {}).items():
                    if f"recall@{k}" in m:
                        vals[t] = [m[f"recall@{k}"]]
            if len(vals) > 1:
                data[_label(r)] = dict(vals)
                plotted.append(r)
        if not data:
            continue
        types = sorted({t for v in data.values() for t in v},
                       key=lambda t: (HOP_ORDER.index(t) if t in HOP_ORDER else 99, t))
        # 0.35 in per box, at least 7 in, at most 14 in wide (it was 1.3 in per box and type: 21 in for 8 methods)
        fig, ax = plt.subplots(figsize=(min(14.0, max(7.0, 0.35 * len(types) * len(data) + 2)), 4.5))
        width = 0.8 / len(data)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, (label, vals) in enumerate(data.items()):
            pos = [j + (i - (len(data) - 1) / 2) * width for j in range(len(types))]
            series = [vals.get(t, []) for t in types]
            present = [(p, s) for p, s in zip(pos, series, strict=True) if s]
            if not present:
                continue
            bp = ax.boxplot([s for _, s in present], positions=[p for p, _ in present], widths=width * 0.85,
                            patch_artist=True, showfliers=False, medianprops={"color": "black"})
            for box in bp["boxes"]:
                box.set_facecolor(colors[i % len(colors)])
                box.set_alpha(0.5)
            means = [sum(s) / len(s) for _, s in present]
            cis = [values_interval(s, opts) if len(s) > 1 else None for _, s in present]
            ax.errorbar([p for p, _ in present], means, yerr=_yerr(cis, means), fmt="o", color="dimgray",
                        zorder=5, markersize=4, capsize=2)
            ax.plot([], [], color=colors[i % len(colors)], linewidth=8, alpha=0.5, label=label)
        ax.scatter([], [], color="dimgray", s=14, label="Mean (95% CI)")
        ax.set_xticks(range(len(types)))
        ns = {t: max(len(v.get(t, [])) for v in data.values()) for t in types}
        ax.set_xticklabels([f"{HOP_LABELS.get(t, t)}\n(n={ns[t]})" for t in types], fontsize=9)
        ax.set_ylim(-5, 105)  # percent, as every table
        ax.set_ylabel(f"R@{k} (%)")
        ax.set_title(f"R@{k} by hop type on {dataset} ({_n_label(plotted)}; n per type under each group)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=min(4, len(data) + 1), frameon=False)
        paths += _save(fig, out, f"fig3_r{k}_by_type_{_slug(dataset)}")
    return paths


# -- Figure 4 -------------------------------------------------------------------------------------------------
def cumulative_tokens(preds: Sequence[dict], n_max: int) -> tuple[list[float], list[float]]:
    """Mean cumulative (input, output) retrieval-stage tokens per question after rounds 1..n_max, for one run
    at the largest k (a matched-k run's passes are tagged with their k and not summed)."""
    inp, outp = [0.0] * n_max, [0.0] * n_max
    if not preds:
        return inp, outp
    k = run_k(preds)
    stages = retrieval_stages()
    for p in preds:
        for c in calls_at_k(p.get("llm_calls", []) or [], k):
            if c.get("stage") not in stages:
                continue
            r = max(1, int(c.get("round") or 0))
            for i in range(r - 1, n_max):
                inp[i] += int(c.get("prompt_tokens") or 0)
                outp[i] += int(c.get("completion_tokens") or 0)
    n = len(preds)
    return [x / n for x in inp], [x / n for x in outp]


def draw_tokens(runs: Sequence[RunResult], out: Path, left_out: list[str] | None = None) -> list[Path]:
    paths: list[Path] = []
    for dataset, group in _by_dataset(runs).items():
        group = large_enough(group, "Figure 4", dataset, left_out)
        series = []
        for r in group:
            preds = RunResult.split_errored(load_predictions(r))[0]  # an errored question's calls are no cost
            if not any(c.get("stage") in retrieval_stages() for p in preds for c in p.get("llm_calls", []) or []):
                continue
            multi = any(p.get("rounds") for p in preds)
            n_max = max((len(p.get("rounds", [])) for p in preds), default=1) or 1
            n_max = max(n_max, int(r.config.get("agent", {}).get("max_rounds") or 0),
                        int(r.config.get("dataset", {}).get("max_rounds") or 0) if multi else 1)
            series.append((r, multi, *cumulative_tokens(preds, n_max)))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        n_all = 1
        for i, (r, multi, inp, outp) in enumerate(series):
            col = colors[i % len(colors)]
            xs = list(range(1, len(inp) + 1))
            n_all = max(n_all, len(xs))
            if multi:
                ax.plot(xs, inp, marker="o", color=col, label=f"{_label(r)} Input")
                ax.plot(xs, outp, marker="s", linestyle="--", color=col, label=f"{_label(r)} Output")
            else:
                ax.scatter([0.85], [inp[0]], marker="o", color=col, label=f"{_label(r)} Input")
                ax.scatter([0.85], [outp[0]], marker="s", color=col, facecolors="none", label=f"{_label(r)} Output")
        ax.set_xticks(list(range(1, n_all + 1)))
        ax.set_xlabel("Number of Iterations (n)")
        ax.set_ylabel("Cumulative tokens per question")
        ax.set_title(f"LLM tokens per round on {dataset}\n({_n_label([s[0] for s in series])}; QA excluded)", fontsize=10)
        ax.grid(alpha=0.3)
        _legend(ax, "best")
        paths += _save(fig, out, f"fig4_tokens_by_round_{_slug(dataset)}")
    return paths


FIGURE_NOTES = "figures.md"


def draw_all(runs: Sequence[RunResult], out_dir: str | Path, opts: EvidenceOptions = DEFAULT_OPTIONS) -> list[Path]:
    """Every figure the runs support (Figures 2/5, 3, 4), as PNG and PDF under ``out_dir``; the runs a figure had to
    leave out (R@15 not evaluated) are named in ``figures.md``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = [r for r in runs if not r.is_qa_bound]  # QA bounds have no retrieval of their own
    left_out: list[str] = []
    paths = [*draw_rounds(runs, out, opts=opts, left_out=left_out),
             *draw_hop_types(runs, out, opts=opts, left_out=left_out), *draw_tokens(runs, out, left_out=left_out)]
    if left_out:
        note = out / FIGURE_NOTES
        note.write_text("# Runs left out of the figures\n\n" + "".join(f"- {x}\n" for x in left_out), encoding="utf-8")
        paths.append(note)
    return paths
