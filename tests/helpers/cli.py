"""Run the project's CLIs in a subprocess on this checkout's code, with a private $GEAR_CACHE."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = "from gear_repro.cli.run import main; import sys; sys.argv[0] = 'gear-repro'; main()"


def run_cli(args: list[str], tmp_path: Path, code: str = RUN, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -c code *args`` from the repository root; returns the finished process (text output)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "GEAR_CACHE": str(tmp_path / "cache"), **(env or {})}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full_env,
                          cwd=REPO, timeout=timeout)


def files_with(root: Path, needle: str) -> list[Path]:
    """Files under ``root`` whose bytes contain ``needle``."""
    return sorted(p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


def toy_args(toy_dir: Path, *extra: str) -> list[str]:
    """Overrides of a BM25 run on the toy dataset, without progress bars."""
    return [f"dataset.path={toy_dir}", "dataset.name=toy", "retriever=bm25", "run.progress=false", *extra]
