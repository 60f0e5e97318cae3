"""How a component declares its settings (docs/ARCHITECTURE.md "Configs"): one :class:`Settings` dataclass beside
the component, which is at once its config group's Hydra schema, its constructor's settings and what its
``describe()`` records. Choices are ``str`` Enums (:class:`Choice`) coerced with :func:`choice`, numeric ranges are
fields declared with :func:`num`, both checked by :func:`check_fields` when the dataclass is built (a component
built directly) and by ``gear_repro/config.py`` at start-up (a composed config): a value is declared and checked
in one place.
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, field, fields
from enum import Enum
from typing import Any, ClassVar, TypeVar

from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf

from gear_repro.utils.errors import ConfigError


class Choice(str, Enum):
    """A setting with a fixed set of values: member names equal the values (one exception: ``AnswerMetric``), so
    code compares members with plain strings and JSON/YAML write the value."""

    def __str__(self) -> str:
        return self.value


E = TypeVar("E", bound=Enum)


def choice(enum: type[E], value: Any, key: str) -> E:
    """``enum(value)`` (a member's value, or its name: OmegaConf's Enum fields take names), or a ConfigError naming
    ``key`` and the allowed values."""
    try:
        return enum(value)
    except ValueError:
        if isinstance(value, str) and value in enum.__members__:
            return enum[value]
        raise ConfigError(f"{key} must be one of {[m.value for m in enum]}, got '{value}'") from None


def flat_settings(node: object, skip: frozenset[str] | set[str] = frozenset(), prefix: str = "") -> dict[str, str]:
    """A plain config container as ``{dotted key: its value as canonical JSON}`` (lists are values), without the
    top-level keys in ``skip``: what two runs' configs are compared by (report tags, a refused resume)."""
    if isinstance(node, dict):
        out: dict[str, str] = {}
        for k, v in node.items():
            if not prefix and k in skip:
                continue
            out.update(flat_settings(v, skip, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: json.dumps(node, sort_keys=True, ensure_ascii=False)}


# -- renamed settings ------------------------------------------------------------------------------------------
# settings that had another name: old dotted key -> (new key, what it is). An override of the old name is refused
# naming the new one (Hydra's own message only says the key is not in the schema); a run folder's saved config that
# records the old key is read under the new one (saved_config)
RENAMED: dict[str, tuple[str, str]] = {
    "run.base_k": ("run.fixed_k", "with run.matched_k=false, the one k every question retrieves at; null = max(run.ks)"),
}


def check_renamed_overrides(overrides: list[str] | tuple[str, ...]) -> None:
    """A ConfigError for a command-line override (``run.base_k=20``, ``+run.base_k=20``, a sweep too) of a
    :data:`RENAMED` setting, naming its new name."""
    for o in overrides:
        key = str(o).split("=", 1)[0].lstrip("+~")
        if key in RENAMED:
            new, what = RENAMED[key]
            value = str(o).split("=", 1)[1] if "=" in str(o) else "..."
            raise ConfigError(f"{key} is now {new} ({what}): use {new}={value}")


def saved_config(config: dict) -> dict:
    """A run folder's saved config (a plain dict, changed in place and returned) with every :data:`RENAMED` key under
    its new name, so a run written before a rename reads (reports, a resume's comparison) as one written after."""
    for old, (new, _) in RENAMED.items():
        old_node, _, old_key = old.rpartition(".")
        new_node, _, new_key = new.rpartition(".")
        node = config.get(old_node)
        if isinstance(node, dict) and old_key in node and old_node == new_node:
            value = node.pop(old_key)
            node.setdefault(new_key, value)
    return config


# -- numeric ranges -----------------------------------------------------------------------------------------
Range = dict[str, float | None]


def num(default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None,
        lt: float | None = None) -> Any:
    """A numeric dataclass field with its allowed range (``ge`` <= v, ``gt`` < v, v <= ``le``, v < ``lt``; null
    always allowed). Every int/float field of a config schema declares one (tested)."""
    return field(default=default, metadata={"range": {"ge": ge, "gt": gt, "le": le, "lt": lt}})


def range_text(rng: Range) -> str:
    """">= 1", "> 0", ">= 0 and <= 2"."""
    ops = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
    return " and ".join(f"{op} {rng[k]:g}" for k, op in ops if rng.get(k) is not None)


def in_range(value: float, rng: Range) -> bool:
    ge, gt, le, lt = (rng.get(k) for k in ("ge", "gt", "le", "lt"))
    return ((ge is None or value >= ge) and (gt is None or value > gt) and (le is None or value <= le)
            and (lt is None or value < lt))


def check_number(key: str, value: Any, rng: Range) -> None:
    """ConfigError naming ``key`` when a number is not finite or outside ``rng`` (None and non-numbers pass)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and not (
            math.isfinite(value) and in_range(value, rng)):
        raise ConfigError(f"{key} must be {range_text(rng)} (got {value})")


def enum_of(annotation: Any) -> type[Enum] | None:
    """The Enum class of a field annotation (``X`` or ``X | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, Enum)), None)
    return None


