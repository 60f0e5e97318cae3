"""gear-repro-prepare: convert a native dataset into the canonical folder (docs/data.md).

    gear-repro-prepare --format FMT --questions FILE [--dataset NAME] [--corpus FILE] [--triples-hipporag FILE]
                       [--limit N] [--chunk-size N [--chunk-overlap M]] [--keep-unanswerable]
                       [--match-titles [--title-similarity R]] --out DIR

writes DIR/corpus.jsonl, DIR/questions.jsonl, DIR/triples.jsonl (with --triples-hipporag) and
DIR/prepare_stats.json, and prints the counts.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gear_repro.data.canonical import check_records, save_corpus, save_questions, save_triples
from gear_repro.data.chunking import chunk_corpus
from gear_repro.data.converters import DATASETS, FORMATS, TITLE_SIMILARITY, get_converter
from gear_repro.data.openie import import_hipporag_openie
from gear_repro.types import Passage, Question
from gear_repro.utils.errors import DataError, GearError
from gear_repro.utils.hashing import hash_file
from gear_repro.utils.io import progress_bars, require_dir_target, require_file, write_json

log = logging.getLogger("gear_repro.prepare")
_N_IDS = 20  # question ids listed in prepare_stats.json per warning


def _check_unique(passages: list[Passage], questions: list[Question]) -> None:
    for what, ids in (("passage", [p.id for p in passages]), ("question", [q.id for q in questions])):
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                raise DataError(f"duplicate {what} id '{i}' in the converted data")
            seen.add(i)


def prepare(fmt: str, questions: str | Path, out: str | Path, corpus: str | Path | None = None,
            triples_hipporag: str | Path | None = None, limit: int | None = None, chunk_size: int = 0,
            chunk_overlap: int = 0, dataset: str | None = None, keep_unanswerable: bool = False,
            match_titles: bool = False, title_similarity: float = TITLE_SIMILARITY) -> dict[str, Any]:
    """Convert, validate and write one dataset folder; returns the stats written to prepare_stats.json.
    ``chunk_size`` > 0 splits documents into overlapping word windows (gear_repro.data.chunking); ``dataset`` is
    the source dataset recorded for the folder (required for hipporag/ircot files not named after theirs);
    ``keep_unanswerable`` keeps MuSiQue-Full's ``answerable: false`` records, without answers and gold;
    ``match_titles`` matches title-only gold references loosely (converters.TitleMatcher; docs/data.md)."""
    if limit is not None and limit <= 0:
        raise DataError(f"--limit must be a positive number of questions, got {limit}")
    if chunk_overlap and not chunk_size:  # an overlap of no chunking: the folder would hold whole documents
        raise DataError(f"--chunk-overlap {chunk_overlap} needs --chunk-size (the overlap of the word windows "
                        "--chunk-size makes; without it documents are not split)")
    for what, path in (("questions file", questions), ("corpus file", corpus),
                       ("--triples-hipporag file", triples_hipporag)):
        if path is not None:
            require_file(path, what)
    require_dir_target(out, "--out")
    with prepare_lock(Path(out)):
        return _prepare(fmt, questions, Path(out), corpus, triples_hipporag, limit, chunk_size, chunk_overlap,
                        dataset, keep_unanswerable, match_titles, title_similarity)


def _prepare(fmt: str, questions: str | Path, out: Path, corpus: str | Path | None,
             triples_hipporag: str | Path | None, limit: int | None, chunk_size: int, chunk_overlap: int,
             dataset: str | None, keep_unanswerable: bool, match_titles: bool,
             title_similarity: float) -> dict[str, Any]:
    conv = get_converter(fmt)(questions, corpus=corpus, limit=limit, dataset=dataset,
                              keep_unanswerable=keep_unanswerable, match_titles=match_titles,
                              title_similarity=title_similarity)
    _check_unique(conv.passages, conv.questions)
    stats: dict[str, Any] = dict(conv.stats)
    stats["inputs_sha256_16"] = {k: hash_file(v) for k, v in
                                 (("questions", questions), ("corpus", corpus), ("triples_hipporag", triples_hipporag))
                                 if v is not None}
    stats["limit"] = limit
    triples = None
    if triples_hipporag is not None:
        triples, tstats = import_hipporag_openie(triples_hipporag, conv.passages)
        stats["triples"] = tstats
    passages, qs = conv.passages, conv.questions
    if chunk_size:
        passages, qs, triples, stats["chunking"] = chunk_corpus(passages, qs, triples, chunk_size, chunk_overlap)
    check_records(passages, qs, triples, str(questions))  # the loader's checks: what prepare writes loads
    no_answer = [q.id for q in qs if not q.answers]
    if no_answer:  # recall works; QA (qa=true) refuses such a dataset at start-up
        log.warning("%d questions have no gold answer (first: '%s'): EM/F1 cannot score them and qa=true will "
                    "refuse this dataset", len(no_answer), no_answer[0])
        stats["questions_without_answers_ids"] = no_answer[:_N_IDS]
    _write_folder(out, passages, qs, triples, stats)
    return stats


LOCK = ".prepare.lock"  # flock'ed by the prepare writing the folder


@contextlib.contextmanager
def prepare_lock(out: Path) -> Iterator[None]:
    """Hold an exclusive flock of ``out/.prepare.lock`` for the whole prepare, or raise a DataError naming the
    process that holds it: two prepares into one folder interleaved their files (both exited 0, the folder mixed
    two data sets). A killed holder releases the flock with its process. The folder is created here and removed
    again when the prepare fails before writing anything into it."""
    import fcntl

    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK
    fd = -1
    try:
        for _ in range(10):
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
                raise DataError(f"--out {out} is being written by another gear-repro-prepare (process {holder}; "
                                f"{path}): wait for it to finish, or prepare into another folder") from None
            except OSError as e:
                if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                log.warning("%s: no flock on this file system (%s): a concurrent prepare into it is not refused",
                            path, e)
            try:  # the file we locked may have been removed by the holder that just finished: lock the new one
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
            fd = -1
        else:
            raise DataError(f"could not lock {path}: other prepares keep replacing it")
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        if fd >= 0:
            path.unlink(missing_ok=True)  # while still held: a prepare waiting on it re-checks the path
            os.close(fd)
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()


STAGING = ".prepare-tmp-"  # the folder inside --out the files are written into before they replace the old ones


def _write_folder(out: Path, passages: list[Passage], questions: list[Question], triples: list | None,
                  stats: dict[str, Any]) -> None:
    """Write the folder's files into a staging folder inside ``out``, record their hashes in prepare_stats.json
    (``files_sha256_16``), then move prepare_stats.json into place first and the data files after it. The loader
    refuses a folder whose recorded files are not those (data/dataset.py ``check_prepared_files``), so a prepare
    killed at any point leaves the old folder or one that is refused, never a corpus beside another data set's
    questions or triples. A staging folder left by a killed prepare is removed."""
    import shutil
    import tempfile

    from gear_repro.utils.lock import process_start

    for old in out.glob(f"{STAGING}*"):  # a killed prepare's (its process gone)
        pid = old.name[len(STAGING):].split("-", 1)[0]
        if old.is_dir() and (not pid.isdigit() or process_start(int(pid)) is None):
            shutil.rmtree(old, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=out))
    try:
        save_corpus(staging / "corpus.jsonl", passages)
        save_questions(staging / "questions.jsonl", questions)
        names = ["corpus.jsonl", "questions.jsonl"]
        if triples is not None:
            save_triples(staging / "triples.jsonl", triples)
            names.append("triples.jsonl")
        stats["files_sha256_16"] = {name: hash_file(staging / name) for name in names}
        if triples is None and (out / "triples.jsonl").exists():  # another dataset's triples with this corpus
            stats["removed_stale"] = ["triples.jsonl"]
        write_json(staging / "prepare_stats.json", stats)
        if triples is None and (out / "triples.jsonl").exists():
            # before the new record: unrecorded, they would load as a stage=extract's copied in
            (out / "triples.jsonl").unlink()
            log.warning("removed %s left by an earlier prepare (this one imports no triples)", out / "triples.jsonl")
        for name in ["prepare_stats.json", *names]:
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _summary(stats: dict[str, Any], out: Path) -> str:
    lines = [
        f"dataset: {stats['dataset']} (from the {stats['dataset_from']})",
        f"questions: {stats['questions']} (of {stats['questions_in_file']} in file)",
        f"passages: {stats['passages']} ({stats['corpus_source']})",
        f"gold passages: {stats['gold_refs']} referenced, {stats['gold_found']} found, "
        f"{stats['gold_not_found']} not found",
        f"questions with all gold found: {stats['questions_all_gold_found']}, some missing: "
        f"{stats['questions_some_gold_missing']}, none found: {stats['questions_no_gold_found']}, "
        f"no gold: {stats['questions_without_gold']}",
        f"types: {stats['types']}",
    ]
    if any((stats.get("nfc_normalised") or {}).values()):
        lines.append("NFC-normalised (Unicode form; BM25 splits words in another form): " + ", ".join(
            f"{n} {kind.replace('_', ' ')}" for kind, n in stats["nfc_normalised"].items()))
    tm = stats.get("title_matching") or {}
    if tm.get("enabled"):
        lines.append(f"title matching (--match-titles): {sum(tm['matched'].values())} references matched "
                     f"{tm['matched']}, {tm['ambiguous']} ambiguous left missing; listed in prepare_stats.json")
    if stats.get("unanswerable_dropped"):
        lines.append(f"unanswerable (answerable: false): {stats['unanswerable_dropped']} dropped "
                     "(--keep-unanswerable keeps them)")
    if stats.get("unanswerable_kept"):
        lines.append(f"unanswerable (answerable: false): {stats['unanswerable_kept']} kept without answers or gold "
                     "(EM/F1 and recall skip them, as MuSiQue's evaluation does; qa=true refuses this folder)"
                     + (f"; {stats['unanswerable_renamed']} sharing their question's id kept as <id>__unanswerable"
                        if stats.get("unanswerable_renamed") else ""))
    if stats.get("questions_without_answers"):
        lines.append(f"WARNING: {stats['questions_without_answers']} questions have no gold answer (EM/F1 cannot score "
                     f"them; qa=true refuses them), e.g. {stats['questions_without_answers_ids'][0]}")
    if stats.get("removed_stale"):
        lines.append(f"removed stale {', '.join(stats['removed_stale'])} from an earlier prepare")
    t = stats.get("triples")
    if t:
        lines += [
            f"triples: {t['triples_kept']} kept, {t['triples_dropped']} dropped {t['dropped_by_reason']} "
            f"(of {t['triples_in_file']} in file)",
            f"openie docs: {t['docs_matched']}/{t['docs']} matched; passages without triples: "
            f"{t['passages_without_triples']}",
        ]
        if t.get("nfc_normalised"):
            lines.append(f"NFC-normalised: {t['nfc_normalised']} triple parts")
    c = stats.get("chunking")
    if c:
        lines.append(f"chunks: {c['chunks']} from {c['documents']} documents ({c['documents_split']} split; "
                     f"{c['chunk_size']} words, overlap {c['chunk_overlap']})")
    lines.append(f"wrote {out}/")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gear-repro-prepare", description=__doc__.split("\n\n")[0])
    ap.add_argument("--format", required=True, choices=list(FORMATS), help="native format of --questions")
    ap.add_argument("--questions", required=True, help="questions file (JSON list or JSONL)")
    ap.add_argument("--dataset", choices=DATASETS,
                    help="source dataset, recorded for the folder (runs check it against their dataset group); "
                         "fixed by --format musique/hotpotqa/2wiki/2wiki_hipporag, else taken from the file name "
                         "(HippoRAG's <dataset>.json, IRCoT's processed_data/<dataset>/); required when it names "
                         "none")
    ap.add_argument("--corpus", help="corpus file, list of {title, text[, idx]}; default: union of paragraphs")
    ap.add_argument("--triples-hipporag", help="HippoRAG OpenIE results file to import as triples.jsonl")
    ap.add_argument("--limit", type=int, help="keep the first N questions")
    ap.add_argument("--chunk-size", type=int, default=0,
                    help="split documents into windows of this many words (default 0 = no chunking)")
    ap.add_argument("--chunk-overlap", type=int, default=0, help="words shared by neighbouring chunks (default 0)")
    ap.add_argument("--keep-unanswerable", action="store_true",
                    help="keep MuSiQue-Full's answerable: false questions, without answers and gold passages "
                         "(default: drop and count them)")
    ap.add_argument("--match-titles", action="store_true",
                    help="match a title-only gold reference (2Wiki evidence subjects) that no corpus title equals: "
                         "trailing ' (...)' dropped, middle words dropped, then a close spelling; each mapping "
                         "listed in prepare_stats.json (default: off, such references stay missing)")
    ap.add_argument("--title-similarity", type=float, default=TITLE_SIMILARITY,
                    help=f"difflib ratio a close spelling needs, in [0.5, 1.0] (default {TITLE_SIMILARITY})")
    ap.add_argument("--out", required=True, help="output dataset folder")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                    help="bars (rate, ETA) over reading, matching, checking and writing a large dataset (default on)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        with progress_bars(args.progress):
            stats = prepare(args.format, args.questions, args.out, corpus=args.corpus,
                            triples_hipporag=args.triples_hipporag, limit=args.limit,
                            chunk_size=args.chunk_size, chunk_overlap=args.chunk_overlap, dataset=args.dataset,
                            keep_unanswerable=args.keep_unanswerable, match_titles=args.match_titles,
                            title_similarity=args.title_similarity)
    except GearError as e:
        print(f"gear-repro-prepare: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # e.g. no permission to write --out
        print(f"gear-repro-prepare: error: {e.strerror or e}: {e.filename or args.out}", file=sys.stderr)
        return 2
    print(_summary(stats, Path(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
