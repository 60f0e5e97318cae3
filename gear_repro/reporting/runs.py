"""Find finished runs (single runs and multirun folders) and label them as the paper's tables do."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gear_repro.utils.errors import GearError
from gear_repro.utils.io import read_json


def read_config(path: Path) -> dict:
    """A run's resolved config (the runner's config.yaml) as a plain dict."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)  # type: ignore[return-value]

RETRIEVER_LABELS = {"bm25": "BM25", "sbert": "SBERT", "hybrid": "Hybrid"}
EXPANSION_LABELS = {"naive": "NaiveGE", "sync": "SyncGE"}


@dataclass
class RunResult:
    path: Path
    config: dict
    metrics: dict

    @property
    def dataset(self) -> str:
        return self.config.get("dataset", {}).get("paper_name") or self.config.get("dataset", {}).get("name", "?")

    @property
    def report(self) -> dict:
        return self.config.get("report") or {}

    @property
    def method(self) -> str:
        """Row label: report.method if set, else derived ("BM25", "Hybrid + SyncGE", "GEAR")."""
        if self.report.get("method"):
            return self.report["method"]
        if self.is_qa_bound:  # Table 3's bounds: the label names the bound, not the (unused) retriever
            return {"none": "No Passages", "gold": "Gold Passages"}.get(self.config["qa_reader"]["mode"], "QA bound")
        agent = self.config.get("agent", {}).get("name", "single")
        if agent == "gear":
            return "GEAR"
        ret = self.config.get("retriever", {}).get("name", "?")
        label = RETRIEVER_LABELS.get(ret, ret)
        exp = (self.config.get("expansion") or {}).get("name", "none")
        if exp in EXPANSION_LABELS:
            label += f" + {EXPANSION_LABELS[exp]}"
        if agent != "single":
            label += f" ({agent})"
        return label

    @property
    def is_qa_bound(self) -> bool:
        """A QA bound run (no passages / gold passages): its retrieval is not a method's."""
        return bool(self.config.get("qa")) and (self.config.get("qa_reader") or {}).get("mode", "retrieved") != "retrieved"

    def table_for(self, metric: str) -> str:
        """Paper table of a metric: EM/F1 belong to Table 3 (QA), recall to report.table (default Table 2)."""
        if metric in ("EM", "F1"):
            return self.report.get("qa_table") or "Table 3"
        return self.report.get("table") or "Table 2"


def find_runs(paths: list[str | Path]) -> list[RunResult]:
    """Every folder under ``paths`` holding metrics.json and config.yaml (multirun folders too)."""
    runs: list[RunResult] = []
    for root in map(Path, paths):
        if not root.exists():
            raise GearError(f"run dir not found: {root}")
        for mfile in sorted(root.rglob("metrics.json")):
            cfile = mfile.parent / "config.yaml"
            if not cfile.exists():
                continue
            metrics = read_json(mfile)
            if metrics.get("stage") in ("index", "extract"):
                continue
            runs.append(RunResult(mfile.parent, read_config(cfile), metrics))
    if not runs:
        raise GearError(f"no finished runs (metrics.json + config.yaml) under {', '.join(map(str, paths))}")
    return runs
