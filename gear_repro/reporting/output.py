"""A report folder written as a whole: never old figures beside new tables.

``with ReportDir(out, stem) as staging:`` the report is written into a temporary folder beside ``out``; on success it
gets ``report_files.json`` (the files it holds) and replaces ``out`` by renames, so a reused ``--out`` keeps nothing
of an earlier report (no stale ``claims.*`` or ``fig3_*``) and a killed report leaves the earlier one whole. ``out``
may hold only the files its own ``report_files.json`` lists; anything else is refused (a file named like a report's
output too: ``fig1.pdf`` or ``table_main.tex`` may be the user's), at the start and again just before the new report
replaces ``out``, and only the listed files of the earlier report are deleted (a file written into ``out`` after that
second check moves into the new folder), so a report never deletes a user's files. The staging folder of a killed
report is removed by the next report into the same ``out``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

from gear_repro.utils.errors import GearError
from gear_repro.utils.io import UMASK, read_json_object, write_json

MANIFEST = "report_files.json"
log = logging.getLogger(__name__)


# the stems of the report's other .md/.csv/.tex files (evidence, analyses, claims, figures, failures): a --stem of
# one of them overwrote that file or was overwritten by it (``--stem failures``: Table 2 in failures.md, the failures
# gone; ``--stem cost``: a pandas KeyError)
RESERVED_STEMS = ("cost", "claims", "failures", "figures", "tokens_by_stage", "table12_density",
                  "table12_density_wide", "table9_rounds")


def check_stem(stem: str) -> None:
    """GearError unless ``stem`` names a file no other output of the report has (``--stem``)."""
    from gear_repro.methods import report_hooks

    taken = {*RESERVED_STEMS, *(s for h in report_hooks() for s, _, _ in h.summaries)}
    if stem in taken:
        raise GearError(f"--stem {stem} is the name of another file of the report ({stem}.md/.csv); the tables would "
                        f"overwrite it or be overwritten: choose another stem (taken: {', '.join(sorted(taken))})")


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _unlisted(folder: Path) -> list[str]:
    """The files in a report folder that its ``report_files.json`` does not list (relative paths)."""
    listed = set(read_json_object(folder / MANIFEST).get("files", [])) if (folder / MANIFEST).is_file() else set()
    return [name for name in _files(folder) if name not in listed and name != MANIFEST]


def check_owned(out: Path, stem: str = "table", *, during: bool = False) -> None:
    """GearError naming the first file in ``out`` that its ``report_files.json`` does not list (see the module doc).
    ``stem``: the report's ``--stem`` (kept for callers; a file's name never makes it the report's); ``during``: the
    check before publishing (the file appeared while the report ran)."""
    if not out.is_dir():
        return
    for name in _unlisted(out)[:1]:
        when = " (written while this report ran; the report was not written)" if during else ""
        raise GearError(f"--out {out} holds {out / name}, which no report wrote{when}; a report replaces its folder "
                        "as a whole: use a new or empty folder")


def _remove_report(folder: Path) -> list[str]:
    """Delete the files ``folder``'s ``report_files.json`` lists (and it), and the folders left empty; returns the
    files kept (not the report's: a user's file written into it). ``folder`` itself goes when nothing is kept."""
    kept = _unlisted(folder)
    if not kept:
        shutil.rmtree(folder, ignore_errors=True)
        return []
    keep = {folder / k for k in kept}
    for path in sorted(folder.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        if path.is_file() and path not in keep:
            path.unlink(missing_ok=True)
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    return kept


def _owner_gone(folder: Path) -> bool:
    """Whether the report process that named ``folder`` (``.<out>.tmp-<pid>-...`` / ``.<out>.old-<pid>``) is gone."""
    from gear_repro.utils.lock import process_start

    found = re.search(r"\.(?:tmp|old)-(\d+)", folder.name)
    return found is None or int(found.group(1)) == os.getpid() or process_start(int(found.group(1))) is None


def clean_leftovers(out: Path) -> list[Path]:
    """Remove the staging folders (``.<out>.tmp-*``) and set-aside earlier reports (``.<out>.old-*``) that a killed
    report left beside ``out``, when the process that made them is gone; an earlier report set aside while ``out``
    itself is missing (killed between the two renames) is put back first. Returns what was removed."""
    removed = []
    if not out.parent.is_dir():
        return removed
    for folder in sorted(out.parent.glob(f".{out.name}.old-*")):
        if folder.is_dir() and _owner_gone(folder):
            if not out.exists():
                os.rename(folder, out)
                continue
            if not _remove_report(folder):
                removed.append(folder)
    for folder in sorted(out.parent.glob(f".{out.name}.tmp-*")):
        if folder.is_dir() and _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def report_target(out: str | Path) -> Path:
    """``--out`` as the folder a report replaces (absolute when it has no name to stage beside, ``--out ..``; a
    symlink followed); a GearError when it is the folder the command runs in or one above it (replacing it would move the
    working folder away)."""
    path = Path(out).resolve()
    cwd = Path.cwd().resolve()
    if path == cwd or path in cwd.parents:
        raise GearError(f"--out {out} is the folder the report runs in{'' if path == cwd else ' or above it'} "
                        f"({path}); a report replaces its --out folder as a whole: name a folder of its own "
                        "(e.g. --out report)")
    return path if Path(out).is_symlink() or not Path(out).name or Path(out).name == ".." else Path(out)


class ReportDir:
    """Context manager: yields the staging folder; on a clean exit publishes it as ``out`` (see the module doc).
    ``files`` then lists what was written, relative to ``out``."""

    def __init__(self, out: str | Path, stem: str = "table"):
        # a symlinked --out: the folder it points to is replaced (the link stays; it was replaced by a folder)
        self.out, self.stem = report_target(out), stem
        self.files: list[str] = []

    def __enter__(self) -> Path:
        clean_leftovers(self.out)
        check_owned(self.out, self.stem)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-{os.getpid()}-", dir=self.out.parent))
        os.chmod(self.staging, 0o777 & ~UMASK)  # mkdtemp's 0700 would keep a shared drive's readers out
        return self.staging

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            return
        try:
            check_owned(self.out, self.stem, during=True)  # a file the user wrote there meanwhile
            self.files = _files(self.staging)
            write_json(self.staging / MANIFEST, {"files": self.files})
            old = self.out.with_name(f".{self.out.name}.old-{os.getpid()}")
            if self.out.exists():
                os.rename(self.out, old)
            os.rename(self.staging, self.out)
        except BaseException:
            shutil.rmtree(self.staging, ignore_errors=True)
            raise
        if old.exists():
            self._keep_late_files(old)

    def _keep_late_files(self, old: Path) -> None:
        """Remove the earlier report set aside as ``old``, but only its files: one written into ``out`` between the
        check above and the rename goes into the new ``out`` (the next report then names it), or, where the new
        report has a file of that name, stays in ``old`` with a warning."""
        for name in _remove_report(old):
            target = self.out / name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(old / name, target)
        if old.exists():
            if not _remove_report(old):
                return
            log.warning("kept %s: written into --out while the report ran, beside files of the same name the "
                        "report wrote", ", ".join(str(old / n) for n in _unlisted(old)))

    def final(self, path: Path) -> Path:
        """Where a file written into the staging folder is now."""
        return self.out / Path(path).relative_to(self.staging)
