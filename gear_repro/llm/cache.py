"""Persistent LLM reply cache keyed by (model, endpoint, messages, params): re-runs cost nothing, replays are exact.

One SQLite file (WAL mode, busy timeout) under ``$GEAR_CACHE/llm_cache``: safe for many threads and
processes writing at once. Keys are sha256 of the canonical JSON of the request. What identifies a model
(docs/llm.md, "Cache"): its served name plus the endpoint that serves it (``llm.base_url`` without credentials),
so two servers serving the same model name never share replies; the hosted OpenAI API and the harness-started
local server (``llm.server``) are identified by the model name alone. No API key enters the key or the row.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.paths import cache_dir


def request_key(model: str, messages: list[dict], params: dict[str, Any], endpoint: str | None = None) -> str:
    """Cache key of one chat request (full sha256 of canonical JSON); ``endpoint`` None = the model name alone
    identifies the model (hosted OpenAI, the harness's own local server: keys as before the endpoint counted)."""
    request: dict[str, Any] = {"model": model, "messages": messages, "params": params}
    if endpoint is not None:
        request["endpoint"] = endpoint
    return hash_obj(request, n=64)


def endpoint_identity(base_url: str | None) -> str | None:
    """The endpoint part of a model's identity: ``base_url`` without credentials or a trailing slash (None: none)."""
    if not base_url:
        return None
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base_url.strip())
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme.lower(), host.lower(), parts.path.rstrip("/"), parts.query, ""))


class LLMCache:
    """``get(key) -> dict | None`` and ``put(key, model, value)`` over a shared SQLite file."""

    def __init__(self, directory: str | Path | None = None):
        self.dir = Path(directory) if directory else cache_dir() / "llm_cache"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "cache.sqlite3"
        self._local = threading.local()
        self._retry(lambda: self._conn().execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, value TEXT, created REAL)"))

    @staticmethod
    def _retry(fn: Any, attempts: int = 20) -> Any:
        """Run ``fn``, retrying while another process holds a lock SQLite's busy timeout did not cover."""
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))
        return None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=60000")
            self._retry(lambda: conn.execute("PRAGMA journal_mode=WAL"))  # needs a brief exclusive lock
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> dict[str, Any] | None:
        row = self._retry(lambda: self._conn().execute("SELECT value FROM replies WHERE key = ?", (key,)).fetchone())
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, value: dict[str, Any]) -> None:
        row = (key, model, json.dumps(value, ensure_ascii=False), time.time())
        self._retry(lambda: self._conn().execute(
            "INSERT OR REPLACE INTO replies (key, model, value, created) VALUES (?, ?, ?, ?)", row))

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM replies").fetchone()[0])
