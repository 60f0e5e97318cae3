"""A sweep's price before it runs (``gear-repro-plan``; docs/sweeps.md, "A sweep's price before it runs"): each run
of a preset's sweep, as Hydra's BasicSweeper expands it, with its questions, LLM calls and tokens (the runner's own
estimate, :func:`gear_repro.pipeline.estimate.question_estimate`), dollars at list price, question and encode hours
(measured rates: ``resources/plan_rates.yaml``) and its disk and memory (:mod:`gear_repro.pipeline.capacity`).

Nothing is encoded, indexed or sent. The corpus is the prepared data under ``dataset.path`` when it is there, else
the paper's sizes (``paper_sizes``); the prompts' tokens are then counted on a bundled sample of the same dataset and
scaled to the question count, and the sizes of characters and of a component's own matrices likewise. Encodes that
several runs share (same corpus, triples file, embedder and collection) are counted once, in the first run."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue

from gear_repro.config import register_resolvers
from gear_repro.data.dataset import Dataset, load_dataset
from gear_repro.llm.estimate import EstimateSettings
from gear_repro.pipeline import capacity
from gear_repro.pipeline.estimate import planned_calls, question_estimate
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.wiring import vectors_read
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.paths import REPO_DIR, config_dir

RATES_YAML = Path(__file__).resolve().parent.parent / "resources" / "plan_rates.yaml"
SAMPLE_QUESTIONS = 20  # stand-in questions whose prompts are counted when the run's data is absent
STAND_IN = REPO_DIR / "data" / "musique_sample"  # the bundled sample: the stand-in when a dataset has none of its own
MACHINES = ("cpu", "gpu")
GIB = capacity.GIB


@dataclass
class Encode:
    """One collection a run embeds: ``hours`` per machine (None: no measured rate); ``shared`` when an earlier run
    of the sweep encodes the same one (its cost counted there)."""

    collection: str
    rows: int
    hours: dict[str, float | None]
    shared: bool = False


@dataclass
class RunPlan:
    """One run of a sweep: what it asks (``overrides``), on what data, and its figures; None = not estimated
    (``notes`` say why)."""

    overrides: list[str]
    dataset: str
    data: str
    questions: int
    calls: int | None
    prompt_tokens: int | None
    completion_tokens: int | None
    usd: float | None
    price: str
    tokens_source: str
    question_hours: dict[str, float | None]
    question_source: str
    encodes: list[Encode]
    disk: int | None
    memory: int | None
    new_disk: int = 0
    notes: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)  # settings that need less memory, as the start-up check names them


@dataclass
class SweepPlan:
    """The runs of a sweep and their totals (encodes shared across runs counted once)."""

    name: str
    runs: list[RunPlan]

    def totals(self) -> dict[str, Any]:
        """Sums over the runs (None where a run has no figure), the encodes counted once, disk as the new encodes'
        sum and memory as the largest run's (runs go one after another)."""
        def total(get: Callable[[RunPlan], float | None]) -> float | None:
            values = [get(r) for r in self.runs]
            return None if any(v is None for v in values) else sum(values)

        encodes = [e for r in self.runs for e in r.encodes if not e.shared]
        memories = [r.memory for r in self.runs if r.memory is not None]
        return {"runs": len(self.runs), "questions": sum(r.questions for r in self.runs),
                "calls": total(lambda r: r.calls), "prompt_tokens": total(lambda r: r.prompt_tokens),
                "completion_tokens": total(lambda r: r.completion_tokens), "usd": total(lambda r: r.usd),
                "question_hours": {m: total(lambda r, m=m: r.question_hours[m]) for m in MACHINES},
                "encode_hours": {m: None if any(e.hours[m] is None for e in encodes)
                                 else sum(e.hours[m] for e in encodes) for m in MACHINES},
                "encodes": len(encodes), "disk": sum(r.new_disk for r in self.runs),
                "memory": max(memories) if memories else None}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "runs": [asdict(r) for r in self.runs], "totals": self.totals()}


@cache
def rates() -> dict[str, Any]:
    """``resources/plan_rates.yaml``: the paper's sizes, measured encode rates and per-question seconds."""
    return yaml.safe_load(RATES_YAML.read_text(encoding="utf-8"))


