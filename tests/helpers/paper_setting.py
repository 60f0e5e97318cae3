"""Put a test's run on a paper table's setting: its run.json ``setting`` as a run on the table's own data set (its
corpus hash and question ids registered) and models would record it (reporting/setting.py places the paper's number beside such a run with a Δ).

Toy runs are not on any paper's setting; tests of which paper cell a row gets (labels, presets, QA reads) use this
to look at the cell with the placement rule out of the way, and tests of the placement rule itself do not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gear_repro.reporting.paper import paper_setting
from gear_repro.reporting.setting import model_options


def paper_setting_record(paper: str = "GEAR", table: str = "Table 2", dataset: str = "MuSiQue",
                         questions: int | None = None, **models: Any) -> dict:
    """run.json ``setting`` of a run on ``paper`` ``table``'s data for ``dataset`` (all its questions, or
    ``questions`` of them); ``models`` (llm=..., embedder=..., triples=...) as the run recorded them."""
    ps = paper_setting(paper, table, dataset)
    assert ps is not None, f"no paper_settings.csv row for {paper} {table} {dataset}"
    n_all = ps.questions_count or 500
    n = questions or n_all
    rec: dict[str, Any] = {
        "corpus": {"passages": ps.corpus_passages or 1000}, "questions": {"questions": n},
        "known": {"name": ps.known_datasets[0], "names": list(ps.known_datasets), "source": ps.corpus_source,
                  "split": ps.questions_split, "corpus_matched_by": "content",
                  "questions_matched_by": "ids" if n == n_all else "ids_subset", "questions": n,
                  "questions_of": n_all, "matched": list(ps.known_datasets), "used_by": [f"{paper} {table}"]},
        "gold": {"recall_ceiling": 100.0}}
    for key, value in models.items():
        if value is not None:
            rec[key] = value
    return rec


def put_on_paper_setting(run_dir: str | Path, paper: str = "GEAR", table: str = "Table 2", dataset: str = "MuSiQue",
                         **kwargs: Any) -> None:
    """Rewrite ``run_dir``/run.json's ``setting`` to ``paper`` ``table``'s (:func:`paper_setting_record`), keeping the
    models the run recorded where the table names them (an LLM or embedder the paper does not name stays)."""
    path = Path(run_dir) / "run.json"
    info = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    old = info.get("setting") or {}
    ps = paper_setting(paper, table, dataset)
    models = {}
    if old.get("llm") and model_options(ps.llm):
        models["llm"] = model_options(ps.llm)[0]
    if (old.get("embedder") or {}).get("model") and model_options(ps.embedder):
        models["embedder"] = {**old["embedder"], "model": model_options(ps.embedder)[0]}
    if old.get("triples") and model_options(ps.triples_llm):
        models["triples"] = {**old["triples"], "llm": model_options(ps.triples_llm)[0]}
    info["setting"] = paper_setting_record(paper, table, dataset, **{**models, **kwargs})
    path.write_text(json.dumps(info), encoding="utf-8")
