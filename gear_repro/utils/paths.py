"""Where shared caches and bundled resources live."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PACKAGE_DIR.parent


def cache_dir() -> Path:
    """Root of content-hashed caches (embeddings, indexes, LLM replies, models): $GEAR_CACHE."""
    root = Path(os.environ.get("GEAR_CACHE", Path.home() / ".cache" / "gear_repro"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def config_dir() -> Path:
    """The Hydra config tree: $GEAR_REPRO_CONFIGS or the repository's configs/."""
    env = os.environ.get("GEAR_REPRO_CONFIGS")
    return Path(env) if env else REPO_DIR / "configs"
