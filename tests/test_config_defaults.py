"""A default is written once: at its settings dataclass (gear_repro/config.py, docs/ARCHITECTURE.md "Configs").

Every config group option's YAML (configs/<group>/*.yaml) and the plain nodes of configs/config.yaml (``run``,
``graph``, ``extraction``, ``report``) set only what differs from the layer beneath them: the schema's dataclass, or
for an option built on another option of its group (``retriever/griever_k5.yaml`` on ``griever``) that option as
composed. A key the dataclass lacks fails, and so does a value equal to the one beneath it (a restated default,
which would drift from the dataclass the day one of them changes); the composed config holds the dataclass default
of every setting no YAML sets.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from gear_repro import config as C
from gear_repro.registry import group_components
from gear_repro.utils.paths import config_dir

CONFIGS = config_dir()
GROUP_DIRS = sorted(p.name for p in CONFIGS.iterdir() if p.is_dir() and p.name not in ("experiment", "hydra"))
OPTION_FILES = [p for g in GROUP_DIRS for p in sorted((CONFIGS / g).glob("*.yaml"))]
# keys a YAML may set to the value beneath it, because they say what the option is whatever its dataclass defaults
# to: `_target_` names the class (config.schema_of tells a group's options apart by it), `name` labels the option in
# run names and reports, and a dataset's file names its paper column and GEAR's rounds for it (§6.3)
STRUCTURAL = {"_target_", "name"}
STRUCTURAL_OF = {"dataset": {"paper_name", "max_rounds"}}
PLACED_BY = {"hipporag": ["agent=hipporag"]}  # a group an agent's defaults list places (at top-level `hipporag`)


def _own(path: Path) -> dict[str, Any]:
    """A YAML file's values, without its defaults list, unresolved."""
    raw = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    assert isinstance(raw, dict), path
    raw.pop("defaults", None)
    return raw


def _layers(path: Path) -> tuple[type, list[Path]]:
    """The schema of a group option's file and the option files it is built on (its own last)."""
    group = path.parent.name
    entries = OmegaConf.to_container(OmegaConf.load(path)).get("defaults", [])  # type: ignore[union-attr]
    schemas = {C.schema_name(group, c.schema): c.settings_class() for c in group_components(group)}
    for entry in entries:
        if isinstance(entry, str) and entry.startswith("/") and entry.endswith("@_here_"):
            return schemas[entry[1:-len("@_here_")]], [path]
        if isinstance(entry, str) and entry != "_self_" and "/" not in entry and "@" not in entry:
            schema, below = _layers(path.parent / f"{entry}.yaml")  # an option of the same group
            return schema, [*below, path]
    raise AssertionError(f"{path}: its defaults list names no schema (- /<group>_<name>_schema@_here_)")


def _restated(own: dict, full: DictConfig, below: DictConfig, where: str) -> list[str]:
    """The keys of ``own`` (a YAML's values) whose value equals the one ``below`` (the layer beneath), recursing into
    nodes a dataclass types (``backend.bm25``, ``llm.server``): ``full`` is ``below`` with ``own`` merged."""
    out = []
    for key, value in own.items():
        assert key in full, f"{where}.{key}: not a setting of its schema"
        node = full._get_node(key)
        typed = isinstance(node, DictConfig) and is_dataclass(OmegaConf.get_type(node))
        if isinstance(value, dict) and typed:
            sub = below.get(key) if isinstance(below.get(key), DictConfig) else None
            if sub is None:  # null beneath (``llm.server``): the dataclass's own defaults are what a key restates
                sub = OmegaConf.structured(OmegaConf.get_type(node))
            out += _restated(value, node, sub, f"{where}.{key}")  # type: ignore[arg-type]
        elif key not in STRUCTURAL | STRUCTURAL_OF.get(where, set()) and key in below and _plain(below, key) == _plain(full, key):
            out.append(f"{where}.{key}")
    return out


def _plain(node: DictConfig, key: str) -> Any:
    return OmegaConf.to_container(OmegaConf.create({"v": node._get_node(key)}), resolve=False, enum_to_str=True)["v"]


def option_findings(path: Path) -> list[str]:
    """The restated values of one group option's file (``file: key``)."""
    schema, files = _layers(path)
    below = OmegaConf.structured(schema)
    for f in files[:-1]:
        below = OmegaConf.merge(below, _own(f))
    full = OmegaConf.merge(below, _own(path))
    rel = path.relative_to(path.parents[2])  # configs/<group>/<option>.yaml
    return [f"{rel}: {key}" for key in _restated(_own(path), full, below, path.parent.name)]


def node_findings() -> list[str]:
    """The restated values of configs/config.yaml's plain nodes (``run``, ``graph``, ...)."""
    own = _own(CONFIGS / "config.yaml")
    out = []
    for name, schema in C.NODE_SCHEMAS.items():
        below = OmegaConf.structured(schema)
        values = own.get(name) or {}
        full = OmegaConf.merge(below, values)
        out += [f"configs/config.yaml: {key}" for key in _restated(values, full, below, name)]
    return out


@pytest.mark.parametrize("path", OPTION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_group_option_sets_only_what_differs_from_its_dataclass(path: Path) -> None:
    assert option_findings(path) == [], "restated defaults (delete them: the dataclass holds each default)"


def test_the_plain_nodes_set_only_what_differs_from_their_dataclass() -> None:
    assert node_findings() == [], "restated defaults (delete them: the dataclass holds each default)"


def test_a_restated_default_is_found(tmp_path: Path) -> None:
    """The check itself: a file restating a default, in a typed nested node too, is named with its key."""
    group = tmp_path / "beam"
    group.mkdir()
    (group / "default.yaml").write_text((CONFIGS / "beam" / "default.yaml").read_text() + "\nwidth: 10\n")
    assert option_findings(group / "default.yaml") == [f"{tmp_path.name}/beam/default.yaml: beam.width"]
    backend = tmp_path / "backend"
    backend.mkdir()
    (backend / "memory.yaml").write_text((CONFIGS / "backend" / "memory.yaml").read_text() + "\nbm25:\n  k1: 1.2\n")
    assert option_findings(backend / "memory.yaml") == [f"{tmp_path.name}/backend/memory.yaml: backend.bm25.k1"]


def _compose(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("config", overrides=overrides)


def _set_keys(path: Path) -> set[str]:
    _, files = _layers(path)
    return {k for f in files for k in _own(f)}


@pytest.mark.parametrize("path", OPTION_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_setting_no_yaml_sets_composes_to_its_dataclass_default(path: Path) -> None:
    group, option = path.parent.name, path.stem
    schema, _ = _layers(path)
    cfg = _compose([*PLACED_BY.get(group, []), f"{group}={option}"])[group]
    default = OmegaConf.structured(schema)
    for f in fields(schema):
        if f.name not in _set_keys(path):
            assert _plain(cfg, f.name) == _plain(default, f.name), f"{group}={option}: {f.name}"


def test_a_plain_node_setting_config_yaml_does_not_set_composes_to_its_default() -> None:
    own = _own(CONFIGS / "config.yaml")
    cfg = _compose([])
    for name, schema in C.NODE_SCHEMAS.items():
        default = OmegaConf.structured(schema)
        for f in fields(schema):
            if f.name not in (own.get(name) or {}):
                assert _plain(cfg[name], f.name) == _plain(default, f.name), f"{name}.{f.name}"
