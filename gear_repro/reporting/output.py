"""A report folder written as a whole (issue 23): never old figures beside new tables.

``with ReportDir(out, stem) as staging:`` the report is written into a temporary folder beside ``out``; on success it
gets ``report_files.json`` (the files it holds) and replaces ``out`` by renames, so a reused ``--out`` keeps nothing
of an earlier report (no stale ``claims.*`` or ``fig3_*``) and a killed report leaves the earlier one whole. ``out``
may hold only what a report wrote (listed in its ``report_files.json``, or named as report outputs are, for folders
from before the list existed); anything else is refused, so a report never deletes a user's files.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from gear_repro.utils.errors import GearError
from gear_repro.utils.io import UMASK, read_json_object, write_json

MANIFEST = "report_files.json"
_REPORT_NAMES = re.compile(r"^(table\d*_|claims\.|cost\.|tokens_by_stage\.|fig\d)")


def _method_table(name: str) -> bool:
    """A file of a method's own statistics table (its report hooks' ``summaries`` stems)."""
    from gear_repro.methods import report_hooks

    return Path(name).stem in {stem for h in report_hooks() for stem, _, _ in h.summaries}


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


def check_owned(out: Path, stem: str) -> None:
    """GearError naming the first file in ``out`` that no report wrote (see the module doc)."""
    if not out.is_dir():
        return
    listed = set(read_json_object(out / MANIFEST).get("files", [])) if (out / MANIFEST).is_file() else set()
    for name in _files(out):
        if name in listed or name == MANIFEST or ("/" not in name and (
                _REPORT_NAMES.match(name) or _method_table(name) or Path(name).stem == stem)):
            continue
        raise GearError(f"--out {out} holds {out / name}, which no report wrote; a report replaces its folder "
                        "as a whole: use a new or empty folder")


class ReportDir:
    """Context manager: yields the staging folder; on a clean exit publishes it as ``out`` (see the module doc).
    ``files`` then lists what was written, relative to ``out``."""

    def __init__(self, out: str | Path, stem: str = "table"):
        # a symlinked --out: the folder it points to is replaced (the link stays; it was replaced by a folder)
        self.out, self.stem = Path(out).resolve() if Path(out).is_symlink() else Path(out), stem
        self.files: list[str] = []

    def __enter__(self) -> Path:
        check_owned(self.out, self.stem)
        self.staging = Path(tempfile.mkdtemp(prefix=f".{self.out.name}.tmp-", dir=self.out.parent))
        os.chmod(self.staging, 0o777 & ~UMASK)  # mkdtemp's 0700 would keep a shared drive's readers out
        return self.staging

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            return
        try:
            self.files = _files(self.staging)
            write_json(self.staging / MANIFEST, {"files": self.files})
            old = self.out.with_name(f".{self.out.name}.old-{os.getpid()}")
            if self.out.exists():
                os.rename(self.out, old)
            os.rename(self.staging, self.out)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(self.staging, ignore_errors=True)
            raise

    def final(self, path: Path) -> Path:
        """Where a file written into the staging folder is now."""
        return self.out / Path(path).relative_to(self.staging)
