"""The papers' published numbers (gear_repro/resources/paper_results.csv: shared/paper/paper_results.csv, plus the 18
cells of T²RAG's Table 2, its ablations, transcribed from seed 002 §5.3 and checked against it, the 28 cells of
T²RAG Table 1's Average column as printed (dataset :data:`AVERAGE`), and Gutiérrez et al. (2024)'s Table 2,
single-step R@2/R@5, transcribed from arXiv 2405.14831 and checked against a second copy, see each row's note), and
the settings each table was measured on (gear_repro/resources/paper_settings.csv, one row per paper × table ×
dataset, every value cited; ``unstated`` where the paper does not say): :func:`paper_setting`; and the printed
numbers the paper itself contradicts (gear_repro/resources/paper_flags.csv, marked beside them): :func:`paper_flag`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from gear_repro.utils.errors import ConfigError

PAPER_CSV = Path(__file__).resolve().parent.parent / "resources" / "paper_results.csv"
SETTINGS_CSV = PAPER_CSV.with_name("paper_settings.csv")
FLAGS_CSV = PAPER_CSV.with_name("paper_flags.csv")  # printed numbers that are likely wrong: marked wherever shown
UNSTATED = "unstated"  # paper_settings.csv's word for a value the paper does not give (never a guess)
# the dataset name of a column averaging a table's datasets (T²RAG Table 1's "Average"): no setting of its own (its
# datasets' paper_settings.csv rows are it) and no run is on it
AVERAGE = "Average"
DEFAULT_PAPER = "GEAR"  # report.paper's default (configs/config.yaml): the paper whose tables and figures the report lays out


@lru_cache(maxsize=1)
def paper_results() -> pd.DataFrame:
    """Columns: paper, table, setting, method, dataset, metric, value, note (value as float; NaN = empty)."""
    df = pd.read_csv(PAPER_CSV)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


def _cell_mask(df: pd.DataFrame, paper: str, table: str, method: str, dataset: str, metric: str) -> pd.Series:
    return (df.paper == paper) & (df.table == table) & (df.method == method) & (df.dataset == dataset) & (df.metric == metric)


def check_papers(report: Mapping[str, Any]) -> None:
    """Start-up check of ``report.paper`` / ``report.qa_paper``: a paper not in paper_results.csv would leave every
    paper column of the run's tables empty without a word."""
    known = sorted(paper_results().paper.unique())
    for key in ("paper", "qa_paper"):
        value = report.get(key)
        if value is not None and value not in known:
            raise ConfigError(f"report.{key}={value!r} is not a paper of {PAPER_CSV.name} (papers: {', '.join(known)})")


def paper_settings(table: str, method: str, dataset: str, metric: str, paper: str = DEFAULT_PAPER) -> list[str]:
    """The settings under which the paper gives this cell a number (one per LLM, per beam length and round count, ...)."""
    df = paper_results()
    m = _cell_mask(df, paper, table, method, dataset, metric)
    return list(dict.fromkeys(str(s) for s in df[m & df.value.notna()].setting))


def paper_value(table: str, method: str, dataset: str, metric: str, paper: str = DEFAULT_PAPER,
                setting: str | None = None) -> float | None:
    """The paper's number of one cell; None when it has none, or when ``setting`` is None and the cell has numbers
    under several settings (:func:`paper_settings`): the first row's was another setting's number (a run naming
    no ``report.qa_setting`` got the first LLM's cell of a table with two LLMs)."""
    df = paper_results()
    m = _cell_mask(df, paper, table, method, dataset, metric)
    if setting:
        m &= df.setting == setting
    hit = df[m & df.value.notna()]
    if hit.empty or (not setting and hit.setting.nunique(dropna=False) > 1):
        return None
    return float(hit.iloc[0]["value"])


@dataclass(frozen=True)
class PaperFlag:
    """A printed number of paper_results.csv that the paper itself contradicts (paper_flags.csv): the report shows
    ``mark`` beside it and ``reason`` in a footnote, and keeps the number as printed."""

    mark: str
    reason: str


@lru_cache(maxsize=1)
def paper_flags() -> pd.DataFrame:
    """paper_flags.csv, checked: every flag names a cell of paper_results.csv that has a number (a flag whose cell
    was renamed would mark nothing without a word), with a mark and a reason."""
    flags = pd.read_csv(FLAGS_CSV, dtype=str, keep_default_na=False)
    results = paper_results()
    for i, rec in enumerate(flags.to_dict("records")):
        ref = f"{FLAGS_CSV.name}:{i + 2}"
        if not rec["mark"].strip() or not rec["reason"].strip():
            raise ConfigError(f"{ref}: a flag needs a mark and a reason")
        cell = _cell_mask(results, rec["paper"], rec["table"], rec["method"], rec["dataset"], rec["metric"])
        if not (cell & (results.setting == rec["setting"]) & results.value.notna()).any():
            raise ConfigError(f"{ref}: no number in {PAPER_CSV.name} for {rec['paper']} {rec['table']} "
                              f"({rec['setting']}) {rec['method']} {rec['dataset']} {rec['metric']}")
    return flags