def refuse_unknown(path: str, given: Any, schema: type, owner: str = "") -> None:
    """A ConfigError naming the first key of ``given`` (a mapping or its keys) that the dataclass ``schema`` does not
    declare: ``<path>.<key> is not a setting of <path> (<owner>; its settings: ...)``, the one message of every
    settings group (config schemas, ``beam``, ``beam.scorer_options``, ``backend.dense``)."""
    known = sorted(f.name for f in fields(schema) if f.name != "_target_")
    unknown = sorted(str(k) for k in given if str(k) not in known and str(k) != "_target_")
    if unknown:
        listed = f"its settings: {', '.join(known)}" if known else "it takes none"
        raise ConfigError(f"{path}.{unknown[0]} is not a setting of {path} ({owner + '; ' if owner else ''}{listed})")


def check_fields(obj: Any, prefix: str) -> None:
    """Coerce the Enum fields of a settings dataclass with :func:`choice` and check its :func:`num` ranges, errors
    naming ``<prefix>.<field>``: the same declaration the config schema checks, for an object built directly."""
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is MISSING or (isinstance(value, str) and value == MISSING):  # a mandatory field left unset
            raise ConfigError(f"{prefix}.{f.name} must be set (it has no default)")
        enum = enum_of(hints[f.name])
        if enum is not None and value is not None:
            setattr(obj, f.name, choice(enum, value, f"{prefix}.{f.name}"))
        if "range" in f.metadata:
            check_number(f"{prefix}.{f.name}", value, f.metadata["range"])


def as_dict(value: Any) -> dict[str, Any]:
    """A mapping setting (``llm_params``, ``ner_params``, ...) as a plain dict: a config node resolved, None = {}."""
    if isinstance(value, DictConfig):
        return OmegaConf.to_container(value, resolve=True)  # type: ignore[return-value]
    return dict(value or {})


S = TypeVar("S", bound="Settings")


class Settings:
    """Base of a component's settings dataclass (``@dataclass class GearAgentSettings(Settings)``), declared beside
    the component: its fields (``_target_`` and ``name`` first, where the group instantiates it) are the config
    group's Hydra schema (registered by ``gear_repro/config.py``), the keyword settings of the constructor
    (:meth:`of`) and, as :meth:`asdict`, what ``describe()`` records in run.json. ``config_key`` is the config
    path the errors name (``agent``, ``hipporag``, ``embedder``, ...)."""

    config_key: ClassVar[str] = ""

    def __post_init__(self) -> None:
        check_fields(self, self.config_key)

    @classmethod
    def of(cls: type[S], settings: S | Mapping[str, Any] | None = None, owner: str = "", **given: Any) -> S:
        """The settings of a component built from ``settings`` (an instance, a mapping, a config node) and/or
        keyword settings (Hydra's instantiate passes them so); an unknown key is refused naming
        ``<config_key>.<key>`` and ``owner`` (the class), a value outside its choices or range too."""
        if isinstance(settings, cls) and not given:
            return settings
        merged = {k: OmegaConf.to_container(v, resolve=True) if isinstance(v, DictConfig | ListConfig) else v
                  for k, v in {**(asdict(settings) if isinstance(settings, cls) else as_dict(settings)),
                               **given}.items()}  # a config node's values as plain data (describe() writes them)
        merged.pop("_target_", None)  # the class being built is the target
        refuse_unknown(cls.config_key, merged, cls, owner)
        return cls(**merged)

    def asdict(self, *skip: str) -> dict[str, Any]:
        """The settings as a plain dict without ``_target_`` (and ``skip``): ``describe()``'s record."""
        return {k: v for k, v in asdict(self).items() if k != "_target_" and k not in skip}  # type: ignore[call-overload]
