"""Where shared caches and bundled resources live."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PACKAGE_DIR.parent


def cache_dir() -> Path:
    """Root of content-hashed caches (embeddings, indexes, LLM replies, models): $GEAR_CACHE, created if missing; a
    leading ``~`` is the home folder (as a shell would expand it; a quoted or .env value is not) and an empty
    $GEAR_CACHE the default ``~/.cache/gear_repro`` (it was the working folder).

    Raises OutputError naming $GEAR_CACHE when it (or a parent) is a file or cannot be created."""
    from gear_repro.utils.errors import OutputError

    root = Path(os.environ.get("GEAR_CACHE") or Path.home() / ".cache" / "gear_repro").expanduser()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        what = "is a file, not a folder" if root.is_file() else f"cannot be created ({e.strerror or e})"
        raise OutputError(f"GEAR_CACHE={root} {what}; point GEAR_CACHE at a folder") from None
    return root


def config_dir() -> Path:
    """The Hydra config tree: $GEAR_REPRO_CONFIGS or the repository's configs/."""
    env = os.environ.get("GEAR_REPRO_CONFIGS")
    return Path(env) if env else REPO_DIR / "configs"
