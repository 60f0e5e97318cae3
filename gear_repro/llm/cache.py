"""Persistent LLM reply cache keyed by (model, messages, params): re-runs cost nothing, replays are exact.

One SQLite file (WAL mode, busy timeout) under ``$GEAR_CACHE/llm_cache``: safe for many threads and
processes writing at once. Keys are sha256 of the canonical JSON of the request; nothing else (no
endpoint, no key) enters the key or the stored row.
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


def request_key(model: str, messages: list[dict], params: dict[str, Any]) -> str:
    """Cache key of one chat request (full sha256 of canonical JSON)."""
    return hash_obj({"model": model, "messages": messages, "params": params}, n=64)


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
