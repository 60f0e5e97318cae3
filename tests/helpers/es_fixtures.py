"""Elasticsearch test support: the noida-db emulator as a session fixture, a real cluster via ES_URL,
and a deterministic fake embedder.

The emulator (``noida-db==0.2.3``, an ES-compatible server from PyPI) is started as its own binary
(``importlib.resources.files("noida_db") / "noida-db"``), not through the ``noida-db`` console script,
which would leave the binary running when killed. Tests using it are marked ``es``.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.requirements import missing


def noida_binary() -> Path | None:
    """Path of the emulator binary shipped in the noida-db wheel, or None when not installed."""
    try:
        p = Path(str(importlib.resources.files("noida_db") / "noida-db"))
    except ModuleNotFoundError:
        return None
    return p if p.exists() else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NoidaServer:
    """The emulator's Elasticsearch service on a free 127.0.0.1 port, in a private data dir."""

    def __init__(self, data_dir: Path, binary: Path | None = None):
        self.binary = binary or noida_binary()
        if self.binary is None:
            raise RuntimeError("noida-db is not installed (pip install noida-db==0.2.3)")
        self.data_dir = Path(data_dir)
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log_path = self.data_dir / "noida.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 15.0, attempts: int = 3) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(attempts):  # a free port can be taken between bind and spawn: retry
            self.port = free_port()
            log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
            self.proc = subprocess.Popen(
                [str(self.binary), "start", "--data-dir", str(self.data_dir / "data"), "--host", "127.0.0.1",
                 "--only", "elasticsearch", "--elasticsearch-port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            if self._wait_ready(timeout):
                return self.url
            self.stop()
        raise RuntimeError(f"noida-db did not come up; log: {self.log_path.read_text(errors='replace')[-2000:]}")

    def _wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc is None or self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/", timeout=1) as r:
                    if json.loads(r.read()).get("version"):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> NoidaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def noida_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a noida-db emulator running for the whole test session."""
    if noida_binary() is None:
        missing("noida-db emulator not installed (pip install noida-db==0.2.3)")
    server = NoidaServer(tmp_path_factory.mktemp("noida"))
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def es_real_url() -> str:
    """URL of a real cluster from ES_URL (credentials from ES_API_KEY / ES_USERNAME+ES_PASSWORD)."""
    url = os.environ.get("ES_URL")
    if not url:
        pytest.skip("ES_URL not set: no real Elasticsearch cluster for this run")
    return url


def session_prefix() -> str:
    """Unique index prefix so concurrent or repeated runs against one cluster never collide."""
    return f"gear-test-{uuid.uuid4().hex[:8]}"


def delete_prefix(backend, prefix: str) -> None:
    """Delete every index of ``prefix`` by name (clusters refuse wildcard deletes by default)."""
    with contextlib.suppress(Exception):
        client = backend.client
        for name in client.indices.get(index=f"{prefix}-*", expand_wildcards="open,closed"):
            client.options(ignore_status=404).indices.delete(index=name)


@contextlib.contextmanager
def gear_cache(path: Path) -> Iterator[Path]:
    """Point $GEAR_CACHE at ``path`` for the duration."""
    old = os.environ.get("GEAR_CACHE")
    os.environ["GEAR_CACHE"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("GEAR_CACHE", None)
        else:
            os.environ["GEAR_CACHE"] = old


class LoopbackServer:
    """An HTTP server on 127.0.0.1 with ``handler`` (a BaseHTTPRequestHandler class), serving in a daemon thread
    inside ``with``, which gives its URL."""

    def __init__(self, handler: type) -> None:
        import threading
        from http.server import ThreadingHTTPServer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class TricklingServer(LoopbackServer):
    """An HTTP server on 127.0.0.1 that answers ``GET /`` with ``info`` (JSON, as Elasticsearch does) and every other
    request with a 200 whose body comes one byte every ``every_s`` seconds, for ``for_s`` seconds, then stops (the
    connection is closed before the announced length): a per-read timeout longer than ``every_s`` never trips."""

    def __init__(self, info: dict, every_s: float = 0.1, for_s: float = 6.0):
        from http.server import BaseHTTPRequestHandler

        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                data = json.dumps(outer.info).encode() if self.path == "/" else b""
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(data) if data else 100_000))
                self.end_headers()
                if data:
                    self.wfile.write(data)
                    return
                t0 = time.monotonic()
                with contextlib.suppress(OSError):
                    while time.monotonic() - t0 < outer.for_s:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                        time.sleep(outer.every_s)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = _answer

            def log_message(self, *a: object) -> None:
                pass

        self.info, self.every_s, self.for_s = info, every_s, for_s
        super().__init__(Handler)
