"""How a component is declared: one :class:`Component` per class a config may name, in the component's own folder,
collected by :mod:`gear_repro.registry` (docs/ARCHITECTURE.md "Registry").

A declaration names its class and settings dataclass by import path, so reading it imports neither: the config's
validation imports only the settings of the classes a config names, the report only the hooks it shows. It holds
what the central modules used to list for it: its Hydra group and schema name (``config.py``), how the wiring hands
its constructor its dependencies (``pipeline/wiring.py``), where its report hooks are (``methods.report_hooks()``),
the LLM calls a question can make (``pipeline/estimate.py``) and its own start-up check (the runner's preflight).

A base layer module: the retrievers below the methods declare theirs too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Component", "Dependency", "PlannedCall", "PromptSample", "load"]

# the run's shared object a dependency name stands for (pipeline/components.py:DEPENDENCIES), built on demand
Dependency = Callable[[str], Any]


def load(path: str) -> Any:
    """The object ``path`` names: ``pkg.module.Name`` or ``pkg.module:Name`` (imported on the call)."""
    module, _, name = path.rpartition(":") if ":" in path else path.rpartition(".")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class PromptSample:
    """What the estimate fills a planned prompt with: the question's text, the prompt's passages (the question's gold
    passages, then corpus passages drawn) and a gist memory of triples made of the question's own words."""

    question: str
    passages: Sequence[Any]
    triples: Sequence[tuple[str, str, str]]


@dataclass(frozen=True)
class PlannedCall:
    """One kind of LLM call a question can make (an upper bound): its prompt ``template``
    (gear_repro/prompts/templates/), how many ``calls`` a question makes at most, the ``passages`` each prompt
    carries, and the template's values for a sample (``values``)."""

    template: str
    calls: int
    passages: int
    values: Callable[[PromptSample], Mapping[str, Any]]


@dataclass(frozen=True)
class Component:
    """The one declaration of a component class.

    group, schema: its Hydra config group and schema name there (stored as ``config.schema_name(group, schema)``;
        the group's YAML options list it first in their defaults).
    settings: its settings dataclass, or its import path (imported only when a config names the class).
    target: the ``_target_`` its configs name (its settings dataclass's ``_target_``; None for settings of no class:
        the beam search's, the dataset's); ``aliases``: other paths of the same class (the module it is defined in,
        former paths of run dirs written before a move).
    wiring: ``(config node, dependency) -> constructor dependencies``; None: by constructor argument name (each
        argument the node does not set and :data:`~gear_repro.pipeline.components.DEPENDENCIES` names).
    recursive: Hydra instantiates ``_target_`` nodes nested in its settings (the retrievers', the expansions').
    report: import path of its :class:`~gear_repro.methods.report_contract.ReportHooks` (None: no hooks); the
        hooks' ``targets`` are this declaration's.
    llm_plan: agents: ``(run config) -> [PlannedCall]``, the calls a question can make (the estimate said before a
        run; None: no estimate); the QA reader's too, and a retriever's that an agent searches, its calls a search
        (HippoRAG's query NER, which HippoRAG w/ IRCoT makes at each round).
    preflight: ``(its config node) -> None``: a check of its settings run at start-up, before any question (a
        ConfigError naming the setting).
    """

    group: str
    schema: str
    settings: type | str
    target: str | None = None
    aliases: tuple[str, ...] = ()
    wiring: Callable[[Any, Dependency], dict[str, Any]] | None = None
    recursive: bool = False
    report: str | None = None
    llm_plan: Callable[[Any], list[PlannedCall]] | None = None
    preflight: Callable[[Any], None] | None = None

    @property
    def targets(self) -> tuple[str, ...]:
        """Every path the class is named by (its ``_target_`` first)."""
        return (self.target, *self.aliases) if self.target else self.aliases

    def settings_class(self) -> type:
        """The settings dataclass (imported on the first call for a declaration by path)."""
        return self.settings if isinstance(self.settings, type) else load(self.settings)

