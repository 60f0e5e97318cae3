"""Find finished runs (single runs and multirun folders) and label them as the paper's tables do."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from gear_repro.embedding.runtimes import LOSSY_BACKENDS
from gear_repro.evaluation.aggregate import context_dropped
from gear_repro.evaluation.metrics import answer_metric_for
from gear_repro.methods.report_contract import RowParts, config_value, variant_notes, with_notes
from gear_repro.pipeline import run_folder as rf
from gear_repro.pipeline.run_folder import changes_no_result
from gear_repro.qa.reader import PAPER_QA_TOP_K, pass_for_qa
from gear_repro.reporting.paper import DEFAULT_PAPER
from gear_repro.utils.errors import DataError, GearError
from gear_repro.utils.io import read_json_object
from gear_repro.utils.settings import flat_settings, saved_config

log = logging.getLogger(__name__)

def read_config(path: Path) -> dict:
    """A run's resolved config (the runner's config.yaml) as a plain dict; a file that is not a YAML mapping (cut
    short, edited by hand, empty) is a DataError naming it (was a YAML traceback, or an empty one a row "?")."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except (yaml.YAMLError, OmegaConfBaseException, UnicodeDecodeError) as e:
        why = " ".join(str(e).split())
        raise DataError(f"{path}: not a readable config ({type(e).__name__}: {why[:200]}); re-run the run or move "
                        "the folder out of the report's run dirs") from None
    if not isinstance(config, dict) or not config:
        raise DataError(f"{path}: holds no config (an empty or cut-short file); re-run the run or move the folder out "
                        "of the report's run dirs")
    return saved_config(config)  # a renamed setting under its new name, as a newer run records it

RETRIEVER_LABELS = {"bm25": "BM25", "sbert": "SBERT", "hybrid": "Hybrid", "composed": "Composed"}  # shared retrievers


