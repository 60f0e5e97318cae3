"""A prepared dataset folder: passages C, questions, and (optionally) triples T."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from gear_repro.data.canonical import load_corpus, load_questions, load_triples
from gear_repro.data.subset import stratified_subset
from gear_repro.evaluation.metrics import AnswerMetric
from gear_repro.types import Passage, Question, Triple
from gear_repro.utils.component import Component
from gear_repro.utils.errors import DataError
from gear_repro.utils.hashing import hash_file
from gear_repro.utils.io import progress_bars
from gear_repro.utils.settings import Choice, Settings, choice, num

log = logging.getLogger(__name__)


class Subset(Choice):
    """Which questions ``dataset.limit`` keeps."""

    first = "first"  # the first N
    stratified = "stratified"  # balanced over hop types (data/subset.py)


class MissingGold(Choice):
    """What a gold passage id absent from the corpus does (dataset.missing_gold)."""

    warn = "warn"  # counted and logged; a miss in recall
    error = "error"  # DataError


@dataclass
class DatasetSettings(Settings):
    """The ``dataset`` group (each field's default and meaning declared here; configs/dataset/*.yaml set a dataset's
    name, paper column, folder and rounds): its schema, read by :func:`load_dataset`'s caller
    (pipeline/resources.py) and the runner."""

    config_key: ClassVar[str] = "dataset"

    name: str = "musique_sample"
    paper_name: str = "MuSiQue"  # the dataset's column name in the paper's tables
    path: str = "data/musique_sample"
    limit: int | None = num(None, ge=1)  # first N questions (the corpus stays whole); the subset size with stratified
    subset: Subset = Subset.first  # first N | stratified (balanced over hop types; data/subset.py)
    subset_seed: int = num(0, ge=0)  # seed of the stratified order (same ids for every method; larger limits extend it)
    limit_passages: int | None = num(None, ge=1)  # first N passages (stage=extract only; null = all)
    triples_file: str | None = "triples.jsonl"  # the triples T, in the dataset's folder
    missing_gold: MissingGold = MissingGold.warn  # warn: count gold ids absent from the corpus as misses | error: refuse
    # a folder whose prepare_stats.json names no known source dataset runs (under this group) only when true
    allow_unknown_source: bool = False
    max_rounds: int = num(4, ge=1)  # GEAR agent rounds (MuSiQue 4, 2Wiki/HotpotQA 2; §6.3)
    # EM/F1 script: musique | hotpotqa | twowiki (2Wiki's); null = from paper_name (others: hotpotqa; MuSiQue's has no
    # yes/no rule). docs/readings.md
    answer_metric: AnswerMetric | None = None


@dataclass
class Dataset:
    name: str
    path: Path
    passages: list[Passage]
    questions: list[Question]
    triples: list[Triple] | None = None
    triples_path: Path | None = None
    hashes: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, int] = field(default_factory=dict)
    selection: dict = field(default_factory=dict)  # which questions were kept: see question_selection()

    def __post_init__(self) -> None:
        self.passage_by_id = {p.id: p for p in self.passages}


# prepare_stats.json's "dataset" (gear-repro-prepare) -> (the paper's column, the configs/dataset group)
PREPARED = {"musique": ("MuSiQue", "musique"), "hotpotqa": ("HotpotQA", "hotpotqa"),
            "2wikimultihopqa": ("2Wiki", "2wiki"), "2wiki": ("2Wiki", "2wiki")}


def prepared_from(root: str | Path) -> str | None:
    """The source dataset a folder's ``prepare_stats.json`` records (gear-repro-prepare; "" when it records none),
    None when the folder has no such file (a hand-made folder)."""
    stats = Path(root) / "prepare_stats.json"
    if not stats.is_file():
        return None
    from gear_repro.utils.io import read_json_object

    return str(read_json_object(stats).get("dataset") or "")


def prepared_as(root: str | Path) -> tuple[str, str] | None:
    """(paper column, dataset group) of the dataset a folder was prepared from (``prepare_stats.json``), None when
    unknown (no such file, or a name none of ``PREPARED``, e.g. ``hipporag`` from an older gear-repro-prepare)."""
    return PREPARED.get((prepared_from(root) or "").lower())


def check_prepared_files(root: Path, hashes: dict[str, str | None]) -> None:
    """DataError when a file a run reads from a folder gear-repro-prepare wrote is not the one it recorded
    (prepare_stats.json ``files_sha256_16``), or is missing: a prepare killed between moving its files into place,
    two prepares into one folder, or a file edited by hand would pair a corpus with another data set's questions
    (BM25 then scores R@5 = 0.0) or triples (NaiveGE lost 17-23 recall points, exit 0). ``hashes``: the files read
    (names relative to ``root``), None for one absent. A folder without the record (hand-made, or prepared before
    it existed) is not checked, nor is a file the record does not name (a stage=extract's triples.jsonl copied
    into a folder prepared without triples; the loader checks that they point into the corpus)."""
    stats_path = root / "prepare_stats.json"
    if not stats_path.is_file():
        return
    from gear_repro.utils.io import read_json_object

    recorded = read_json_object(stats_path).get("files_sha256_16")
    if not isinstance(recorded, dict):
        return
    redo = ("re-run gear-repro-prepare into the folder (or delete its "
            f"{stats_path.name} to use hand-edited files)")
    for name, digest in hashes.items():
        if name not in recorded:
            continue
        if digest is None:
            raise DataError(f"{root / name} is missing, but gear-repro-prepare wrote it with {stats_path.name}: a "
                            f"prepare killed before it finished; {redo}")
        if recorded[name] != digest:
            other = (" (triples of a stage=extract: keep them under another name and set dataset.triples_file)"
                     if name == "triples.jsonl" else "")
            raise DataError(f"{root / name} is not the file gear-repro-prepare wrote with {stats_path.name} "
                            f"(sha256 {digest} != recorded {recorded[name]}): a prepare killed before it finished, "
                            f"two prepares into this folder, or an edited file{other}; {redo}")


def check_gold_answers(dataset: Dataset, switch: str = "qa=true") -> None:
    """DataError naming the first question without a gold answer: EM/F1 (qa=true, self-answering methods) would
    fail only after every LLM call had run; ``switch`` is the setting that turns the answers off."""
    missing = [q.id for q in dataset.questions if not q.answers]
    if missing:
        raise DataError(f"{dataset.path / 'questions.jsonl'}: question '{missing[0]}' has no gold answer "
                        f"({len(missing)} of the run's {len(dataset.questions)} questions): EM/F1 cannot score it; "
                        f"drop these questions or run without {switch}")


def question_selection(questions: list[Question], kind: str, limit: int | None, seed: int, n_all: int) -> dict:
    """The question subset a run works on, for run.json: kind, seed, limit, size, the ids and their sha256.

    ``ids_sha256`` hashes the ids in the dataset's order joined by newlines, so two runs on the same subset
    show the same hash (and a report can pair their questions).
    """
    ids = [q.id for q in questions]
    return {"kind": kind, "seed": seed if kind == "stratified" else None, "limit": limit, "size": len(ids),
            "of": n_all, "ids_sha256": hashlib.sha256("\n".join(ids).encode()).hexdigest(), "ids": ids}


PARTIAL_TRIPLES = 0.1  # share of passages without a triple above which a triples file is called partial


def check_links(passages: list[Passage], questions: list[Question], triples: list[Triple] | None,
                missing_gold: str, *, questions_ref: str, corpus_ref: str, triples_ref: str) -> dict[str, int]:
    """The checks across the three record sets, shared by folders and in-memory data (``*_ref`` name them in
    messages): gold passage ids not in the corpus (counted and logged, or a DataError with
    ``missing_gold='error'`` or when none is found: another corpus or id format, never a run of zeros); a triple
    naming a passage not in the corpus (a DataError naming it); a partial triples set (logged). Returns the
    warnings' counts (run.json ``data_warnings``)."""
    ids = {p.id for p in passages}
    warnings: dict[str, int] = {}
    missing = [(q.id, g) for q in questions for g in q.gold_ids if g not in ids]
    if missing:
        msg = (f"{questions_ref}: {len(missing)} gold passage ids are not in {corpus_ref} "
               f"(first: question '{missing[0][0]}' gold '{missing[0][1]}')")
        if missing_gold == "error" or len(missing) == sum(len(q.gold_ids) for q in questions):
            raise DataError(msg if missing_gold == "error" else msg.replace(
                f"{len(missing)} gold passage ids are not", f"none of the {len(missing)} gold passage ids is"))
        log.warning(msg + "; they count as misses in recall")
        warnings["gold_not_in_corpus"] = len(missing)
    no_gold = sum(1 for q in questions if not q.gold_ids)
    if no_gold:
        log.warning("%s: %d questions have no gold passages; recall skips them", questions_ref, no_gold)
        warnings["questions_without_gold"] = no_gold
    if triples is not None:
        orphan = [t for t in triples if t.passage_id not in ids]
        if orphan:
            raise DataError(f"{triples_ref}: {len(orphan)} triples point to passages not in the corpus "
                            f"(first: triple '{orphan[0].id}', passage_id '{orphan[0].passage_id}')")
        bare = len(ids - {t.passage_id for t in triples})
        if bare > PARTIAL_TRIPLES * len(ids):  # e.g. a stage=extract run over dataset.limit_passages passages
            log.warning("%s: %d of %d passages have no triple (a partial extraction?): the methods over triples "
                        "see only the other %d", triples_ref, bare, len(ids), len(ids) - bare)
            warnings["passages_without_triples"] = bare
    return warnings