def preset_params(preset: str) -> list[str]:
    """The sweep of ``configs/experiment/<preset>.yaml`` (``hydra.sweeper.params``) as ``key=a,b`` overrides."""
    doc = yaml.safe_load((config_dir() / "experiment" / f"{preset}.yaml").read_text(encoding="utf-8")) or {}
    params = ((doc.get("hydra") or {}).get("sweeper") or {}).get("params") or {}
    return [f"{k}={v}" for k, v in params.items()]


def expand(overrides: Sequence[str]) -> list[list[str]]:
    """The runs of ``gear-repro -m OVERRIDES``: the preset's sweep params, then the command line's (a key given on
    the command line replaces the preset's, keeping its place), their comma lists a cartesian product in order, as
    Hydra's BasicSweeper expands them."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    presets = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] in ("experiment", "+experiment")]
    params = [p for preset in presets for p in preset_params(preset)] + list(overrides)
    axes: dict[str, list[str]] = {}
    for o in OverridesParser.create().parse_overrides(params):
        key = o.get_key_element()
        if o.is_sweep_override() and not o.is_discrete_sweep():
            raise ConfigError(f"{key}: an interval sweep needs a sweeper that samples it; the plan expands only "
                              "comma lists, choice() and range()")
        values = o.sweep_string_iterator() if o.is_sweep_override() else [o.get_value_element_as_str()]
        axes[key] = [f"{key}={v}" for v in values]
    return [list(run) for run in itertools.product(*axes.values())]


def estimate_llm(cfg: DictConfig) -> SimpleNamespace:
    """What the estimate reads of an LLM client (model, concurrency, ``llm.estimate_*``), without building one."""
    node = cfg.llm
    return SimpleNamespace(model=str(node.model), concurrency=int(node.concurrency),
                           estimate=EstimateSettings(float(node.estimate_latency_s), int(node.estimate_output_tokens),
                                                     float(node.estimate_warn_usd), float(node.estimate_warn_s)))


@cache
def _prepared(path: str, limit: int | None, subset: str, seed: int, triples_file: str | None) -> Dataset:
    return load_dataset(path, limit=limit, subset=subset, subset_seed=seed, triples_file=triples_file)


def _stand_in(cfg: DictConfig) -> Path:
    """The bundled sample of the run's dataset (``configs/dataset/<name>_sample.yaml``) where it is prepared, else
    the bundled MuSiQue sample."""
    group = config_dir() / "dataset" / f"{cfg.dataset.name}_sample.yaml"
    if group.is_file():
        register_resolvers()
        path = Path(str(OmegaConf.load(group).get("path", "")))  # ${repo:} resolved as in a composed config
        if (path / "questions.jsonl").is_file():
            return path
    return STAND_IN


def _short(path: Path) -> str:
    """``path`` from the repository's root where it is inside it."""
    return str(path.relative_to(REPO_DIR)) if path.is_relative_to(REPO_DIR) else str(path)


def _scaled(collection: tuple[int, int], rows: int) -> tuple[int, int]:
    """A sample's (rows, characters) at ``rows`` rows: its characters a row kept."""
    have, chars = collection
    return rows, round(chars * rows / have) if have else 0


