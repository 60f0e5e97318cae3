"""``compose(...)``: the run config from Hydra overrides, with the CLI's own start-up checks."""

from __future__ import annotations

import os

from omegaconf import DictConfig

__all__ = ["compose"]


def compose(*overrides: str, config_name: str = "config") -> DictConfig:
    """The validated run config of ``gear-repro OVERRIDES...``: the same overrides, the same checks.

    ``compose("agent=gear", "llm=local", "dataset=musique_sample")``. As the CLI does before Hydra: a secret given
    as an override (``llm.params.extra_headers={...}``, a URL with ``user:KEY@``) is moved into a process-private
    environment variable (the config holds only its ``${oc.env:...}`` reference), a key given as ``llm.api_key`` or
    ``llm.api_key_env`` is refused, ``llm.server.*`` under an LLM without a server is refused, and $GEAR_CACHE must
    be a folder; then every setting goes through its schema (:func:`gear_repro.config.validate`). The checks that
    need the built objects (credentials, prompts against the context window, the embedder's weights) run when a
    :class:`~gear_repro.api.Pipeline` is built from it, as the runner runs them.

    Raises:
        ConfigError: an override Hydra cannot compose (it names the override), a setting's former name (it names
            the new one), a setting out of its range, an
            unknown key, a misplaced secret, a ``_target_`` that does not import or a class of your own that does
            not subclass its base (the message names it).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from gear_repro.cli.run import protect_argv
    from gear_repro.config import register_configs, validate
    from gear_repro.llm.server import check_server_overrides
    from gear_repro.pipeline.wiring import check_components
    from gear_repro.reporting.paper import check_papers
    from gear_repro.utils.errors import ConfigError
    from gear_repro.utils.paths import cache_dir, config_dir
    from gear_repro.utils.settings import check_renamed_overrides

    args = protect_argv([str(o) for o in overrides], os.environ)
    check_server_overrides(args)
    check_renamed_overrides(args)
    cache_dir()
    register_configs()
    try:
        with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
            cfg = hydra_compose(config_name, overrides=args)
    except (HydraException, OmegaConfBaseException) as e:
        raise ConfigError(composition_error(e, args)) from e
    validate(cfg)
    check_components(cfg)  # every _target_ imports, a user's class subclasses its base
    check_papers(cfg.get("report") or {})  # as the CLI: a misspelt report.paper fails before any work
    return cfg


def composition_error(e: BaseException, overrides: list[str]) -> str:
    """One line of what Hydra's composition refused, naming the override at fault (Hydra's message names it for a
    value that does not merge; for one that does not parse, the override that fails to parse alone)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    text = str(e).split("Config search path:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("See http")]
    parts: list[str] = []
    for line in lines:  # "Available options in 'retriever':" and its options on one line
        if parts and parts[-1].endswith(":"):
            parts[-1] += f" {line}"
        elif parts and ":" in parts[-1] and not line.endswith(":") and len(parts) > 1:
            parts[-1] += f", {line}"
        else:
            parts.append(line)
    parts = [p.rstrip(".") for p in parts] or [type(e).__name__]
    cause = str(e.__cause__).strip().splitlines()[0] if e.__cause__ is not None and str(e.__cause__).strip() else ""
    if cause:  # the value's own error (a type that does not convert, a key not in the schema)
        parts[0] += f": {cause}"
    msg = "; ".join(parts)
    keys = [o for o in overrides if o in msg or o.split("=", 1)[0].lstrip("+~") in msg]
    if not keys:
        parser = OverridesParser.create()
        for o in overrides:
            try:
                parser.parse_overrides([o])
            except HydraException:
                keys.append(o)
        msg += f" (override {', '.join(keys)})" if keys else f" (overrides: {' '.join(overrides) or 'none'})"
    return f"compose: {msg}"
