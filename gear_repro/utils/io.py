"""File I/O: JSONL that reports the failing line, and atomic writes (no corrupt files on interrupt)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gear_repro.utils.errors import DataError

_UMASK = os.umask(0)
os.umask(_UMASK)


def require_file(path: str | Path, what: str = "file") -> Path:
    p = Path(path)
    if not p.exists():
        raise DataError(f"{what} not found: {p}")
    if not p.is_file():
        raise DataError(f"{what} is not a file: {p}")
    return p


def require_dir_target(path: str | Path, what: str = "output folder") -> Path:
    """A folder to write into: it may not exist yet, but neither it nor a parent may be a file."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise DataError(f"{what} {p}: {q} is a file, not a folder")
            break
    return p


def _not_utf8(p: Path, data: bytes, e: UnicodeDecodeError, line_offset: int = 0) -> DataError:
    """DataError naming file, line and column of the first byte that is not UTF-8."""
    lineno = data.count(b"\n", 0, e.start) + 1 + line_offset
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return DataError(f"{p}:{lineno}: not UTF-8 text (byte 0x{data[e.start]:02x} at column {col}); "
                     "re-encode the file as UTF-8")


def read_text(path: str | Path) -> str:
    """A UTF-8 text file; bytes that are not UTF-8 raise DataError naming file and line."""
    p = require_file(path)
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(p, data, e) from None


def read_json(path: str | Path) -> Any:
    p = require_file(path)
    try:
        return json.loads(read_text(p))
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, record); a malformed or non-UTF-8 line raises DataError naming file and line."""
    p = require_file(path)
    with open(p, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _not_utf8(p, raw, e, line_offset=lineno - 1) from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{p}:{lineno}: malformed JSON line ({e.msg})") from e
            if not isinstance(rec, dict):
                raise DataError(f"{p}:{lineno}: expected a JSON object, got {type(rec).__name__}")
            yield lineno, rec


def read_jsonl(path: str | Path) -> list[dict]:
    return [rec for _, rec in iter_jsonl(path)]


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temp file in the same folder, then rename over the target."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    os.close(fd)
    try:
        kw = {} if "b" in mode else {"encoding": encoding}
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, obj: Any, indent: int = 2) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False, default=str)
        f.write("\n")


def write_jsonl(path: str | Path, records: Iterable[dict]) -> int:
    n = 0
    with atomic_open(path) as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
            n += 1
    return n


def repair_jsonl_tail(path: str | Path) -> bool:
    """Truncate a trailing partial line (left by a killed writer); True if something was cut."""
    p = Path(path)
    if not p.exists():
        return False
    with open(p, "rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)
            return True
    return False


class JsonlAppender:
    """Append-only JSONL log for resumable runs: each record is one flushed line.

    On open, a trailing partial line (from a killed process) is truncated away, so the file
    always holds whole records only.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl_tail(self.path)
        self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close()/__exit__)

    def write(self, rec: dict) -> None:
        self._f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
