"""Run a method through the real runner with the test doubles in place of the LLM and the embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

from gear_repro.config import register_configs
from gear_repro.utils.paths import config_dir


def compose_config(overrides: list[str]) -> Any:
    """The project's Hydra config with ``overrides`` (Hydra's compose API)."""
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose("config", overrides=overrides)


def run_with_doubles(overrides: list[str], run_dir: Path, *, llm: Any, embedder: Any) -> list[dict]:
    """Compose ``overrides``, run every question with ``llm`` and ``embedder`` injected, return the records."""
    from gear_repro.pipeline.resources import Resources
    from gear_repro.pipeline.runner import Runner

    cfg = compose_config(overrides)
    Runner(cfg, run_dir, resources=Resources(cfg, llm=llm, embedder=embedder)).run()
    lines = (run_dir / "predictions.jsonl").read_text(encoding="utf-8").split("\n")  # not splitlines: U+2028 in text
    return [json.loads(x) for x in lines if x.strip()]