@dataclass
class RunResult:
    path: Path
    config: dict
    metrics: dict
    notes: list[str] = field(default_factory=list)  # problems found while loading (partial line, stale metrics)
    tag: str = ""  # what tells this run from others with its label and dataset (set by tag_runs)

    @staticmethod
    def split_errored(preds: Iterable[dict]) -> tuple[list[dict], list[dict]]:
        """``preds`` as (the questions that did not error, those that did): a record with ``error`` (a dead
        endpoint, a crash) is scored as a miss with no calls or tokens, so it is neither finished nor in a
        per-question mean of calls, tokens or cost."""
        done: list[dict] = []
        failed: list[dict] = []
        for p in preds:
            (failed if p.get("error") else done).append(p)
        return done, failed

    @property
    def label(self) -> str:
        """The row label of tables keyed by run: :attr:`method`, plus ``[tag]`` when several runs share it."""
        return f"{self.method} [{self.tag}]" if self.tag else self.method

    @cached_property
    def run_info(self) -> dict:
        """The run's run.json ({} without one)."""
        return rf.read_run_info(Path(self.path))

    def _info(self, key: str) -> dict:
        found = self.run_info.get(key)
        return dict(found) if isinstance(found, dict) else {}

    @property
    def data_warnings(self) -> dict[str, int]:
        """run.json ``data_warnings`` (gold ids missing from the corpus, a partial triples file, ...; {} if none)."""
        return self._info("data_warnings")

    @property
    def subset(self) -> dict:
        """run.json ``subset``: the questions the run's last (re)start asked for (kind, limit, size, ids; {} if
        unrecorded)."""
        return self._info("subset")

    @property
    def data(self) -> dict[str, str]:
        """The hashes of the corpus and question files the run read (run.json ``data_hashes``; {} if unrecorded)."""
        return {k: str(v) for k, v in self._info("data_hashes").items() if k in ("corpus", "questions")}

    @cached_property
    def built(self) -> frozenset[str] | None:
        """The components the run built, of those whose settings can be irrelevant to it (``llm``: llm_stats.json is
        written; ``embedder``: run.json describes one and a class of the run embeds, :attr:`needs_vectors`); None when
        its run.json is gone (assume all)."""
        path = Path(self.path)
        if not (path / rf.RUN_INFO).is_file():
            return None
        return frozenset([*(["llm"] if (path / rf.LLM_STATS).is_file() else []),
                          *(["embedder"] if "embedder" in self.run_info and self.needs_vectors else [])])

    def _flag(self, name: str) -> bool | None:
        """A flag run.json records of the run's classes (``report_flags``, written by the runner); None for a run
        written before it recorded them."""
        flags = self._info(rf.REPORT_FLAGS)
        return flags[name] if isinstance(flags.get(name), bool) else None

    @cached_property
    def k_dependent(self) -> bool:
        """Whether the run's method ran once per evaluated k (run.json ``report_flags.k_dependent``; older runs:
        ``method.k_dependent``, which single-step runs record, else the agent class's ``k_dependent``, False for the
        multi-step methods, whose rounds take their own base k): only then does ``run.matched_k=false`` change a
        number. Unknown counts as True."""
        recorded = self._flag("k_dependent")
        if recorded is None:
            recorded = self._info("method").get("k_dependent")
        if isinstance(recorded, bool):
            return recorded
        from hydra.utils import get_class

        target = (self.config.get("agent") or {}).get("_target_")
        try:
            return bool(getattr(get_class(str(target)), "k_dependent", True)) if target else True
        except Exception:  # a class moved or removed since the run
            return True

    @cached_property
    def needs_vectors(self) -> bool:
        """Whether a class of the run embeds (run.json ``report_flags.needs_vectors``; older runs: ``needs_vectors``
        of its configured components, as the runner asks of them): a BM25 run builds an embedder object that encodes
        nothing (run.json still describes it), so its ``embedder.*`` are no setting of it. A class that cannot be
        imported counts as embedding."""
        recorded = self._flag("needs_vectors")
        if recorded is not None:
            return recorded
        from hydra.utils import get_class

        for node in self.config.values():  # every component the run configures (retriever, expansion, agent, ...)
            target = node.get("_target_") if isinstance(node, dict) else None
            if not target:
                continue
            try:
                cls = get_class(str(target))
            except Exception:  # a class moved or removed since the run: assume it embeds
                return True
            if getattr(cls, "needs_vectors", False):  # the embedder, backend, LLM: no such attribute
                return True
        return False

    @cached_property
    def figure2_reference(self) -> bool:
        """Whether the run is the single-step run Fig. 2 draws as its reference line (run.json
        ``report_flags.figure2_reference``; older runs: the hooks of its configured agent and expansion)."""
        recorded = self._flag("figure2_reference")
        if recorded is not None:
            return recorded
        from gear_repro.methods import is_figure2_reference

        return is_figure2_reference(self.config)

    def uses(self, key: str) -> bool:
        """Whether the setting ``key`` could matter to the run (``llm.*`` only if it built an LLM, ``embedder.*`` only
        if it built an embedder): a row tag never names a setting the run did not use."""
        group = key.split(".", 1)[0]
        return self.built is None or group not in ("llm", "embedder") or group in self.built

    @property
    def ks(self) -> tuple[int, ...]:
        """The ranks the run evaluated (``run.ks``; the default 5/10/15 for a config that does not say)."""
        ks = (self.config.get("run") or {}).get("ks") or (5, 10, 15)
        return tuple(int(k) for k in ks)

    def evaluates(self, k: int) -> bool:
        """Whether R@k is one of the run's metrics: a run with ``run.ks=[5]`` keeps 5 passages per question, so an
        R@15 "computed" from them would be its R@5 under another name."""
        return int(k) in self.ks

    @property
    def dataset(self) -> str:
        return self.config.get("dataset", {}).get("paper_name") or self.config.get("dataset", {}).get("name", "?")

    @property
    def report(self) -> dict:
        return self.config.get("report") or {}

    @property
    def method(self) -> str:
        """Row label (:attr:`method_label`) naming the embedder and LLM the run used where they are not its paper
        table's (reporting/setting.py ``model_notes``): "SBERT (all-minilm-l6-v2)"."""
        return with_notes(self.method_label, self.model_notes)

    @cached_property
    def model_notes(self) -> tuple[str, ...]:
        """The run's embedder and LLM where they are not those of the paper table its recall goes beside."""
        from gear_repro.reporting.setting import model_notes

        paper, table, _ = self.paper_ref("R@5")
        return model_notes(self.run_info.get("setting"), paper, table, self.dataset)

    @cached_property
    def user_components(self) -> dict[str, str]:
        """The run's components whose class is not the built-in one its config name stands for ({group: class
        path}; methods.user_target): the row is then the user's, never a paper method's row."""
        from gear_repro.methods import COMPONENT_GROUPS, user_target

        return {g: t for g in COMPONENT_GROUPS if (t := user_target(g, self.config.get(g)))}

    @property
    def method_label(self) -> str:
        """Row label of what ran (:meth:`_method_label`): a run with a user's class is named by it, "title (user's
        retriever mypkg.retrievers.TitleRetriever)", never by the built-in's label (no paper row has that name,
        so no paper number stands beside it)."""
        if self.user_components:
            from gear_repro.methods import class_label

            return "; ".join(f"{class_label(t)} (user's {g} {t})" for g, t in self.user_components.items())
        return self._method_label

    def _report_method_ran(self) -> bool:
        """Whether ``report.method`` can name what ran: a method name (its first word, e.g. "GEAR") is the
        run's own agent's, not another method's label on, e.g., a BM25 run (``report.method=GEAR`` gave a "GEAR" row
        with BM25's numbers and GEAR's Δ)."""
        from gear_repro.methods import agent_hooks, report_hooks

        first = str(self.report["method"]).split(" ", 1)[0].strip().lower()
        own = agent_hooks(self.config.get("agent") or {})
        claims = [h for h in report_hooks() if first in h.names and h.label is not None]
        # a combined method runs another method's agent under a name "<first>_<second>": its first part counts
        return not claims or own in claims or (own is not None and any(n.split("_")[0] == first for n in own.names))

    @property
    def _method_label(self) -> str:
        """Row label without the models: report.method if set (a preset's row name; "<it> on <base + expansion>" when the run's retriever
        or expansion is not the one ``report.paper_config`` says the paper's row used; the paper settings it differs
        in beyond the preset's ``report.axes`` in brackets, "w/ diversity (fast scorer)"), else the method's own
        label (its report hooks' ``label``, found by the class of ``agent._target_``) from the base retriever's label
        and the expansion's."""
        if self.report.get("method") and not self._report_method_ran():
            self._note_once(f"{self.path}: report.method={self.report['method']} names another method than the one "
                            "that ran: the row is named by what ran, with no paper number of that method")
        elif self.report.get("method"):
            axes = tuple(self.report.get("axes") or ())
            parts = self._row_parts(skip=axes)
            off = {k: v for k, v in (self.report.get("paper_config") or {}).items()
                   if str(config_value(self.config, k)) != str(v)}
            label = self.report["method"] if not off else f"{self.report['method']} on {parts.base}" + (
                f" + {parts.expansion}" if parts.expansion else " (no expansion)")
            # one base k for every evaluated rank is not the paper's protocol (Table 4's cells are matched-k, as
            # Table 2's): named as the single-step label names it ("w/ diversity (base k = 15)"), so that
            # `experiment=table4_diversity run.matched_k=false` never sits as "w/ diversity" beside Table 4)
            fixed = ([f"base k = {parts.fixed_base_k}"] if parts.expansion and parts.fixed_base_k is not None
                     and "run.matched_k" not in axes else [])
            return with_notes(label, [*fixed, *parts.notes])
        parts = self._row_parts()
        if self.is_qa_bound:  # Table 3's bounds: the label names the bound, not the (unused) retriever
            return {"none": "No Passages", "gold": "Gold Passages"}.get(self.config["qa_reader"]["mode"], "QA bound")
        from gear_repro.methods import agent_hooks

        agent = self.config.get("agent") or {}
        hooks = agent_hooks(agent)
        if hooks is not None and hooks.label is not None:
            return hooks.label(self.config, parts)
        label = parts.base + (f" + {parts.expansion}" if parts.expansion else "")
        return f"{label} ({agent.get('name', '?')})"  # an agent class without report hooks

    def _note_once(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def _row_parts(self, skip: tuple[str, ...] = ()) -> RowParts:
        """The base retriever's and the expansion's labels and what differs from the paper's row (``RowParts``; not
        the settings keyed in ``skip``), the row label is made of."""
        from gear_repro.methods import agent_hooks, hooks_for

        rcfg = self.config.get("retriever", {})
        ret = rcfg.get("name", "?")
        paper_label = (self.report.get("labels") or {}).get(ret)
        ret_hooks = hooks_for(rcfg)
        own = ret_hooks.label(ret) if ret_hooks is not None and ret_hooks.label else RETRIEVER_LABELS.get(ret, ret)
        exp_hooks = hooks_for(self.config.get("expansion"))
        run_cfg = self.config.get("run") or {}
        # matched_k only matters to a method that ran once per evaluated k (run.json method.k_dependent: single-step
        # with an expansion); a multi-step method's rounds take its own base k whatever it says
        fixed = None if run_cfg.get("matched_k", True) or not self.k_dependent else int(run_cfg.get("fixed_k")
                                                                                        or max(self.ks))
        method_hooks = agent_hooks(self.config.get("agent") or {})
        retrieves = method_hooks is None or method_hooks.uses_retriever is None or method_hooks.uses_retriever(self.config)
        settings = [s for h in (ret_hooks if retrieves else None, exp_hooks, method_hooks) if h is not None
                    for s in h.paper_settings]
        notes = variant_notes(self.config, settings, self.report.get("paper_config"), skip)
        encoder = config_value(self.config, "embedder.backend")
        if encoder in LOSSY_BACKENDS and self.needs_vectors:  # not the model's vectors: never the paper's row
            notes = (*notes, f"{encoder} encoder")
        if self.needs_vectors:
            notes = (*notes, *self.lossy_notes)
        return RowParts(base=paper_label or own, paper_label=bool(paper_label), retriever=ret,
                        expansion=exp_hooks.expansion_label if exp_hooks is not None else None, fixed_base_k=fixed,
                        notes=notes)

    @property
    def recall_ceiling(self) -> float | None:
        """The recall no method can exceed on the run's questions and corpus (run.json ``setting.gold``; None if
        unrecorded)."""
        value = ((self.run_info.get("setting") or {}).get("gold") or {}).get("recall_ceiling")
        return float(value) if isinstance(value, int | float) else None

    @property
    def lossy_notes(self) -> tuple[str, ...]:
        """The lossy vector settings the run used (run.json): bf16 vectors or queries (recall moves, docs/encoders.md)
        and an approximate kNN ("passages ivf kNN (nprobe 1, sq8 codes, rerank 1)")."""
        emb = self._info("embedder")
        bf16 = [what for what, key in (("vectors", "precision_used"), ("queries", "query_precision_used"))
                if emb.get(key) == "bf16"]
        approx = (self.run_info.get("setting") or {}).get("approximate_knn") or {}
        return (*([f"bf16 {' and '.join(bf16)}"] if bf16 else []), *(f"{k} {v}" for k, v in approx.items()))

    @property
    def is_paper_row(self) -> bool:
        """Whether the run has every setting of its method's paper row (no ``RowParts.notes``): claims' ``paper_row``."""
        return not self._row_parts().notes

    def is_paper_row_but(self, axes: Iterable[str]) -> bool:
        """Whether the run has every setting of its method's paper row except the settings ``axes`` (a claim's own
        axis: Table 4's ``beam.diversity``, Table 9's beam length and rounds): claims' ``paper_row: [keys]``."""
        return not self._row_parts(skip=tuple(axes)).notes

    @property
    def paper(self) -> str:
        """Paper whose published numbers this run is compared with (report.paper, else :data:`DEFAULT_PAPER`)."""
        return self.report.get("paper") or DEFAULT_PAPER

    @cached_property
    def qa_notes(self) -> tuple[str, ...]:
        """How the run's K.3 read differs from Table 3's (the top 5 passages of the k = 5 pass): "QA top 1", "QA from
        the k = 10 pass" (a matched-k run without k = 5 reads the next pass holding top_k passages), and another
        dataset's answer script (:attr:`answer_script_note`, also for methods that answer themselves, T²RAG). None
        for QA bounds."""
        if self.is_qa_bound:
            return ()
        script = self.answer_script_note
        if not self.config.get("qa"):
            return script
        # (gone: the top_k note from the config alone); an errored record may hold no pass nor qa_mode
        preds = RunResult.split_errored(load_predictions(self))[0]
        if preds and all(p.get("qa_mode") == "method" for p in preds):
            return script
        top_k = int(config_value(self.config, "qa_reader.top_k") or PAPER_QA_TOP_K)
        notes = [*script, *([f"QA top {top_k}"] if top_k != PAPER_QA_TOP_K else [])]
        passes = [int(k) for k in ((preds or [{}])[0].get("rankings") or {}) if str(k).isdigit()]  # matched-k passes
        if passes and (k := pass_for_qa(passes, top_k)) != PAPER_QA_TOP_K:
            notes.append(f"QA from the k = {k} pass")
        return tuple(notes)

    @property
    def answer_script_note(self) -> tuple[str, ...]:
        """("hotpotqa answer script",) when ``dataset.answer_metric`` scored EM/F1 with another official script than
        the dataset's own (the paper's cells use each dataset's; docs/readings.md), else ()."""
        paper, chosen = config_value(self.config, "dataset.paper_name"), config_value(self.config, "dataset.answer_metric")
        if chosen is None:
            return ()
        try:
            used = answer_metric_for(paper, chosen)
        except GearError:
            return (f"{chosen} answer script",)
        return (f"{used} answer script",) if used != answer_metric_for(paper) else ()

    def method_label_for(self, metric: str) -> str:
        """The paper's row name the run's ``metric`` is looked up under: :attr:`method_label`, with how the run's K.3
        read differs from Table 3's for EM/F1 (``qa_notes``: never beside the paper's cell)."""
        if metric in ("EM", "F1") and self.qa_notes:
            return with_notes(self.method_label, self.qa_notes)
        return self.method_label

    def label_for(self, metric: str) -> tuple[str, str]:
        """(method, label) of the row holding ``metric``: :meth:`method_label_for` naming the run's models where they
        are not the paper's (:attr:`model_notes`), and the label with its tag."""
        if metric in ("EM", "F1") and self.qa_notes:
            method = with_notes(self.method_label_for(metric), self.model_notes)
            return method, f"{method} [{self.tag}]" if self.tag else method
        return self.method, self.label

    @property
    def is_qa_bound(self) -> bool:
        """A QA bound run (no passages / gold passages): its retrieval is not a method's."""
        return bool(self.config.get("qa")) and (self.config.get("qa_reader") or {}).get("mode", "retrieved") != "retrieved"

    def paper_ref(self, metric: str) -> tuple[str, str, str | None]:
        """(paper, table, setting) whose number stands beside ours: the paper's table of the metric by default;
        EM/F1 may name another paper's table (``report.qa_paper`` / ``qa_paper_table`` / ``qa_setting``)."""
        table = self.table_for(metric)
        if metric in ("EM", "F1") and self.report.get("qa_paper"):
            return (self.report["qa_paper"], self.report.get("qa_paper_table") or table, self.report.get("qa_setting"))
        setting = self.report.get("setting") if table == self.table_for("R@5") else None
        return (self.paper, table, setting)

    def table_for(self, metric: str) -> str:
        """Paper table of a metric: EM/F1 belong to Table 3 (QA), recall to report.table (default Table 2)."""
        if metric in ("EM", "F1"):
            return self.report.get("qa_table") or "Table 3"
        return self.report.get("table") or "Table 2"


_TAG_IGNORED = {"hydra", "name"}  # never what tells two runs apart
_TAG_KEYS = 3  # differing settings shown in a tag at most
_TAG_LATE = ("report.", "qa_labels.")  # where the rows go and what they are called: shown after what was run


def _tag_order(key: str) -> tuple[int, str]:
    """Settings of the run first, then the report's placement (``report.table``), then its label maps."""
    if key.startswith(_TAG_LATE):
        return (1 if key in ("report.table", "report.qa_table", "report.paper", "report.setting") else 2, key)
    return (0, key)


def tag_runs(runs: list[RunResult]) -> None:
    """Give runs that share a label and a dataset (a ``-m beam.width=3,10`` sweep) a :attr:`RunResult.tag`: the
    settings whose values differ among them (``beam.width=3``; the run's own settings before the report's labels
    and placement; only settings a run used, :meth:`RunResult.uses`), or the run folder's name when none differ.
    The settings are chosen per method over all datasets, and every run of the method is tagged with its values,
    so one configuration keeps one row across the dataset columns."""
    by_method: dict[str, list[RunResult]] = {}
    for r in runs:
        by_method.setdefault(r.method, []).append(r)
    for group in by_method.values():
        # a tag naming a setting that changes no result (the runner's list, run_folder.NO_RESULT_SETTINGS) first hid
        # what does ("[dataset.limit=2, llm.backoff_base_s=0.01, ...]" for runs on two LLMs); the report's own
        # placement and labels are shown, after the run's settings
        flat = {id(r): {k: v for k, v in flat_settings(r.config, _TAG_IGNORED).items()
                        if k.startswith(_TAG_LATE) or not changes_no_result(k)} for r in group}
        keys: set[str] = set()
        for dataset in {r.dataset for r in group}:
            same = [r for r in group if r.dataset == dataset]
            if len(same) > 1:
                keys |= {k for r in same for k in flat[id(r)]
                         if len({flat[id(o)].get(k) for o in same if o.uses(k)}) > 1}
        ordered = sorted(keys, key=_tag_order)
        for r in group:
            f = flat[id(r)]
            mine = [k for k in ordered if r.uses(k)]
            shown = [f"{k}={json.loads(f[k]) if k in f else 'unset'}" for k in mine[:_TAG_KEYS]]
            if shown:
                r.tag = ", ".join(shown) + (", ..." if len(mine) > _TAG_KEYS else "")
            elif sum(o.dataset == r.dataset for o in group) > 1:
                r.tag = Path(r.path).name
    labels = [(r.label, r.dataset) for r in runs]
    for r in runs:  # the same differing settings with the same values (the same config run twice): add the folder
        if labels.count((r.label, r.dataset)) > 1:
            r.tag = f"{r.tag}, {Path(r.path).name}" if r.tag else Path(r.path).name


def read_predictions(path: Path, notes: list[str] | None = None) -> list[dict]:
    """Records of a predictions.jsonl, the last one per question id, in first-seen order; a partial last line (a
    run killed mid-write) dropped with a note (``run_folder.read_predictions``)."""
    return list(rf.read_predictions(path, notes).values())


def question_set(run: RunResult, preds: list[dict]) -> list[dict]:
    """The predictions of the questions the run evaluated, in its order: by the ids its metrics.json recorded
    (any subset: first-N, stratified); runs from before ids were recorded fall back to the first
    ``dataset.limit`` records (subset=first only)."""
    ids = run.metrics.get("question_ids")
    if ids is not None:
        by_id = {str(p.get("id")): p for p in preds}
        missing = [str(i) for i in ids if str(i) not in by_id]
        if missing:
            note = (f"{run.path}: predictions.jsonl lacks {len(missing)} of the {len(ids)} questions metrics.json "
                    f"scored (first: {missing[0]}; an edited or damaged file): its cells, intervals and per-question "
                    f"analyses are over the {len(ids) - len(missing)} present (n={len(ids) - len(missing)}), not "
                    f"metrics.json's {len(ids)}")
            if note not in run.notes:  # called once per table and analysis
                run.notes.append(note)
        return [by_id[str(i)] for i in ids if str(i) in by_id]
    d = run.config.get("dataset") or {}
    limit = d.get("limit")
    if d.get("subset", "first") != "first" and limit:
        run.notes.append(f"{run.path}: metrics.json predates recorded question ids and the subset is "
                         f"'{d.get('subset')}': all {len(preds)} predictions are used")
        return preds
    return preds[:limit] if limit and limit > 0 else preds


def check_stale(run: RunResult, preds: list[dict]) -> None:
    """Flag a metrics.json that scores fewer questions than the run's last (re)start asked for (run.json's
    ``subset``, written at each start: a run extended with a larger dataset.limit that did not finish): the report
    keeps the recorded set and says so. A run whose dataset.limit was lowered scores the questions it asked for,
    though predictions.jsonl keeps the others: not flagged. Without a recorded subset, finished predictions
    beyond metrics.json's count are the sign."""
    ids = run.metrics.get("question_ids")
    n_metrics = len(ids) if ids is not None else run.metrics.get("n_questions")
    if n_metrics is None:
        return
    finished = len(RunResult.split_errored(preds)[0])
    asked = run.subset
    if isinstance(asked.get("ids"), list) and ids is not None:
        stale = bool(set(map(str, asked["ids"])) - set(map(str, ids)))
    elif isinstance(asked.get("size"), int):
        stale = asked["size"] > n_metrics
    else:
        stale = finished > n_metrics
    if stale:
        wanted = f" (its last start asked for {asked['size']})" if isinstance(asked.get("size"), int) else ""
        run.notes.append(f"{run.path}: metrics.json scores {n_metrics} questions but predictions.jsonl has "
                         f"{finished} finished ones{wanted} (an extended run that did not finish): the report uses "
                         f"the {n_metrics}; re-run it to update metrics.json")


@dataclass
class UnfinishedRun:
    """A run dir without metrics.json: a failed, killed or still running job, and why it stopped if known."""

    path: Path
    method: str
    finished: int  # questions finished (predictions.jsonl records without an error)
    error: str  # failure.json's error, else the last error line of its SLURM job's log, else a note


def _slurm_log_error(run_dir: Path) -> str | None:
    """The last error line (``slurmstepd: error: *** JOB 7 ON n1 CANCELLED ...``, a Python exception) of the
    submitit log of the SLURM job run.json names (hydra/launcher=slurm: ``<sweep dir>/.submitit/<job>/``)."""
    job = (rf.read_run_info(run_dir).get("environment") or {}).get("slurm") or {}
    if not job.get("job_id"):
        return None
    for log_file in sorted(run_dir.parent.glob(f".submitit/{job['job_id']}/*_log.err"), reverse=True):
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()
        hits = [ln.strip() for ln in lines if "error" in ln.lower() or "cancelled" in ln.lower()
                or "killed" in ln.lower() or "oom" in ln.lower()]
        slurm_said = [ln for ln in hits if "*** JOB" in ln]  # slurmstepd's reason: CANCELLED, TIME LIMIT, ...
        if hits:
            return f"SLURM job {job['job_id']}: {(slurm_said or hits)[-1]}"
    return f"SLURM job {job['job_id']} stopped without recording an error"


def find_unfinished(paths: list[str | Path]) -> list[UnfinishedRun]:
    """Run dirs under ``paths`` without metrics.json, each with what stopped it (failure.json, its SLURM log)."""
    dirs: set[Path] = set()
    for root in map(Path, paths):
        for marker in rf.RUN_MARKERS:
            dirs.update(f.parents[marker.count("/")] for f in root.rglob(marker) if ".submitit" not in f.parts)
    out = []
    for d in sorted(dirs):
        if (d / rf.METRICS).exists():
            continue
        cfile = next((f for f in (d / rf.CONFIG, d / rf.HYDRA_DIR / rf.CONFIG) if f.exists()), None)
        config = read_config(cfile) if cfile else {}
        failure = read_json_object(d / rf.FAILURE) if (d / rf.FAILURE).exists() else {}
        if config.get("stage", "retrieve") != "retrieve" and not failure:
            continue  # stage=extract / stage=index runs write no metrics.json by design
        method = RunResult(d, config, {}).method if cfile else "?"
        finished = len(RunResult.split_errored(read_predictions(d / rf.PREDICTIONS))[0])
        error = (failure.get("error") or _slurm_log_error(d)
                 or "no error recorded (still running, or killed before it could record one)")
        out.append(UnfinishedRun(d, method, finished, error))
    for root in map(Path, paths):  # sweeps some or none of whose jobs started
        for sweep in sorted(f.parent for f in root.rglob("multirun.yaml") if ".submitit" not in f.parts):
            jobs = {d for d in dirs if d == sweep or sweep in d.parents}
            jobs.update(f.parent for f in sweep.rglob(rf.RUN_LOG) if ".submitit" not in f.parts)
            if not jobs:
                out.append(UnfinishedRun(sweep, "?", 0, "a sweep without a single job dir: its jobs are still queued "
                                         "or never started (a launcher that could not submit them says why in the "
                                         "sweep command's output)"))
                continue
            expected = sweep_size(sweep / "multirun.yaml")
            if expected is not None and len(jobs) < expected:
                n = expected - len(jobs)
                out.append(UnfinishedRun(sweep, "?", 0, f"{n} of the sweep's {expected} jobs {'has' if n == 1 else 'have'} "
                                         "no job dir: still queued, or never started (Hydra's basic launcher stops "
                                         "a sweep at its first failed job; re-run the sweep command to run them)"))
    return out


def sweep_size(multirun_yaml: Path) -> int | None:
    """How many jobs a sweep with Hydra's basic sweeper has (its multirun.yaml's ``hydra.sweeper.params`` and
    command-line overrides, expanded as ``BasicSweeper`` does); None for another sweeper or an unreadable file."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        hydra = read_config(multirun_yaml).get("hydra") or {}
        sweeper = hydra.get("sweeper") or {}
        if not str(sweeper.get("_target_", "")).endswith("BasicSweeper"):
            return None
        args = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
        args += list((hydra.get("overrides") or {}).get("task") or [])
        batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(args), None)
    except (OSError, GearError, HydraException, AttributeError, TypeError, ValueError):
        return None  # a file this cannot expand gets no note, never a failed report
    return sum(len(b) for b in batches)


def _cell(text: object) -> str:
    """Text fit for one Markdown table cell."""
    return str(text).replace("|", "/").replace("\n", " ")


def write_failures(runs: list[RunResult], unfinished: list[UnfinishedRun], out: Path) -> list[Path]:
    """``failures.md`` (none: no file): the unfinished runs with their error, and the finished runs with errored
    questions (scored as misses in the tables) with the first question's error."""
    parts = []
    if unfinished:
        rows = [f"| {u.method} | {u.path} | {u.finished} | {_cell(u.error)} |" for u in unfinished]
        parts.append("## Unfinished runs (no metrics.json): not in the tables\n\n| method | run dir | finished "
                     "questions | error |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    errored = [r for r in runs if r.metrics.get("n_errors")]
    if errored:
        rows = []
        for r in errored:
            first = next(iter(RunResult.split_errored(load_predictions(r))[1]), {})
            rows.append(f"| {r.label} | {r.path} | {r.metrics['n_errors']} of {r.metrics.get('n_questions')} | "
                        f"{first.get('id', '')}: {_cell(first.get('error', ''))} |")
        parts.append("## Runs with failed questions (scored as misses)\n\n| method | run dir | failed | first error |"
                     "\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    if not parts:
        return []
    path = out / "failures.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return [path]


def find_runs(paths: list[str | Path]) -> list[RunResult]:
    """Every folder under ``paths`` holding metrics.json and config.yaml (multirun folders too); a run whose last
    attempt failed after it had finished once (failure.json beside metrics.json) carries a note."""
    runs: list[RunResult] = []
    seen: set[Path] = set()
    for root in map(Path, paths):
        if not root.exists():
            raise GearError(f"run dir not found: {root}")
        for mfile in sorted(root.rglob(rf.METRICS)):
            cfile = mfile.parent / rf.CONFIG
            if not cfile.exists():
                continue
            metrics = read_json_object(mfile)
            if metrics.get("stage") in ("index", "extract"):
                continue
            if mfile.parent.resolve() in seen:  # a run dir given twice (itself and its sweep folder)
                continue
            seen.add(mfile.parent.resolve())
            run = RunResult(mfile.parent, read_config(cfile), metrics)
            bare = run.data_warnings.get("passages_without_triples")
            if bare:
                run.notes.append(f"{mfile.parent}: {bare} passages of its corpus have no triple (a partial triples "
                                 "file, e.g. a stage=extract run over dataset.limit_passages): methods over triples "
                                 "saw only the others")
            unreachable = run.data_warnings.get("gold_not_in_corpus")
            if unreachable:  # logged at load time only: the report put a capped recall beside the paper's silently
                run.notes.append(f"{mfile.parent}: {unreachable} gold passage ids of its questions are not in its corpus "
                                 "(run.json data_warnings; counted as misses, as the reference evaluations do): its "
                                 "recall cannot reach 100 and reads lower than on a corpus holding every gold passage")
            versions = rf.code_versions(run.run_info.get("code_history"))
            if len(versions) > 1:  # resumed after a code change: the fingerprint leaves code out
                run.notes.append(f"{mfile.parent}: its questions were run by {len(versions)} code versions "
                                 f"({', '.join(versions)}; run.json code_history): a change to its method "
                                 "between them mixes two methods' records in one row")
            dropped = context_dropped(metrics.get("agent_stats"))
            if dropped:
                window = config_value(run.config, "llm.context_window")
                run.notes.append(f"{mfile.parent}: passages dropped to fit llm.context_window={window} "
                                 f"({', '.join(f'{k}={v}' for k, v in dropped.items())}): its prompts read fewer "
                                 "passages than its settings say, so its LLM-read numbers are not those of its label")
            if (mfile.parent / rf.FAILURE).exists():
                run.notes.append(f"{mfile.parent}: its last attempt failed ({read_json_object(mfile.parent / rf.FAILURE).get('error')}); "
                                 "the tables show the metrics.json of the attempt before")
            check_stale(run, read_predictions(mfile.parent / rf.PREDICTIONS, run.notes))
            runs.append(run)
    if not runs:
        raise GearError(f"no finished runs (metrics.json + config.yaml) under {', '.join(map(str, paths))}")
    tag_runs(runs)
    check_same_data(runs)
    return runs


# run.json ``setting``'s content hashes of what two runs read (pipeline/setting.py): the corpus by its passages, the
# questions by their ids and texts, the gold by each question's gold passages' content; ids, order and file format
# aside
_CONTENT = {"corpus": ("corpus", "content_sha256"), "questions": ("questions", "texts_sha256"), "gold": ("gold", "sha256")}


def _content(run: RunResult, what: str) -> str | None:
    section, key = _CONTENT[what]
    value = ((run.run_info.get("setting") or {}).get(section) or {}).get(key)
    return str(value) if value else None


def different_data(a: RunResult, b: RunResult) -> str | None:
    """Why two runs cannot be compared question by question, else None: their corpus or questions differ by content
    (run.json ``setting``: a reordered or re-serialised copy of the sample is the sample), or, for runs that record
    no content hash, by file; or the same questions are scored against other gold (``setting.gold.sha256``)."""
    def same(k: str) -> bool:
        # one file read by both (their question sets may differ by dataset.limit: the pairing says so), or content
        # that is the same whatever the files' order and format
        ca, cb = _content(a, k), _content(b, k)
        return (k not in a.data or k not in b.data or a.data[k] == b.data[k]) or bool(ca and ca == cb)

    diff = [k for k in ("corpus", "questions") if not same(k)]
    if diff:
        return f"different {' and '.join(diff)} files ({a.path} vs {b.path})"
    ga, gb = _content(a, "gold"), _content(b, "gold")
    same_set = _content(a, "questions") is not None and _content(a, "questions") == _content(b, "questions")
    if same_set and ga and gb and ga != gb:  # the gold of the same questions (a limit's subset has its own hash)
        return f"the same questions against different gold passages (setting.gold.sha256; {a.path} vs {b.path})"
    return None


def check_same_data(runs: list[RunResult]) -> None:
    """A note on every run tabled under a dataset column whose first run read other corpus/question files (e.g.
    ``dataset.path`` overridden and ``dataset.name`` kept): their rows sit side by side but are not comparable."""
    first: dict[str, RunResult] = {}
    for r in runs:
        ref = first.setdefault(r.dataset, r)
        why = different_data(ref, r) if ref is not r else None
        if why:
            r.notes.append(f"{r.path}: tabled under {r.dataset} beside {ref.path} but run on {why}: the rows are "
                           "not comparable and claims do not pair them; give it its own dataset.name/paper_name")


def load_predictions(run: RunResult) -> list[dict]:
    """The run's predictions of the questions it evaluated (by the ids recorded in metrics.json; the last
    record per id; a partial last line dropped). Questions with an error are kept; callers filter."""
    return question_set(run, read_predictions(Path(run.path) / rf.PREDICTIONS, run.notes))
