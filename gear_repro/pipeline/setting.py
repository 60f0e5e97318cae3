"""What a run was measured on: run.json ``setting``, the record the report's like-for-like placement reads
(gear_repro/reporting/setting.py; DESIGN.md "Outputs": a paper's number stands beside ours only on the paper table's
setting, recognised by content, never by a name).

The corpus and question set are recorded by content (:mod:`gear_repro.data.identity`) with the known data set they
are, if any; the LLM only when the run built one, the embedder only when a component of the run embeds, the triples
only when the run built the triple collection or graph: a setting the run never used is no difference from the
paper's.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gear_repro.data.identity import dataset_identity, known_sets, passage_key, recognise
from gear_repro.pipeline.resources import Resources
from gear_repro.types import Question
from gear_repro.utils.io import read_json_object

# HippoRAG's OpenIE output files name their LLM: openie_<set>_results_ner_<model>_<passages>.json
_OPENIE_NAME = re.compile(r"_ner_(?P<llm>.+?)_\d+\.json$")


def triples_source(dataset_path: Path, triples_path: Path | None) -> dict[str, Any] | None:
    """Where a run's triples came from: a stage=extract run's triples.jsonl (its config.yaml names the LLM, GEAR
    App. K.1), or the HippoRAG OpenIE file gear-repro-prepare imported (prepare_stats.json; the LLM from its file
    name); ``{"source": "unrecorded"}`` for a hand-made file. None without triples."""
    if triples_path is None:
        return None
    config = triples_path.parent / "config.yaml"
    if config.is_file():
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(config)
        if cfg.get("stage") == "extract":
            return {"source": "extraction", "llm": str(OmegaConf.select(cfg, "llm.model", default="") or "") or None}
    stats_path = dataset_path / "prepare_stats.json"
    imported = (read_json_object(stats_path).get("triples") or {}) if stats_path.is_file() else {}
    if isinstance(imported, dict) and imported.get("file"):
        found = _OPENIE_NAME.search(Path(str(imported["file"])).name)
        return {"source": "HippoRAG OpenIE", "llm": found["llm"] if found else None}
    return {"source": "unrecorded", "llm": None}


# how a converter derives gold passages where they are not the source's own supporting passages
# (gear-repro-prepare --format; docs/data.md)
GOLD_DERIVED = {"2wiki_hipporag": "evidence subject"}


def gold_ceiling(questions: Sequence[Question], corpus: Mapping[str, Any]) -> dict[str, Any]:
    """The recall no method can exceed on these questions over this corpus: the mean share of each question's gold
    ids that are in the corpus (recall@k's own average, docs/data.md), how many questions have all of theirs, the
    gold references and how many of them are in no passage (``refs``, ``refs_unmapped``), and ``sha256``: a hash of
    each question's gold by passage content (ids and order aside), so two runs are known to be scored against the
    same gold."""
    golds = [q.gold_ids for q in questions if q.gold_ids]
    shares = [sum(g in corpus for g in gold) / len(gold) for gold in golds]
    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: str(q.id)):
        keys = sorted(passage_key(corpus[g].title, corpus[g].text) if g in corpus else f"missing:{g}"
                      for g in q.gold_ids)
        h.update(json.dumps([str(q.id), keys], ensure_ascii=False).encode("utf-8") + b"\n")
    return {"recall_ceiling": round(100 * sum(shares) / len(shares), 2) if shares else None,
            "questions_fully_mapped": sum(s == 1 for s in shares), "questions_with_gold": len(golds),
            "refs": sum(len(g) for g in golds), "refs_unmapped": sum(g not in corpus for gold in golds for g in gold),
            "sha256": h.hexdigest()}


def gold_derivation(dataset_path: Path, question_ids: set[str]) -> dict[str, Any]:
    """How the prepared data set's gold was derived, for these questions (its prepare_stats.json; {} without one):
    ``derived`` (GOLD_DERIVED of its format: "evidence subject"), ``title_matched`` (references mapped by
    ``--match-titles``), and the unmapped references' causes (``other_title``: a page under another title,
    ``not_in_corpus``) with an ``example`` of a title mismatch."""
    stats_path = Path(dataset_path) / "prepare_stats.json"
    stats = read_json_object(stats_path) if stats_path.is_file() else {}
    if not stats:
        return {}
    out: dict[str, Any] = {}
    if stats.get("format") in GOLD_DERIVED:
        out["derived"] = GOLD_DERIVED[stats["format"]]
    mappings = [m for m in (stats.get("title_matching") or {}).get("mappings") or [] if m.get("question") in question_ids]
    if mappings:
        out["title_matched"] = len(mappings)
    refs = [u for u in stats.get("gold_not_found_refs") or [] if u.get("question") in question_ids]
    if refs:
        out["causes"] = dict(Counter(str(u.get("cause")) for u in refs))
        other = next((u for u in refs if u.get("corpus_title")), None)
        if other:
            out["example"] = f"{other['title']} -> {other['corpus_title']}"
    return out


def identity_setting(corpus_id: dict[str, Any], questions_id: dict[str, Any]) -> dict[str, Any]:
    """run.json ``setting``'s ``corpus``, ``questions`` and ``known`` of a corpus and question set identity
    (gear_repro/data/identity.py): the known data set they are, with the paper tables measured on it."""
    known = recognise(corpus_id, questions_id)
    questions = {k: v for k, v in questions_id.items()  # the hashes stand for the ids and texts
                 if k not in ("ids", "texts") and v is not None}
    out: dict[str, Any] = {"corpus": corpus_id, "questions": questions, "known": None}
    if known is not None:
        tables = {k.name: k.used_by for k in known_sets()}
        out["known"] = {"name": known.name, "names": [known.name, *known.alternatives], "source": known.source,
                        "split": known.split,
                        "corpus_matched_by": known.corpus_matched_by,
                        "questions_matched_by": known.questions_matched_by, "questions": known.questions,
                        "questions_of": known.questions_of, "matched": list(known.matched),
                        **({"why_not": known.why_not} if known.why_not else {}),
                        "used_by": sorted({t for n in (known.name, *known.alternatives) for t in tables.get(n, ())})}
    return out


def data_setting(res: Resources) -> dict[str, Any]:
    """The corpus and questions by content and the known data set they are, with the paper tables measured on it
    (a pass over the corpus: computed once per run)."""
    ds = res.dataset
    ident = dataset_identity(ds)
    out = identity_setting(ident["corpus"], ident["questions"])
    out["questions"]["in_file"] = int((ds.selection or {}).get("of") or out["questions"]["questions"])
    out["gold"] = {**gold_ceiling(ds.questions, ds.passage_by_id),
                   **gold_derivation(Path(ds.path), {str(q.id) for q in ds.questions})}
    return out


UNKNOWN_LLM = "unknown"  # an LLM object that names no model: never the paper's


def llm_setting(llm: Any) -> tuple[str, dict[str, Any]]:
    """The answering LLM as run.json ``setting`` records it: the model placement compares (``llm``) and what served it
    (``llm_served``). A server the harness starts is named by the GGUF file it serves, with the weights' identity
    (:func:`~gear_repro.llm.gguf_weights.served_file`), never by the alias ``llm.model`` gives it (``llm=tiny
    llm.model=gpt-4o-mini-2024-07-18`` is SmolLM2); another endpoint by its model name, with the names its replies
    reported (``reported``, this process's calls); an object whose ``model`` is None: ``unknown``."""
    from gear_repro.llm.gguf_weights import served_file

    alias = getattr(llm, "model", None)
    served: dict[str, Any] = {"alias": str(alias) if alias else None}
    server = getattr(llm, "server_cfg", None)
    if server and not getattr(llm, "base_url", None):
        file, served["weights"] = served_file(server)
        served["file"] = file
        return re.sub(r"(?i)\.gguf$", "", file), served
    records = getattr(getattr(llm, "ledger", None), "records", None) or []
    reported = sorted({str(r["model"]) for r in list(records) if r.get("ok") and r.get("model")})
    if reported:
        served["reported"] = reported
    return (str(alias) if alias else UNKNOWN_LLM), served


def embedder_model(desc: Mapping[str, Any]) -> str:
    """The embedder as run.json ``setting.embedder.model`` records it (what placement compares): a model given by
    name as named; one given by path by its weights (``files``, :func:`~gear_repro.embedding.sbert_weights.
    shipped_by_weights`): the shipped model whose files it holds, else its folder's name with its weights' identity
    ("all-mpnet-base-v2 (local files 3f2a...)"), which is no paper's model whatever the folder is called."""
    from gear_repro.embedding.sbert_weights import shipped_by_weights

    model, files = str(desc.get("model")), desc.get("files")
    if not files:
        return model
    return shipped_by_weights(files) or f"{Path(model).expanduser().name} (local files {files})"


def run_setting(res: Resources, data: dict[str, Any]) -> dict[str, Any]:
    """run.json ``setting``: ``data`` (:func:`data_setting`), and the LLM, embedder and triples the run used."""
    out = dict(data)
    if (llm := res.built("llm")) is not None:
        out["llm"], out["llm_served"] = llm_setting(llm)
    emb = res.built("embedder")
    if emb is not None and res.needs_vectors:
        desc = emb.describe()
        out["embedder"] = {"model": embedder_model(desc), **({"files": desc["files"]} if desc.get("files") else {}),
                           "precision": desc.get("precision_used"),
                           "query_precision": desc.get("query_precision_used")}
        approx = {name: getattr(res.built(name), "approximation", None) for name in ("passages", "triples")}
        if any(approx.values()):  # an approximate kNN is a lossy setting the row label names
            out["approximate_knn"] = {k: v for k, v in approx.items() if v}
    if res.built("triples") is not None or res.built("triple_index") is not None:
        ds = res.dataset
        out["triples"] = triples_source(Path(ds.path), ds.triples_path)
    return out
