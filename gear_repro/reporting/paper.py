"""The papers' published numbers (gear_repro/resources/paper_results.csv: shared/paper/paper_results.csv, plus the 18
cells of T²RAG's Table 2, its ablations, transcribed from seed 002 §5.3 and checked against it)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from gear_repro.utils.errors import ConfigError

PAPER_CSV = Path(__file__).resolve().parent.parent / "resources" / "paper_results.csv"
DEFAULT_PAPER = "GEAR"  # report.paper's default (configs/config.yaml): the paper whose tables and figures the report lays out


@lru_cache(maxsize=1)
def paper_results() -> pd.DataFrame:
    """Columns: paper, table, setting, method, dataset, metric, value, note (value as float; NaN = empty)."""
    df = pd.read_csv(PAPER_CSV)
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return df


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
    m = (df.paper == paper) & (df.table == table) & (df.method == method) & (df.dataset == dataset) & (df.metric == metric)
    return list(dict.fromkeys(str(s) for s in df[m & df.value.notna()].setting))


def paper_value(table: str, method: str, dataset: str, metric: str, paper: str = DEFAULT_PAPER,
                setting: str | None = None) -> float | None:
    """The paper's number of one cell; None when it has none, or when ``setting`` is None and the cell has numbers
    under several settings (:func:`paper_settings`): the first row's was another setting's number (a run naming
    no ``report.qa_setting`` got the first LLM's cell of a table with two LLMs)."""
    df = paper_results()
    m = (df.paper == paper) & (df.table == table) & (df.method == method) & (df.dataset == dataset) & (df.metric == metric)
    if setting:
        m &= df.setting == setting
    hit = df[m & df.value.notna()]
    if hit.empty or (not setting and hit.setting.nunique(dropna=False) > 1):
        return None
    return float(hit.iloc[0]["value"])