def paper_flag(table: str, method: str, dataset: str, metric: str, paper: str = DEFAULT_PAPER,
               setting: str | None = None) -> PaperFlag | None:
    """The flag of the cell :func:`paper_value` reads (``setting`` narrows it the same way), None when unflagged."""
    flags = paper_flags()
    m = _cell_mask(flags, paper, table, method, dataset, metric)
    if setting:
        m &= flags.setting == setting
    hit = flags[m]
    return None if hit.empty else PaperFlag(hit.iloc[0]["mark"], hit.iloc[0]["reason"])


@dataclass(frozen=True)
class PaperSetting:
    """What one paper table measured one dataset on (a row of paper_settings.csv).

    Counts are None where the paper does not state them (``unstated`` in the file). ``known_datasets`` names the
    entries of gear_repro/resources/known_datasets.yaml (gear_repro.data.identity.recognise) the table's data is,
    best first (GEAR: its chunks of the multi-step baseline's corpus, then the documents they were cut from). ``llm`` and
    ``embedder`` list ``|``-separated alternatives where the table has one setting (or row) per model:
    :attr:`llm_options`, :attr:`embedder_options`. ``corpus_passages`` counts the retrieval units
    (``corpus_unit``: GEAR retrieves over chunks, App. A Table 5), ``corpus_documents`` what they were cut from."""

    paper: str
    table: str
    dataset: str
    questions_source: str
    questions_split: str
    questions_count: int | None
    corpus_source: str
    corpus_unit: str
    corpus_documents: int | None
    corpus_passages: int | None
    known_datasets: tuple[str, ...]
    llm: str
    embedder: str
    triples_source: str
    triples_llm: str
    engine: str
    analyzer: str
    answer_script: str
    citation: str
    note: str = ""

    @property
    def llm_options(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.llm.split("|"))

    @property
    def embedder_options(self) -> tuple[str, ...]:
        return tuple(x.strip() for x in self.embedder.split("|"))


_COUNTS = ("questions_count", "corpus_documents", "corpus_passages")


def _count(value: str, ref: str, column: str) -> int | None:
    if value == UNSTATED:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{ref}: {column} should be a whole number or '{UNSTATED}', got {value!r}") from None
    if n <= 0:
        raise ConfigError(f"{ref}: {column} should be positive, got {n}")
    return n


@lru_cache(maxsize=1)
def paper_setting_rows() -> dict[tuple[str, str, str], PaperSetting]:
    """paper_settings.csv by (paper, table, dataset), checked: every column filled (``unstated`` where the paper
    says nothing), counts whole numbers, no key twice, the paper one of paper_results.csv's. An :data:`AVERAGE`
    column has no row."""
    df = pd.read_csv(SETTINGS_CSV, dtype=str, keep_default_na=False)
    names = [f.name for f in fields(PaperSetting)]
    missing = [c for c in names if c not in df.columns]
    if missing:
        raise ConfigError(f"{SETTINGS_CSV.name}: lacks the columns {', '.join(missing)}")
    papers = set(paper_results().paper.unique())
    out: dict[tuple[str, str, str], PaperSetting] = {}
    for i, rec in enumerate(df.to_dict("records")):
        ref = f"{SETTINGS_CSV.name}:{i + 2} ({rec['paper']} {rec['table']} {rec['dataset']})"
        blank = [c for c in names if c != "note" and not str(rec[c]).strip()]
        if blank:
            raise ConfigError(f"{ref}: empty {', '.join(blank)} (write '{UNSTATED}' for what the paper does not say)")
        if rec["paper"] not in papers:
            raise ConfigError(f"{ref}: paper '{rec['paper']}' has no numbers in {PAPER_CSV.name}")
        values: dict[str, Any] = {c: str(rec[c]).strip() for c in names}
        for c in _COUNTS:
            values[c] = _count(values[c], ref, c)
        values["known_datasets"] = tuple(x.strip() for x in values["known_datasets"].split("|") if x.strip())
        key = (values["paper"], values["table"], values["dataset"])
        if key in out:
            raise ConfigError(f"{ref}: a second row for {key}")
        out[key] = PaperSetting(**values)
    return out


def paper_setting(paper: str, table: str, dataset: str) -> PaperSetting | None:
    """The data, models and engine ``paper``'s ``table`` measured ``dataset`` on (paper_settings.csv; names as in
    paper_results.csv, e.g. ("GEAR", "Table 2", "MuSiQue")), None when the file has no such row."""
    return paper_setting_rows().get((paper, table, dataset))
