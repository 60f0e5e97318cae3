"""The real OpenAI-compatible HTTP path: a llama.cpp server started and stopped by the harness, serving
the tiny SmolLM2-135M model (answers are nonsense; this checks the plumbing only)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hydra.utils import instantiate

from gear_repro.config import group_config
from gear_repro.prompts import render
from tests.helpers.requirements import missing, require_module

require_module("llama_cpp.server", "make install-local-llm")

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_tiny_model_through_harness_started_server(tmp_path: Path) -> None:
    from gear_repro.llm.gguf_weights import smollm2_path

    try:
        smollm2_path()
    except Exception as e:
        missing(f"tiny model not installed: {e}")
    cfg = group_config("llm", "tiny")
    cfg.cache_dir, cfg.max_tokens = str(tmp_path / "cache"), 16
    client = instantiate(cfg)
    assert client.server is None  # lazily started on the first uncached call
    messages = render("qa_no_passages", question="What is the capital of France?")
    try:
        r1 = client.chat(messages, stage="qa")
        server = client.server
        assert server is not None and server.alive() and _port_open(server.port)
        assert r1.text.strip() and not r1.cached
        assert r1.prompt_tokens > 0 and r1.completion_tokens > 0 and r1.tokens_source == "usage"
        r2 = client.chat(messages, stage="qa")
        assert r2.cached and r2.text == r1.text and r2.prompt_tokens == r1.prompt_tokens
        recs = client.ledger.since(0)
        assert [(r["stage"], r["cached"], r["model"]) for r in recs] == [
            ("qa", False, "smollm2-135m-instruct-q4_1"), ("qa", True, "smollm2-135m-instruct-q4_1")]
        assert client.stats()["cache_hits"] == 1 and client.stats()["cache_misses"] == 1
    finally:
        client.close()
    assert not server.alive() and server.proc is None and not _port_open(server.port)


_ORPHAN = """
import sys
from hydra.utils import instantiate
from gear_repro.config import group_config
cfg = group_config("llm", sys.argv[1]); cfg.cache_dir = sys.argv[2]
c = instantiate(cfg)
c._ensure_client()
print(c.server.proc.pid, flush=True)
import time; time.sleep(600)
"""


def _running(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (dead, not yet reaped by its new parent) counts as ended,
    which ``os.kill(pid, 0)`` cannot tell."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"  # the state field follows "(comm) "


def test_running_tells_a_zombie_from_a_live_process() -> None:
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{child.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        time.sleep(0.01)  # polling until it has exited but is not reaped yet: a zombie
    assert not _running(child.pid) and _running(os.getpid())
    child.wait()
    assert not _running(child.pid)


def test_server_does_not_outlive_a_killed_harness(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from gear_repro.llm.gguf_weights import smollm2_path

    try:
        smollm2_path()
    except Exception as e:
        missing(f"tiny model not installed: {e}")
    harness = subprocess.Popen([sys.executable, "-c", _ORPHAN, "tiny",
                                str(tmp_path)], stdout=subprocess.PIPE, text=True)
    pid = int(harness.stdout.readline())  # type: ignore[union-attr]
    assert _running(pid)  # the server runs
    harness.send_signal(signal.SIGKILL)  # no atexit, no cleanup
    harness.wait(timeout=60)
    deadline = time.monotonic() + 60  # a bound on the wait, not a timing assertion
    while time.monotonic() < deadline:
        if not _running(pid):
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    pytest.fail("llama.cpp server outlived the killed harness")
