"""Provenance saved with every run: package versions, platform, git commit, a hash of the package's source."""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import sys
from importlib import metadata

from gear_repro.utils.paths import REPO_DIR
from gear_repro.utils.slurm import slurm_job

TRACKED = [
    "gear-repro", "hydra-core", "omegaconf", "numpy", "torch", "sentence-transformers", "transformers",
    "bm25s", "PyStemmer", "openai", "tiktoken", "elasticsearch", "llama_cpp_python", "json-repair",
    "pandas", "matplotlib", "faiss-cpu",
]


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in TRACKED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_DIR, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_DIR, capture_output=True, text=True, timeout=5)
        if sha.returncode != 0:
            return None
        return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": package_versions(),
        "git_commit": git_commit(),
        "source": source_hash(),
        "code_dir": str(REPO_DIR),  # the checkout whose gear_repro ran (a SLURM job imports the submitter's)
        "host": platform.node(),
        "slurm": slurm_job(),
    }


@functools.lru_cache(maxsize=1)
def source_hash() -> str | None:
    """sha256 (16 hex digits) of the files of the ``gear_repro`` package that ran (code, prompt templates, packaged
    data; not ``__pycache__``), by relative path and content: the code's identity where a commit is not one (a
    ``-dirty`` tree, edited again between two starts, has one commit and two sources). Read once per process; None
    when the package folder cannot be found."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    try:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and p.suffix not in (".pyc", ".pyo")):
            h.update(str(path.relative_to(root)).encode("utf-8") + b"\0")
            h.update(path.read_bytes() + b"\0")
    except OSError:
        return None
    return h.hexdigest()[:16]

