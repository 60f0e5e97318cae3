"""A user's own components by their class: what the resume fingerprint and run.json's code history hold of code that
is not the harness's (gear_repro/pipeline/resume.py).

A component the Python API was handed (``Pipeline.from_config(retriever=..., method=...)``) is in no config setting,
so its class (module and qualified name) joins the fingerprint: a resume with another class is refused, naming both.
A class named by ``_target_`` is already in the config. The source file of every user's class (either way) is
hashed into ``code_history``, as the harness's own source is: a resume after an edit of it is warned about and the
report names both versions (the fingerprint leaves code out, so a fixed bug does not strand a long run).
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

from omegaconf import DictConfig

from gear_repro.pipeline.resources import Resources, target_class

# the roles an API caller fills with objects of its own (pipeline/wiring.py's shared keys)
GIVEN_ROLES = {"retriever": "passage_retriever", "triple_retriever": "triple_retriever", "method": "method"}


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def source_hash(cls: type) -> str | None:
    """sha256 (16 hex) of the file that defines ``cls``; None when it has none (a class built in a notebook cell
    or by ``type()``)."""
    try:
        path = inspect.getsourcefile(cls)
        if not path:
            return None
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except (OSError, TypeError):
        return None


def _is_users(cls: type) -> bool:
    return not cls.__module__.startswith("gear_repro.")


def given_classes(res: Resources) -> dict[str, str]:
    """role -> class of each object of the user's the API handed the run (a checked retriever by the class it
    wraps); {} when none (the fingerprint as before)."""
    from gear_repro.pipeline.components import CheckedRetriever

    out = {}
    for role, key in GIVEN_ROLES.items():
        obj = res.built(key)
        if isinstance(obj, CheckedRetriever):
            obj = obj.inner
        if obj is not None and _is_users(type(obj)):
            out[role] = class_name(type(obj))
    return out


def user_sources(cfg: DictConfig, res: Resources) -> dict[str, str | None]:
    """class -> :func:`source_hash` of every class of the user's in the run: the API's objects and the config's
    top-level ``_target_`` classes that are not the harness's."""
    from gear_repro.pipeline.components import CheckedRetriever

    classes: list[type] = []
    for key in GIVEN_ROLES.values():
        obj = res.built(key)
        obj = obj.inner if isinstance(obj, CheckedRetriever) else obj
        if obj is not None:
            classes.append(type(obj))
    for key in cfg:
        try:
            node = cfg.get(key)
            cls = target_class(node) if isinstance(node, DictConfig) else None
        except Exception:  # a target that does not import is refused by the config checks, not here
            cls = None
        if cls is not None:
            classes.append(cls)
    return {class_name(c): source_hash(c) for c in sorted(set(classes), key=class_name) if _is_users(c)}


def classes_differ(old: Any, new: dict[str, str]) -> list[str]:
    """For a refused resume: each role whose class of the user's differs (``method: a.Mine → b.Other``)."""
    old = old if isinstance(old, dict) else {}
    return [f"user's {role}: {old.get(role, '(none)')} → {new.get(role, '(none)')}"
            for role in sorted(old.keys() | new.keys()) if old.get(role) != new.get(role)]