def plan_run(cfg: DictConfig, overrides: list[str], seen: set[tuple]) -> RunPlan:
    """The plan of one run of ``cfg``; ``seen`` holds the encodes of the sweep's earlier runs (updated)."""
    ds_node = cfg.dataset
    path = Path(str(ds_node.path))
    opened = capacity.opened_collections(cfg)
    notes: list[str] = []
    try:
        triples_file = ds_node.get("triples_file")
    except (MissingMandatoryValue, InterpolationToMissingValueError):  # a value the command line must give
        triples_file = None  # (table7's K.1 triples): the plan is still of the corpus's size
        notes.append("dataset.triples_file names a value the command must give (???): the paper's triple count "
                     "stands in")
    if (path / "questions.jsonl").is_file() and (path / "corpus.jsonl").is_file():
        data = _prepared(str(path), ds_node.get("limit"), str(ds_node.subset), int(ds_node.subset_seed), triples_file)
        n_q, sample, questions, scale = len(data.questions), data, data.questions, 1.0
        data_source = f"prepared data {_short(path)}"
        collections = capacity.dataset_collections(data, opened)
        own = capacity.own_collections(cfg, data.triples)
        triples = None if "triples" in opened else capacity.triple_sizes(data)
    else:
        data = None
        sizes = rates()["paper_sizes"].get(str(ds_node.paper_name))
        if sizes is None:
            raise ConfigError(f"dataset.path={path} is absent and resources/plan_rates.yaml has no paper sizes for "
                              f"dataset.paper_name={ds_node.paper_name}")
        stand_in = _stand_in(cfg)
        sample = _prepared(str(stand_in), None, "first", 0, "triples.jsonl")
        tri_sample = sample if sample.triples else _prepared(str(STAND_IN), None, "first", 0, "triples.jsonl")
        limit = ds_node.get("limit")
        n_q = min(int(limit), sizes["questions"]) if limit else sizes["questions"]
        questions = sample.questions[:SAMPLE_QUESTIONS]
        scale = n_q / len(questions)
        data_source = f"paper sizes ({_short(path)} absent)"
        per_triple = len(tri_sample.triples)
        sample_triples = capacity.triple_sizes(tri_sample)
        triples = _scaled(sample_triples, sizes["triples"]) if sample_triples else None
        collections = {"passages": _scaled(capacity.dataset_collections(sample, {"passages"})["passages"],
                                           sizes["passages"])} if "passages" in opened else {}
        if "triples" in opened:
            collections["triples"] = triples
            triples = None  # counted with the collection
        own = {}
        for name, m in capacity.own_collections(cfg, tri_sample.triples).items():
            rows, chars = _scaled((m.rows, m.chars), round(m.rows * sizes["triples"] / per_triple))
            own[name] = m._replace(rows=rows, chars=chars)
        if own:
            notes.append(f"own matrices (GRIEVER's names and units, HippoRAG's phrases) scaled from {tri_sample.name}'s triples")

    llm = estimate_llm(cfg)
    est = question_estimate(cfg, questions, sample.passages, llm)
    if planned_calls(cfg) is None:
        calls = pt = ct = usd = None
        tokens_source, price = "no LLM-call plan for this agent", "-"
        notes.append("the agent declares no LLM-call plan: its calls are not estimated")
    elif est is None:
        calls = pt = ct = 0
        usd, tokens_source, price = 0.0, "no LLM calls", "-"
    else:
        calls, pt, ct = round(est.calls * scale), round(est.prompt_tokens * scale), round(est.completion_tokens * scale)
        usd = None if est.usd is None else est.usd * scale
        price = (f"{est.price_model} list price of {est.price_date}" if est.usd is not None
                 else f"no list price for {est.model}")
        tokens_source = (f"the run's {n_q} questions" if sample is data else
                         f"{len(questions)} questions of {sample.name} scaled to {n_q}") + f" ({est.tokens_source})"

    measured = (rates().get("question_s") or {}).get(str(cfg.get("name", "")))
    llm_s = est.wall_s * scale if est is not None else 0.0
    q_cpu = None if calls is None else (llm_s + (measured["seconds"] * n_q if measured else 0.0)) / 3600
    q_source = (f"LLM calls x llm.estimate_latency_s={llm.estimate.latency_s:g} s / questions in flight" +
                (f" + {measured['seconds']:g} s a question ({measured['source']})" if measured
                 else "; retrieval time not measured for this run"))

    encodes, new_collections, new_own = [], {}, {}
    if Resources(cfg).needs_vectors:
        model = Path(str(cfg.embedder.model)).name.lower()
        measured_rates = (rates().get("encode_rates") or {}).get(model) or {}
        read = vectors_read(cfg)  # an opened collection that is never read by its vectors is never encoded
        for name, c in [*((n, c) for n, c in collections.items() if n in read),
                        *((n, m) for n, m in own.items() if m.embedded)]:
            rows = c[0]
            key = (str(path), triples_file if name != "passages" else None, model, name, rows)
            kind = "passages" if name == "passages" else "triples"
            hours = {m: rows / measured_rates[m][kind] / 3600 if m in measured_rates else None for m in MACHINES}
            encodes.append(Encode(name, rows, hours, shared=key in seen))
            if key not in seen:
                (new_collections if name in collections else new_own)[name] = c
            seen.add(key)
        if not measured_rates:
            notes.append(f"no measured encode rate for {model}")
        elif "gpu" not in measured_rates:
            notes.append(f"no GPU encode rate measured for {model}")
    disk = memory = None
    new_disk = 0
    hints: list[str] = []
    if encodes and OmegaConf.select(cfg, "backend.dense_dtype") is not None:
        est_cap = capacity.config_estimate(cfg, collections, own, None, triples)  # None: nothing cached yet
        disk, memory, hints = est_cap.disk, est_cap.memory, est_cap.hints
        new_disk = capacity.config_estimate(cfg, new_collections, new_own, None).disk
    elif encodes:
        notes.append("vectors kept by the backend's server: no local disk or memory estimate")
    return RunPlan(overrides=overrides, dataset=str(ds_node.name), data=data_source, questions=n_q, calls=calls,
                   prompt_tokens=pt, completion_tokens=ct, usd=usd, price=price, tokens_source=tokens_source,
                   question_hours={"cpu": q_cpu, "gpu": None}, question_source=q_source, encodes=encodes, disk=disk,
                   memory=memory, new_disk=new_disk, notes=notes, hints=hints)