def load_dataset(
    path: str | Path,
    name: str = "",
    limit: int | None = None,
    triples_file: str | None = "triples.jsonl",
    missing_gold: str = "warn",
    subset: str = "first",
    subset_seed: int = 0,
    progress: bool = False,
) -> Dataset:
    """Load DIR/corpus.jsonl, DIR/questions.jsonl and DIR/<triples_file> if present.

    Gold ids absent from the corpus are counted and logged (``missing_gold='warn'``) or raise
    (``'error'``); they stay in ``gold_ids`` so recall is never silently inflated.
    ``limit`` keeps N questions (the corpus is always complete): the first N (``subset='first'``) or the
    stratified subset of size N (``subset='stratified'``, :mod:`gear_repro.data.subset`). ``progress``: reading
    bars for the large files (run.progress).
    """
    root = Path(path)
    if not root.is_dir():
        hint = ("`make samples` prepares the bundled 2Wiki and HotpotQA samples there" if root.parent.name == "prepared"
                else "prepare one with gear-repro-prepare")
        raise DataError(f"dataset folder not found: {root} ({hint})")
    corpus_path, q_path = root / "corpus.jsonl", root / "questions.jsonl"
    t_path = root / triples_file if triples_file else None
    # hashed before parsing: a folder mixing two data sets is refused as such, not by a record that does not fit
    hashes = {"corpus": hash_file(corpus_path) if corpus_path.is_file() else None,
              "questions": hash_file(q_path) if q_path.is_file() else None}
    read = {"corpus.jsonl": hashes["corpus"], "questions.jsonl": hashes["questions"]}
    if t_path is not None:
        hashes["triples"] = hash_file(t_path) if t_path.is_file() else None
        read[str(triples_file)] = hashes["triples"]
    check_prepared_files(root, read)
    hashes = {k: v for k, v in hashes.items() if v is not None}
    with progress_bars(progress):
        passages = load_corpus(corpus_path)
    questions = load_questions(q_path)
    n_all = len(questions)
    subset = choice(Subset, subset, "dataset.subset")
    missing_gold = choice(MissingGold, missing_gold, "dataset.missing_gold")
    if limit is not None and limit > 0:
        questions = questions[:limit] if subset == "first" else stratified_subset(questions, limit, subset_seed)
    triples = None
    if t_path is not None and "triples" in hashes:
        with progress_bars(progress):
            triples = load_triples(t_path)
    else:
        t_path = None
    warnings = check_links(passages, questions, triples, missing_gold, questions_ref=str(q_path),
                           corpus_ref=corpus_path.name, triples_ref=str(t_path))
    log.info("dataset %s: %d/%d questions, %d passages, %s triples", name or root.name, len(questions), n_all,
             len(passages), len(triples) if triples is not None else "no")
    if limit and limit > n_all:
        log.warning("dataset.limit=%d but %s holds %d questions: the run has all %d", limit, root / "questions.jsonl",
                    n_all, n_all)
    selection = question_selection(questions, subset, limit if limit and limit > 0 else None, subset_seed, n_all)
    return Dataset(name=name or root.name, path=root, passages=passages, questions=questions, triples=triples,
                   triples_path=t_path, hashes=hashes, warnings=warnings, selection=selection)

# the registry's declaration (gear_repro/registry.py): the dataset node's settings; Resources loads the data
COMPONENTS = (Component("dataset", "dataset_schema", DatasetSettings),)
