"""File I/O: JSONL that reports the failing line, and atomic writes (no corrupt files on interrupt)."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from gear_repro.utils.errors import DataError, OutputError

log = logging.getLogger(__name__)

UMASK = os.umask(0)  # the process umask (read once: os.umask can only be read by setting it)
os.umask(UMASK)


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


def require_writable_dir(path: str | Path, what: str = "output folder", create: bool = True) -> Path:
    """A folder this process can write into, created if missing (``create=False``: the nearest existing folder on
    its path is probed instead): OutputError naming the path otherwise (a file in the way, a read-only file
    system, no permission, a full disk)."""
    p = require_dir_target(path, what)
    try:
        if create:
            p.mkdir(parents=True, exist_ok=True)
        probe_dir = p if create else next(q for q in (p, *p.absolute().parents) if q.exists())
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=probe_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise OutputError(f"{what} {p}: cannot write there ({e.strerror or e})") from None
    return p


def output_error(path: str | Path, e: OSError) -> OutputError:
    """One line naming the file a write failed on and why (``[Errno 28] ...`` becomes "No space left on device")."""
    return OutputError(f"cannot write {e.filename or path}: {e.strerror or e}")


NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)  # a full disk, a full quota, a read-only file system


def write_failure(e: BaseException | None) -> OutputError | None:
    """The failed write behind ``e``, if any (through its causes): an OutputError, or an OSError of :data:`NO_ROOM`
    as one naming its file. A run stops at it: every later question would redo its work (a corpus encode) and fail
    at the same write."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OutputError):
            return e
        if isinstance(e, OSError) and e.errno in NO_ROOM:
            return output_error(e.filename, e) if e.filename else OutputError(
                f"a write failed: {e.strerror or e} (the traceback in the run's log shows where)")
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return None


def _not_utf8(p: Path, data: bytes, e: UnicodeDecodeError, line_offset: int = 0) -> DataError:
    """DataError naming file, line and column of the first byte that is not UTF-8."""
    lineno = data.count(b"\n", 0, e.start) + 1 + line_offset
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return DataError(f"{p}:{lineno}: not UTF-8 text (byte 0x{data[e.start]:02x} at column {col}); "
                     "re-encode the file as UTF-8")


BAR_MIN_BYTES = 32 * 2**20  # a file read or written in about a second: no bar
BAR_MIN_RECORDS = 100_000  # a loop over fewer records: no bar
_BARS: ContextVar[bool] = ContextVar("gear_repro_progress_bars", default=False)


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[None]:
    """Inside the block, reading or writing a file of at least BAR_MIN_BYTES and the record loops that ask
    :func:`record_bar` show tqdm bars with rate and ETA (run.progress; gear-repro-prepare): at the paper's corpus
    size these steps take tens of seconds each (docs/scale.md)."""
    token = _BARS.set(enabled)
    try:
        yield
    finally:
        _BARS.reset(token)


def file_bar(path: Path, verb: str) -> Any:
    """A tqdm bar over the bytes of ``path`` (``verb`` it: reading), shown under :func:`progress_bars` when the
    file is large."""
    from tqdm import tqdm

    size = path.stat().st_size
    return tqdm(total=size, desc=f"{verb} {path.name}", unit="B", unit_scale=True, unit_divisor=1024,
                disable=not _BARS.get() or size < BAR_MIN_BYTES)


def record_bar(total: int, desc: str, unit: str = "record") -> Any:
    """A tqdm bar over ``total`` records, shown under :func:`progress_bars` when there are many."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True,
                disable=not _BARS.get() or total < BAR_MIN_RECORDS)


def read_text(path: str | Path) -> str:
    """A UTF-8 text file; bytes that are not UTF-8 raise DataError naming file and line. Under
    :func:`progress_bars`, a large file is read in pieces under a bar."""
    p = require_file(path)
    with open(p, "rb") as f, file_bar(p, "reading") as bar:
        pieces = []
        while piece := f.read(8 * 2**20):
            pieces.append(piece)
            bar.update(len(piece))
    data = b"".join(pieces)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _not_utf8(p, data, e) from None


def read_json(path: str | Path) -> Any:
    p = require_file(path)
    text = read_text(p)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    if "\\ud" in text.lower():
        _check_surrogates(data, str(p))
    return data


def _surrogate_at(data: Any, at: str = "") -> str | None:
    """Where in ``data`` a string holds a lone UTF-16 surrogate (``[3].text``, ``text``), else None."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return at or "the value"
        return None
    if isinstance(data, dict):
        items = ((f"{at}.{k}" if at else str(k), v) for k, v in data.items())
    elif isinstance(data, list | tuple):
        items = ((f"{at}[{i}]", v) for i, v in enumerate(data))
    else:
        return None
    return next((found for key, v in items if (found := _surrogate_at(v, key)) is not None), None)


