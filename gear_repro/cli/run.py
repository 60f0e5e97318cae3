"""`gear-repro`: run one experiment (or a -m sweep) from Hydra configs in configs/."""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import gear_repro.config  # noqa: F401  (registers ${repo:} and ${cache:})
from gear_repro.utils.errors import GearError
from gear_repro.utils.paths import config_dir

log = logging.getLogger("gear_repro")


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def _main(cfg: DictConfig) -> float | None:
    from gear_repro.runner import Runner

    run_dir = HydraConfig.get().runtime.output_dir
    try:
        metrics = Runner(cfg, run_dir).run()
    except Exception as e:
        cause = _user_error(e)
        if cause is None:
            raise
        log.error("%s", cause)
        print(f"error: {cause}", file=sys.stderr)
        raise SystemExit(2) from e
    print(f"run dir: {run_dir}")
    shown = {k: round(v, 2) for k, v in (metrics or {}).items() if isinstance(v, int | float)}
    print(shown)
    ref = (metrics or {}).get("reference")
    if isinstance(ref, dict):  # stage=extract: our triples vs the dataset's own (e.g. GPT-3.5 OpenIE)
        print("vs the dataset's triples on the same passages:",
              {k: round(v, 3) for k, v in ref.items() if isinstance(v, int | float)})
    return shown.get(str(cfg.get("optimized_metric", "recall@15")))


def _user_error(e: BaseException | None) -> GearError | None:
    """The GearError behind ``e`` (Hydra wraps errors raised while instantiating), if any."""
    while e is not None:
        if isinstance(e, GearError):
            return e
        e = e.__cause__
    return None


def main() -> None:
    _main()


if __name__ == "__main__":
    main()
