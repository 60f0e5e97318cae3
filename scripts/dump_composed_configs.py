"""Dump the composed config of every config group option, every experiment preset and the agent x expansion and
agent x retriever crosses (``OmegaConf.to_yaml(resolve=False)``, plus the start-up validation's verdict) into one
file each, so that a refactoring of the schemas can be checked to change no composed value: dump before and
after, then ``diff -r``.

    PYTHONPATH=$PWD python scripts/dump_composed_configs.py OUT_DIR
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gear_repro.config import register_configs
from gear_repro.utils.paths import config_dir

PLACED_BY = {"hipporag": ["agent=hipporag"]}  # a group an agent's defaults list places (at top-level `hipporag`)


def options(group: str) -> list[str]:
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def override_sets() -> list[list[str]]:
    """Every option of every group once, every preset, and the agent x expansion / agent x retriever crosses."""
    groups = sorted(p.name for p in config_dir().iterdir() if p.is_dir() and p.name not in ("experiment", "hydra"))
    runs: list[list[str]] = [[]]
    runs += [[*PLACED_BY.get(g, []), f"{g}={o}"] for g in groups for o in options(g)]
    runs += [[f"experiment={e}"] for e in options("experiment")]
    runs += [[f"agent={a}", f"expansion={x}"] for a, x in itertools.product(options("agent"), options("expansion"))]
    runs += [[f"agent={a}", f"retriever={r}"] for a, r in itertools.product(options("agent"), options("retriever"))]
    return runs


def dump(out: Path) -> int:
    from gear_repro import config as C  # registers the schemas

    out.mkdir(parents=True, exist_ok=True)
    n = 0
    register_configs()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        for overrides in override_sets():
            name = "_".join(overrides).replace("/", "-") or "default"
            try:
                cfg = compose("config", overrides=overrides)
                text = OmegaConf.to_yaml(cfg, resolve=False)
                try:
                    C.validate(cfg)
                    verdict = "ok"
                except Exception as e:  # recorded: a refactoring must not change which configs validate
                    verdict = f"{type(e).__name__}: {e}"
                text += f"# validate: {verdict}\n"
            except Exception as e:
                text = f"# compose failed: {type(e).__name__}: {e}\n"
            (out / f"{name}.yaml").write_text(text, encoding="utf-8")
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="folder to write one <overrides>.yaml per composed config into")
    print(f"{dump(ap.parse_args().out)} configs written")


if __name__ == "__main__":
    main()
