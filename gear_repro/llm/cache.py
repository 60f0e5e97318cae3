"""Persistent LLM reply cache keyed by (model, endpoint, messages, params): re-runs cost nothing, replays are exact.

One SQLite file (busy timeout) under ``$GEAR_CACHE/llm_cache``: safe for many threads and processes writing
at once. ``llm.cache_mode`` picks SQLite's journal (docs/sweeps.md, "The LLM reply cache on a shared file system"):
``wal`` (write-ahead log: readers never block the writer, but its shared-memory index only works when every
process is on one machine), ``journal`` (rollback journal under POSIX file locks, which NFSv4/Lustre/GPFS honour
across machines) or ``auto`` (default: ``journal`` when the cache directory is on a network file system, else
``wal``). Every process that shares a cache file must use the same journal. Keys are sha256 of the canonical JSON of the request. What identifies a model
(docs/llm.md, "Cache"): its served name plus the endpoint that serves it (``llm.base_url``, else ``OPENAI_BASE_URL``,
without credentials: :func:`served_base_url`),
so two servers serving the same model name never share replies; the hosted OpenAI API and the harness-started
local server (``llm.server``) are identified by the model name alone. No API key enters the key or the row.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gear_repro.utils.errors import ConfigError, GearError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, check_number, choice

log = logging.getLogger(__name__)
_UNKNOWN_HOLDER = "a process not in this machine's lock table (another machine on a network file system?)"


def request_key(model: str, messages: list[dict], params: dict[str, Any], endpoint: str | None = None) -> str:
    """Cache key of one chat request (full sha256 of canonical JSON); ``endpoint`` None = the model name alone
    identifies the model (hosted OpenAI, the harness's own local server: keys as before the endpoint counted)."""
    request: dict[str, Any] = {"model": model, "messages": messages, "params": params}
    if endpoint is not None:
        request["endpoint"] = endpoint
    return hash_obj(request, n=64)


def endpoint_identity(base_url: str | None) -> str | None:
    """The endpoint part of a model's identity: ``base_url`` without credentials (userinfo, secret query parameters
    such as ``?key=``) or a trailing slash (None: none)."""
    if not base_url:
        return None
    from urllib.parse import urlsplit, urlunsplit

    from gear_repro.utils.secrets import mask_url_params

    parts = urlsplit(base_url.strip())
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return mask_url_params(urlunsplit((parts.scheme.lower(), host.lower(), parts.path.rstrip("/"), parts.query, "")))


HOSTED_URL = "https://api.openai.com/v1"  # the OpenAI SDK's endpoint when neither base_url nor OPENAI_BASE_URL is set


def served_base_url(base_url: str | None, starts_server: bool = False,
                    environ: Mapping[str, str] | None = None) -> str | None:
    """The URL that serves the model, as the OpenAI SDK picks it: ``llm.base_url``, else (no harness-started server)
    the ``OPENAI_BASE_URL`` of ``environ`` (default: this process's); None for the hosted API (the variable unset or
    naming it), whose model name alone identifies it. So a second endpoint given by the environment is never served
    the first one's cached replies, nor resumes its run."""
    if base_url:
        return str(base_url)
    if starts_server:
        return None
    url = (os.environ if environ is None else environ).get("OPENAI_BASE_URL") or None
    return None if url is None or endpoint_identity(url) == endpoint_identity(HOSTED_URL) else url


# file system types (/proc/mounts) shared between machines: SQLite's WAL index does not work on them
NETWORK_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "ocfs2", "gfs2",
    "afs", "panfs", "9p", "fuse.glusterfs", "fuse.sshfs", "fuse.cephfs", "fuse.s3fs", "fuse.gcsfuse", "wekafs",
})


class LLMCacheMode(Choice):
    """SQLite journal of the reply cache (llm.cache_mode)."""

    auto = "auto"  # journal when the cache directory is on a network file system (/proc/mounts), else wal
    wal = "wal"  # SQLite write-ahead log: processes of one machine only
    journal = "journal"  # rollback journal + POSIX locks: safe on NFS/Lustre/GPFS shared by several nodes


