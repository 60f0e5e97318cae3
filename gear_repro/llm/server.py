"""A llama.cpp OpenAI-compatible server that the harness starts and stops itself (``llm=local``/``tiny``).

Runs ``python -m llama_cpp.server --model M --n_threads T --n_threads_batch T --n_ctx C --host 127.0.0.1
--port <free port> --model_alias <model>`` (plus ``--cache true --cache_type ram --cache_size N`` with
``prompt_cache: ram``, see :class:`PromptCache`) as a subprocess, waits until ``GET /v1/models`` answers, and stops
it on ``stop()`` and at interpreter exit (atexit). If the harness process dies without cleanup (SIGKILL,
SIGTERM), a watchdog thread inside the server process notices that its parent is gone and exits within
~1 s, so no orphaned server keeps the CPU. Output goes to ``$GEAR_CACHE/logs/llama_server_<port>.log``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from gear_repro.utils.errors import GearError
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, check_number, choice

log = logging.getLogger(__name__)


class ServerError(GearError):
    """The local llama.cpp server could not be started."""


class PromptCache(Choice):
    """Which earlier prompts' KV states the server keeps for prompt-prefix reuse (docs/llm.md, "Prompt-prefix reuse").

    Both settings reuse the KV of the longest common token prefix with the *previous* prompt (the server's single
    slot). ``ram`` also keeps the states of earlier prompts in llama-cpp-python's ``LlamaRAMCache`` (LRU, capped at
    ``prompt_cache_bytes`` of KV state) and, before a prompt, loads the kept state with the longest common prefix
    when it is longer than the previous prompt's; so the K.2 reader / reason / rewrite and K.3 QA prompts, which
    alternate, each find their own fixed prefix again.
    """

    none = "none"
    ram = "ram"


# the range of llm.server.prompt_cache_bytes (16 MiB .. 64 GiB); the default keeps ~10 Qwen2.5-1.5B prompt states of
# ~1,800 tokens (28 KiB of KV per token); RAM used is more than this (each state also holds a copy of the logits
# buffer, n_batch x n_vocab float32, which llama-cpp-python does not count: docs/llm.md)
PROMPT_CACHE_BYTES = 512 * 2**20
PROMPT_CACHE_BYTES_RANGE = {"ge": 16 * 2**20, "gt": None, "le": 64 * 2**30, "lt": None}


def prompt_cache_args(mode: PromptCache | str, size_bytes: int) -> list[str]:
    """The ``llama_cpp.server`` flags of a prompt-cache setting (none: no flags, the server's default)."""
    mode = choice(PromptCache, mode, "llm.server.prompt_cache")
    check_number("llm.server.prompt_cache_bytes", size_bytes, PROMPT_CACHE_BYTES_RANGE)
    if mode is PromptCache.none:
        return []
    return ["--cache", "true", "--cache_type", "ram", "--cache_size", str(int(size_bytes))]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# `python -m llama_cpp.server ARGS`, plus a watchdog that exits when the parent (the harness) is gone
_LAUNCHER = """
import os, runpy, sys, threading, time
parent = os.getppid()
def _watch():
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)
threading.Thread(target=_watch, daemon=True).start()
sys.argv = ["llama_cpp.server", *sys.argv[1:]]
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


class LlamaServer:
    """One harness-managed ``llama_cpp.server`` process; ``start()`` is idempotent and thread-safe."""

    def __init__(self, model_path: str | Path, alias: str, n_threads: int = 2, n_ctx: int = 8192,
                 host: str = "127.0.0.1", port: int | None = None, startup_timeout_s: float = 300.0,
                 extra_args: list[str] | None = None, prompt_cache: PromptCache | str = PromptCache.none,
                 prompt_cache_bytes: int = PROMPT_CACHE_BYTES):
        self.model_path = Path(model_path)
        self.alias = alias
        self.n_threads, self.n_ctx, self.host, self.port = n_threads, n_ctx, host, port
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = list(extra_args or [])
        self.cache_args = prompt_cache_args(prompt_cache, prompt_cache_bytes)
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        """The server's command line: ``python -c <launcher> <llama_cpp.server flags>`` on ``self.port``."""
        return [sys.executable, "-c", _LAUNCHER, "--model", str(self.model_path),
                "--model_alias", self.alias, "--n_threads", str(self.n_threads),
                "--n_threads_batch", str(self.n_threads), "--n_ctx", str(self.n_ctx),
                "--host", self.host, "--port", str(self.port), *self.cache_args, *self.extra_args]

    def start(self) -> str:
        """Start the server if it is not running; return its base URL once it answers."""
        with self._lock:
            if self.alive():
                return self.base_url
            if not self.model_path.is_file():
                raise ServerError(f"GGUF model not found: {self.model_path}")
            self.port = self.port if self.port and not self.proc else free_port(self.host)
            logs = cache_dir() / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            self.log_path = logs / f"llama_server_{self.port}.log"
            cmd = self.command()
            log.info("starting llama.cpp server: python -m llama_cpp.server %s (log %s)", " ".join(cmd[3:]),
                     self.log_path)
            with open(self.log_path, "ab") as lf:
                self.proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            atexit.register(self.stop)
            t0 = time.monotonic()
            while time.monotonic() - t0 < self.startup_timeout_s:
                if self.proc.poll() is not None:
                    tail = self.log_path.read_text(errors="replace")[-2000:]
                    self.proc = None
                    raise ServerError(f"llama.cpp server exited at start (see {self.log_path}):\n{tail}")
                try:
                    with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as r:
                        if r.status == 200:
                            log.info("llama.cpp server ready on %s after %.1fs", self.base_url,
                                     time.monotonic() - t0)
                            return self.base_url
                except (urllib.error.URLError, OSError):
                    pass
                time.sleep(0.2)
            self._stop_locked()
            raise ServerError(f"llama.cpp server not ready after {self.startup_timeout_s}s (see {self.log_path})")

    def _stop_locked(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.info("llama.cpp server on port %s stopped", self.port)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        with self._lock:
            self._stop_locked()
        with contextlib.suppress(Exception):
            atexit.unregister(self.stop)
