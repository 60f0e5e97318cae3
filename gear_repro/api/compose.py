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
        ConfigError: a setting out of its range, an unknown key, a misplaced secret (the message names it).
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    import gear_repro.config  # noqa: F401  (registers ${repo:} and ${cache:})
    from gear_repro.cli.run import protect_argv
    from gear_repro.config import validate
    from gear_repro.llm.server import check_server_overrides
    from gear_repro.reporting.paper import check_papers
    from gear_repro.utils.paths import cache_dir, config_dir

    args = protect_argv([str(o) for o in overrides], os.environ)
    check_server_overrides(args)
    cache_dir()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        cfg = hydra_compose(config_name, overrides=args)
    validate(cfg)
    check_papers(cfg.get("report") or {})  # as the CLI: a misspelt report.paper fails before any work
    return cfg