def filesystem_type(path: str | Path, mounts: str | Path = "/proc/mounts") -> str | None:
    """Type of the file system holding ``path``: the entry of ``mounts`` with the longest mount point that contains
    it (None when the table cannot be read, e.g. not Linux)."""
    target = os.path.realpath(path)
    best, best_type = "", None
    try:
        lines = Path(mounts).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, best_type = point, parts[2]
    return best_type


def resolve_cache_mode(mode: str, directory: str | Path, mounts: str | Path = "/proc/mounts") -> str:
    """``wal`` or ``journal`` for ``llm.cache_mode`` (``auto``: journal on a network file system, else wal)."""
    mode = choice(LLMCacheMode, mode, "llm.cache_mode").value
    if mode != "auto":
        return mode
    return "journal" if filesystem_type(directory, mounts) in NETWORK_FILE_SYSTEMS else "wal"


# the range of llm.cache_lock_timeout_s: how long one cache access waits in all for a lock another process holds
LOCK_TIMEOUT_RANGE = {"gt": 0, "ge": None, "le": 86400, "lt": None}
_LOCK_SLICE_S = 5.0  # SQLite's busy timeout per try: a wait longer than this is logged, naming the holder
_LOCK_LOG_EVERY_S = 60.0  # then said again this often while it lasts


class LLMCacheLocked(GearError):
    """The reply cache stayed locked by another process for ``llm.cache_lock_timeout_s``."""


def lock_holders(path: str | Path, locks: str | Path = "/proc/locks") -> list[str]:
    """Who holds a POSIX lock on the SQLite file ``path`` or its ``-wal``/``-shm``/``-journal`` companions, from the
    kernel's lock table (Linux ``/proc/locks``): ``pid N (command line)`` per process, write locks first; [] when the
    table cannot be read or lists none (a process on another machine of a network file system)."""
    inodes = set()
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            st = os.stat(f"{path}{suffix}")
            inodes.add(st.st_ino)
    try:
        lines = Path(locks).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    writers: dict[int, None] = {}
    readers: dict[int, None] = {}
    for line in lines:
        parts = line.split()
        if "->" in parts:  # a waiter (blocked on the lock), not a holder
            continue
        if len(parts) < 6 or not parts[4].lstrip("-").isdigit():
            continue
        try:
            inode = int(parts[5].rsplit(":", 1)[-1])
        except ValueError:
            continue
        pid = int(parts[4])
        if inode in inodes and pid > 0:
            (writers if parts[3] == "WRITE" else readers)[pid] = None
    return [_describe_pid(pid) for pid in [*writers, *(p for p in readers if p not in writers)]]


def _describe_pid(pid: int) -> str:
    """``pid N (its command line)``, ``this process`` for our own (another thread's connection)."""
    if pid == os.getpid():
        return f"pid {pid} (this process)"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    from gear_repro.utils.secrets import redact_text

    return f"pid {pid} ({redact_text(cmd)[:160]})" if cmd else f"pid {pid}"