def _check_surrogates(data: Any, where: str) -> None:
    """DataError naming ``where`` and the record and field when a ``\\ud800``-``\\udfff`` escape (or a Python string)
    holds a lone surrogate: no UTF-8 text, so every later write or hash of it would fail."""
    found = _surrogate_at(data)
    if found is not None:
        raise DataError(f"{where}: {found}: a \\uXXXX escape encodes a lone UTF-16 surrogate (not text; a character "
                        "cut in half where the data was made: fix or drop it)")


def check_text(record: Any, where: str) -> None:
    """DataError naming ``where`` and the field when a record from memory holds a lone surrogate (as
    :func:`iter_jsonl` checks a file's lines)."""
    _check_surrogates(record, where)


def json_kind(value: Any) -> str:
    """JSON's name for the type of a parsed value (``null``, ``array``, ``string``, ...), for error messages."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__)


def read_json_object(path: str | Path) -> dict:
    """:func:`read_json` of a file that must hold one JSON object (metrics.json, run.json, ...): anything else (a
    ``null``, a list, a number left by an edit or a damaged disk) is a DataError naming the file."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object, got {json_kind(data)}")
    return data


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, record); a malformed or non-UTF-8 line raises DataError naming file and line. Under
    :func:`progress_bars`, a large file is read under a bar over its bytes."""
    p = require_file(path)
    with open(p, "rb") as f, file_bar(p, "reading") as bar:
        for lineno, raw in enumerate(f, start=1):
            bar.update(len(raw))
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
            if "\\ud" in line.lower():
                _check_surrogates(rec, f"{p}:{lineno}")
            if not isinstance(rec, dict):
                raise DataError(f"{p}:{lineno}: expected a JSON object, got {json_kind(rec)}")
            yield lineno, rec


def read_jsonl(path: str | Path) -> list[dict]:
    return [rec for _, rec in iter_jsonl(path)]


T = TypeVar("T")

# what loading a torn, truncated or foreign cache entry raises (numpy, zipfile, json, bm25s, scipy)
CACHE_LOAD_ERRORS = (OSError, ValueError, EOFError, KeyError, IndexError, TypeError, zipfile.BadZipFile)


def load_cached(path: str | Path, load: Callable[[Path], T], what: str) -> T | None:
    """``load(path)`` of a cache entry, or None after removing an entry that cannot be read (a killed writer on a
    file system without atomic rename, a disk error, a hand edit): logged with its path, then rebuilt by the
    caller, where every question would otherwise fail on it again at each re-run."""
    p = Path(path)
    try:
        return load(p)
    except CACHE_LOAD_ERRORS as e:
        log.warning("damaged %s cache entry %s (%s: %s): removed, rebuilding it", what, p, type(e).__name__,
                    str(e)[:200])
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        return None


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temp file's path in the target's folder, written by the caller by any means (a memory map too), then
    renamed over the target; removed when the block raises. An OSError names the target (:func:`output_error`)."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as e:
        raise output_error(p, e) from None
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~UMASK)  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, p)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise output_error(p, e) from None
        raise


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8"):
    """Write to a temp file in the same folder, then rename over the target (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        kw = {} if "b" in mode else {"encoding": encoding}
        with open(tmp, mode, **kw) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())


def write_json(path: str | Path, obj: Any, indent: int = 2) -> None:
    with atomic_open(path) as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False, default=str)
        f.write("\n")


def write_jsonl(path: str | Path, records: Iterable[dict], total: int = 0) -> int:
    """Write ``records`` one per line, atomically; the count written. ``total`` (when known) sizes the bar that
    :func:`progress_bars` shows for many records."""
    n = 0
    with atomic_open(path) as f, record_bar(total, f"writing {Path(path).name}") as bar:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
            n += 1
            bar.update()
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            repair_jsonl_tail(self.path)
            self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close()/__exit__)
        except OSError as e:
            raise output_error(self.path, e) from None

    def write(self, rec: dict) -> None:
        self.write_many([rec])

    def write_many(self, recs: list[dict]) -> None:
        """Append ``recs`` and make them durable with one fsync (an fsync costs ~3 ms on a local disk: one per line
        capped the extraction at ~30 passages/s, its ~9 triples a passage each synced alone)."""
        if not recs:
            return
        text = "".join(json.dumps(rec, ensure_ascii=False, default=str) + "\n" for rec in recs)
        try:
            self._f.write(text)
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:  # a partial line is cut by the next open (repair_jsonl_tail)
            raise output_error(self.path, e) from None

    def close(self) -> None:
        with contextlib.suppress(OSError):  # every record was flushed by write(); a failed one raised there
            self._f.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
