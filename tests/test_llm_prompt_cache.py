"""``llm.server.prompt_cache``: the schema's choices and range, the server flags it becomes, the reply-cache key it
stays out of; and (slow) a real tiny llama.cpp server started with it that loads a kept prompt state."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate

from gear_repro.config import validate
from gear_repro.llm.cache import request_key
from gear_repro.llm.server import LlamaServer, PromptCache
from gear_repro.prompts import render
from gear_repro.utils.errors import ConfigError
from tests.helpers.requirements import missing

MiB = 2**20
CACHE_FLAGS = ["--cache", "true", "--cache_type", "ram", "--cache_size"]


def _client(compose, tmp_path: Path, *overrides: str):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"not loaded")  # resolve_model_path takes an existing file as it is
    cfg = validate(compose(["llm=tiny", f"llm.server.model_path={gguf}", f"llm.cache_dir={tmp_path / 'cache'}",
                            *overrides]))
    return instantiate(cfg.llm)


def _flags(cmd: list[str]) -> list[str]:
    """The ``llama_cpp.server`` flags of a server command (after ``python -c <launcher>``)."""
    return cmd[3:]


def test_default_is_no_prompt_cache(compose, tmp_path: Path) -> None:
    for llm in ("tiny", "local"):
        assert compose([f"llm={llm}"]).llm.server.prompt_cache == PromptCache.none
    cmd = _client(compose, tmp_path).new_server().command()
    assert "--cache" not in cmd and "--cache_size" not in cmd
    assert _flags(cmd)[:2] == ["--model", str(tmp_path / "model.gguf")]


def test_ram_cache_flags_reach_the_server_command_line(compose, tmp_path: Path) -> None:
    client = _client(compose, tmp_path, "llm.server.prompt_cache=ram", f"llm.server.prompt_cache_bytes={64 * MiB}",
                     "llm.server.extra_args=[--seed,7]")
    flags = _flags(client.new_server().command())
    i = flags.index("--cache")
    assert flags[i:i + 6] == [*CACHE_FLAGS, str(64 * MiB)]
    assert flags[-2:] == ["--seed", "7"]  # extra_args come last, so they can override
    default = _flags(_client(compose, tmp_path, "llm.server.prompt_cache=ram").new_server().command())
    assert default[default.index("--cache_size") + 1] == str(512 * MiB)


def test_prompt_cache_is_not_part_of_the_reply_cache_key(compose, tmp_path: Path) -> None:
    messages = render("qa_no_passages", question="Who wrote Hamlet?")
    keys = {mode: request_key(c.model, messages, c._params({}), c.endpoint)
            for mode in ("none", "ram") for c in [_client(compose, tmp_path, f"llm.server.prompt_cache={mode}")]}
    assert keys["none"] == keys["ram"]


@pytest.mark.parametrize("override", ["llm.server.prompt_cache=disk", "llm.server.prompt_cache=true"])
def test_schema_refuses_an_unknown_prompt_cache(compose, override: str) -> None:
    with pytest.raises(ConfigCompositionException, match="prompt_cache"):
        compose(["llm=tiny", override])


@pytest.mark.parametrize("size", [0, 16 * MiB - 1, 64 * 2**30 + 1, -5])
def test_schema_refuses_a_cache_size_out_of_range(compose, size: int) -> None:
    with pytest.raises(ConfigError, match=r"llm\.server\.prompt_cache_bytes must be >= 1\.67772e\+07"):
        validate(compose(["llm=local", f"llm.server.prompt_cache_bytes={size}"]))


def test_bounds_are_accepted(compose) -> None:
    for size in (16 * MiB, 64 * 2**30):
        assert validate(compose(["llm=local", f"llm.server.prompt_cache_bytes={size}"])).llm.server.prompt_cache_bytes \
            == size


def test_server_built_directly_checks_its_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"llm\.server\.prompt_cache must be one of \['none', 'ram'\]"):
        LlamaServer(tmp_path / "m.gguf", alias="m", prompt_cache="disk")
    with pytest.raises(ConfigError, match="prompt_cache_bytes"):
        LlamaServer(tmp_path / "m.gguf", alias="m", prompt_cache="ram", prompt_cache_bytes=MiB)
    assert LlamaServer(tmp_path / "m.gguf", alias="m", prompt_cache="ram", prompt_cache_bytes=32 * MiB).command()[
        -6:] == [*CACHE_FLAGS, str(32 * MiB)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_tiny_server_with_ram_cache_loads_a_kept_prompt_state(compose, tmp_path: Path) -> None:
    """QA, reason, QA of another question: without a kept state the second QA prompt would share only the chat
    template's first tokens with the reason prompt before it; with ``ram`` the server loads the first QA state."""
    pytest.importorskip("llama_cpp.server")
    from gear_repro.llm.gguf_weights import smollm2_path

    try:
        smollm2_path()
    except Exception as e:
        missing(f"tiny model not installed: {e}")
    cfg = validate(compose(["llm=tiny", "llm.server.prompt_cache=ram", f"llm.server.prompt_cache_bytes={32 * MiB}",
                            f"llm.cache_dir={tmp_path / 'cache'}", "llm.max_tokens=4"]))
    client = instantiate(cfg.llm)
    passages = "Wikipedia Title: Paris\nParis is the capital of France."
    try:
        client.chat(render("qa", passages=passages, question="What is the capital of France?"), stage="qa")
        server = client.server
        cmdline = Path(f"/proc/{server.proc.pid}/cmdline").read_bytes().split(b"\0")
        i = cmdline.index(b"--cache")
        assert cmdline[i:i + 6] == [f.encode() for f in [*CACHE_FLAGS, str(32 * MiB)]]
        client.chat(render("reason", query="What is the capital of France?", triples='("Paris", "capital of", '
                                                                                      '"France")'), stage="reason")
        client.chat(render("qa", passages=passages, question="Which country is Paris in?"), stage="qa")
    finally:
        client.close()
    log = server.log_path.read_text(errors="replace").split("Uvicorn running on")[-1]
    assert f"Using ram cache with size {32 * MiB}" in server.log_path.read_text(errors="replace")
    assert log.count("Llama._create_completion: cache hit") == 1  # the third call loaded the first call's state
    # it then evaluated only what follows the shared prefix: far fewer tokens than the whole QA prompt
    evaluated = [int(n) for n in re.findall(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", log)]
    assert len(evaluated) == 3 and evaluated[2] < evaluated[0] / 5