class LLMCache:
    """``get(key) -> dict | None`` and ``put(key, model, value)`` over a shared SQLite file; ``mode`` = llm.cache_mode;
    ``lock_timeout_s`` (llm.cache_lock_timeout_s) bounds how long one access waits for another process's lock in all:
    past ``_LOCK_SLICE_S`` the wait is logged naming the file and the holder, past the bound it is an
    :class:`LLMCacheLocked` error (before, 60 s of busy timeout x 20 tries per access passed in silence)."""

    def __init__(self, directory: str | Path | None = None, mode: str = "auto", lock_timeout_s: float = 300.0):
        self.dir = Path(directory) if directory else cache_dir() / "llm_cache"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "cache.sqlite3"
        self.mode = resolve_cache_mode(mode, self.dir)
        check_number("llm.cache_lock_timeout_s", lock_timeout_s, LOCK_TIMEOUT_RANGE)
        self.lock_timeout_s = float(lock_timeout_s)
        self._local = threading.local()
        try:
            self._retry(lambda: self._conn().execute(
                "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, value TEXT, created REAL)"))
            self._retry(lambda: self._conn().execute("SELECT key FROM replies LIMIT 1").fetchall())
        except sqlite3.DatabaseError as e:  # not OperationalError's locks: a damaged or foreign file
            if isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e)):
                raise
            raise ConfigError(f"{self.path} is not a readable reply cache ({type(e).__name__}: {e}); it is kept (its "
                              f"replies may be recoverable: sqlite3 {self.path} .recover); move it aside or set "
                              "llm.cache_dir to another folder") from None

    def _retry(self, fn: Any) -> Any:
        """Run ``fn``, trying again while another process holds a lock, for ``lock_timeout_s`` in all (each try waits
        up to SQLite's busy timeout); the wait is logged once it passes ``_LOCK_SLICE_S`` (and every
        ``_LOCK_LOG_EVERY_S`` after), naming the file and who holds it; then :class:`LLMCacheLocked`."""
        t0 = time.monotonic()
        said = 0.0
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                waited = time.monotonic() - t0
                if waited >= self.lock_timeout_s:
                    holders = lock_holders(self.path)
                    raise LLMCacheLocked(
                        f"the LLM reply cache {self.path} stayed locked for {waited:.0f} s "
                        f"(llm.cache_lock_timeout_s={self.lock_timeout_s:g}), held by "
                        f"{', '.join(holders) if holders else _UNKNOWN_HOLDER}: end or wait for that process, or "
                        "give this run its own cache (llm.cache_dir)") from None
                if waited >= _LOCK_SLICE_S and waited - said >= (_LOCK_LOG_EVERY_S if said else _LOCK_SLICE_S):
                    said = waited
                    holders = lock_holders(self.path)
                    log.warning("waiting %.0f s so far for the LLM reply cache %s, locked by %s (gives up after "
                                "llm.cache_lock_timeout_s=%g s)", waited, self.path,
                                ", ".join(holders) if holders else _UNKNOWN_HOLDER, self.lock_timeout_s)
                time.sleep(0.05)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # short busy timeouts: _retry bounds the whole wait (lock_timeout_s) and says what it waits on
            slice_s = min(_LOCK_SLICE_S, self.lock_timeout_s)
            conn = sqlite3.connect(self.path, timeout=slice_s, isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={int(slice_s * 1000)}")
            want = "wal" if self.mode == "wal" else "delete"  # a journal change needs a brief exclusive lock
            try:
                got = str(self._retry(lambda: conn.execute(f"PRAGMA journal_mode={want}").fetchone()[0])).lower()
            except (sqlite3.OperationalError, LLMCacheLocked):
                got = "wal (held by another process)"
            if got != want:
                conn.close()
                raise ConfigError(f"{self.path}: SQLite journal is {got}, not {want} (llm.cache_mode={self.mode}): "
                                  "another process uses this cache file in the other mode; every job sharing it "
                                  "must use the same llm.cache_mode")
            # WAL: a commit is durable at the next checkpoint; rollback journal: at commit (no WAL to replay)
            conn.execute(f"PRAGMA synchronous={'NORMAL' if self.mode == 'wal' else 'FULL'}")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._retry(lambda: self._conn().execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone())
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        """Store a reply, the registered secrets in it masked (a reply echoing the API key)."""
        from gear_repro.utils.secrets import redact_strings

        row = (key, model, json.dumps(redact_strings(value), ensure_ascii=False), time.time())
        self._retry(lambda: self._conn().execute(
            "INSERT OR REPLACE INTO replies (key, model, value, created) VALUES (?, ?, ?, ?)", row))

    def __len__(self) -> int:
        return int(self._retry(lambda: self._conn().execute("SELECT COUNT(*) FROM replies").fetchone()[0]))
