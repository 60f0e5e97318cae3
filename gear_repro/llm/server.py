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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from gear_repro.utils.errors import ConfigError, GearError
from gear_repro.utils.paths import cache_dir
from gear_repro.utils.settings import Choice, Settings, check_number, choice, num

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


# `python -m llama_cpp.server`'s own argument parsing and settings validation (llama_cpp/server/__main__.py), without
# loading a model; a --chat_format must name a handler of the installed llama-cpp-python (an unknown one failed
# every request with HTTP 500)
_ARGS_CHECK = """
import argparse, sys
from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings
parser = argparse.ArgumentParser(prog="python -m llama_cpp.server")
add_args_from_model(parser, Settings)
parser.add_argument("--config_file", type=str)
args = parser.parse_args()
try:
    parse_model_from_args(ServerSettings, args)
    parse_model_from_args(ModelSettings, args)
    if args.chat_format and not args.chat_format.startswith("chat_template."):
        from llama_cpp import llama_chat_format
        llama_chat_format.get_chat_completion_handler(args.chat_format)
except Exception as e:
    print(str(e).strip().splitlines()[-1][:400] if str(e).strip() else type(e).__name__, file=sys.stderr)
    sys.exit(1)
"""


@dataclass
class LLMServerSettings(Settings):
    """``llm.server`` (docs/llm.md): the node's schema and :class:`LlamaServer`'s settings, each field's default
    declared here (configs/llm/local.yaml and tiny.yaml set what their model changes). Null ``llm.server``: the
    client uses an endpoint it does not start."""

    config_key: ClassVar[str] = "llm.server"

    model_path: str = "qwen"  # a GGUF path, or qwen / smollm2 (packaged weights, assembled on demand; llm/gguf_weights.py)
    n_threads: int = num(2, ge=1)  # CPU threads for decode and prompt
    n_ctx: int = num(8192, ge=1)  # context window in tokens (reader prompts carry 10-15 passages)
    host: str = "127.0.0.1"  # bind address
    port: int | None = num(None, ge=1, le=65535)  # null: a free port
    startup_timeout_s: float = num(300.0, gt=0)  # wait this long for the model to load
    # more `python -m llama_cpp.server` flags (part of the reply-cache key)
    extra_args: list[str] = field(default_factory=list)
    # none: reuse only the previous prompt's prefix | ram: also keep earlier prompts' KV states, longest common prefix
    # wins (with Qwen on 5 questions no faster for SyncGE, 2 of 32 GEAR replies differ, peak RSS ~4x: docs/llm.md
    # "Prompt-prefix reuse")
    prompt_cache: PromptCache = PromptCache.none
    # KV bytes kept with prompt_cache=ram (512 MiB; 16 MiB..64 GiB); RAM use is higher: each state also copies
    # n_batch x n_vocab float32 logits (docs/llm.md)
    prompt_cache_bytes: int = num(PROMPT_CACHE_BYTES, ge=PROMPT_CACHE_BYTES_RANGE["ge"], le=PROMPT_CACHE_BYTES_RANGE["le"])

    def __post_init__(self) -> None:
        self.extra_args = [str(a) for a in self.extra_args or []]
        super().__post_init__()


class LlamaServer:
    """One harness-managed ``llama_cpp.server`` process; ``start()`` is idempotent and thread-safe. ``model_path`` is
    the resolved weights file (it replaces the settings' ``model_path``, a name); ``settings, **given``:
    :class:`LLMServerSettings`."""

    def __init__(self, model_path: str | Path, alias: str, settings: LLMServerSettings | None = None, **given: Any):
        s = LLMServerSettings.of(settings, "LlamaServer", **given)
        self.model_path = Path(model_path)
        self.alias = alias
        self.n_threads, self.n_ctx, self.host, self.port = s.n_threads, s.n_ctx, s.host, s.port
        self.startup_timeout_s = s.startup_timeout_s
        self.extra_args = list(s.extra_args)
        self.cache_args = prompt_cache_args(s.prompt_cache, s.prompt_cache_bytes)
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

    def check_args(self, timeout_s: float = 120.0) -> None:
        """ConfigError naming ``llm.server.extra_args`` when the server's command line would not start it (an unknown
        flag, a value of the wrong type, an unknown ``--chat_format``), found by the server's own argument parser in
        a subprocess without loading the model (0.84 s measured; only with extra_args: the harness's own flags are fixed).
        Nothing is checked when llama-cpp-python is not installed (the start says so)."""
        if not self.extra_args:
            return
        import importlib.util

        if importlib.util.find_spec("llama_cpp") is None:
            return
        args = [*self.command()[3:]]
        args[args.index("--port") + 1] = "0"  # not chosen yet
        try:
            done = subprocess.run([sys.executable, "-c", _ARGS_CHECK, *args], capture_output=True, text=True,
                                  timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            log.warning("llama.cpp server flags not checked: the check took over %.0f s", timeout_s)
            return
        if done.returncode != 0:
            lines = [x.strip() for x in done.stderr.strip().splitlines() if x.strip()]
            why = lines[-1] if lines else f"exit status {done.returncode}"
            why = why.removeprefix("python -m llama_cpp.server: ").removeprefix("error: ")
            raise ConfigError(f"llm.server.extra_args={self.extra_args} would not start the llama.cpp server: {why}")

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


def check_server_overrides(argv: list[str]) -> None:
    """ConfigError naming the setting for an override of ``llm.server.<name>`` when the LLM config chosen on the
    command line (``llm=<name>``; each value of a sweep) has no harness-started server (its file sets no ``server``,
    whose default is null: ``openai``, ``openai_compatible``). Hydra fails such an override with a 23-line traceback ending in "Unexpected
    type for root: NoneType", naming neither the setting nor the reason. A config this package does not ship
    (``--config-dir``), an ``llm.server=...`` override of the whole node, or no ``llm=`` choice is left to Hydra."""
    import yaml

    from gear_repro.utils.paths import config_dir

    pairs = [a.partition("=") for a in argv if "=" in a and not a.startswith("-")]
    keys = [(k.lstrip("+~"), v) for k, _, v in pairs]
    if any(k == "llm.server" for k, _ in keys):
        return
    settings = [f"{k}={v}" for k, v in keys if k.startswith("llm.server.")]
    choices = [v for k, v in keys if k == "llm"]
    if not settings or not choices:
        return
    for name in (c.strip() for c in choices[-1].split(",")):
        path = config_dir() / "llm" / f"{name}.yaml"
        try:
            node = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(node, dict) and node.get("server") is None:  # unset: LLMClientSettings' null
            raise ConfigError(f"{settings[0].split('=', 1)[0]}: llm={name} has no server the harness starts "
                              f"(configs/llm/{name}.yaml sets no llm.server; its endpoint, llm.base_url, is a "
                              "server you run), so llm.server.* settings do not apply to it; drop the override, "
                              "or use llm=local / llm=tiny")