def plan_sweep(name: str, overrides: Sequence[str], compose: Callable[..., DictConfig]) -> SweepPlan:
    """The plan of ``gear-repro -m OVERRIDES`` (:func:`expand`), each run's config from ``compose(*overrides)``."""
    runs = expand(overrides)
    varying = {o.split("=", 1)[0] for run in runs for o in run if sum(o in r for r in runs) < len(runs)}
    seen: set[tuple] = set()
    out = []
    for run in runs:
        label = [o for o in run if o.split("=", 1)[0] in varying]
        out.append(plan_run(compose(*run), label, seen))
    return SweepPlan(name, out)



def _num(v: float | None, fmt: str = ",") -> str:
    return "-" if v is None else format(v, fmt)


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.1f}"


def _hours(h: float | None) -> str:
    return "not measured" if h is None else f"{h:.2f}"


def markdown(plan: SweepPlan) -> str:
    """The plan as a markdown table: one row per run, then the totals and what the figures rest on."""
    head = ("| run | data | questions | LLM calls | input tokens | output tokens | $ | question h (CPU) | "
            "encode h CPU / GPU | disk GiB | memory GiB |")
    lines = [f"### {plan.name}", "", head, "|" + "---|" * 11]
    for r in plan.runs:
        new = [e for e in r.encodes if not e.shared]
        enc = ("-" if not r.encodes else "shared" if not new else
               f"{_hours(sum(e.hours['cpu'] for e in new) if all(e.hours['cpu'] is not None for e in new) else None)}"
               f" / {_hours(sum(e.hours['gpu'] for e in new) if all(e.hours['gpu'] is not None for e in new) else None)}")
        usd = "no list price" if r.usd is None and r.calls else _num(r.usd, ",.2f")
        lines.append(f"| {' '.join(r.overrides) or '(one run)'} | {r.dataset}: {r.data} | {r.questions:,} | "
                     f"{_num(r.calls)} | {_num(r.prompt_tokens)} | {_num(r.completion_tokens)} | {usd} | "
                     f"{_hours(r.question_hours['cpu'])} | {enc} | "
                     f"{_gib(r.disk)} | {_gib(r.memory)} |")
    t = plan.totals()
    usd = "no list price" if t["usd"] is None else f"{t['usd']:,.2f}"
    lines.append(f"| **total: {t['runs']} runs** | {t['encodes']} collections to encode | {t['questions']:,} | {_num(t['calls'])} | "
                 f"{_num(t['prompt_tokens'])} | {_num(t['completion_tokens'])} | {usd} | "
                 f"{_hours(t['question_hours']['cpu'])} | {_hours(t['encode_hours']['cpu'])} / "
                 f"{_hours(t['encode_hours']['gpu'])} | {t['disk'] / GIB:.1f} (new) | "
                 f"{_gib(t['memory'])} (peak) |")
    notes = sorted({f"tokens: {r.tokens_source}" for r in plan.runs} | {f"price: {r.price}" for r in plan.runs if r.price != "-"}
                   | {f"question time: {r.question_source}; on a GPU not measured" for r in plan.runs}
                   | {n for r in plan.runs for n in r.notes}
                   | {f"less memory ({' '.join(r.overrides) or 'the run'}): {h}" for r in plan.runs for h in r.hints})
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def all_presets() -> list[str]:
    """The presets of ``configs/experiment/``, by name."""
    return sorted(p.stem for p in (config_dir() / "experiment").glob("*.yaml"))


def with_default(overrides: Sequence[str], key: str, value: str) -> list[str]:
    """``overrides`` with ``key=value`` added unless they set ``key``."""
    return list(overrides) if any(o.split("=", 1)[0].lstrip("+") == key for o in overrides) else \
        [*overrides, f"{key}={value}"]


__all__ = ["Encode", "RunPlan", "SweepPlan", "all_presets", "estimate_llm", "expand", "markdown", "plan_run",
           "plan_sweep", "with_default"]
