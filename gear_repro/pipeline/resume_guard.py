"""Whether a run dir may take this run: its results (predictions, an extraction log, an index build) must come from
the same config, data and prompt files, or the run is refused naming what differs, before anything is written
(the fingerprints themselves: pipeline/resume.py)."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from gear_repro.extraction import EXTRACTION_LOG
from gear_repro.pipeline import run_folder as rf
from gear_repro.pipeline.resources import Resources
from gear_repro.pipeline.resume import data_fingerprint, recorded_environ, what_differs
from gear_repro.pipeline.run_folder import PREDICTIONS
from gear_repro.pipeline.user_code import classes_differ, given_classes
from gear_repro.prompts import prompts_hash
from gear_repro.utils.errors import ConfigError

__all__ = ["check_prompts", "check_resume", "previous_run", "without_limit_passages"]

log = logging.getLogger("gear_repro")

_WHAT = {PREDICTIONS: "predictions", EXTRACTION_LOG: "extracted triples", rf.METRICS: "an index build"}  # in messages


def without_limit_passages(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` without ``dataset.limit_passages``: extracting more passages extends an extraction run."""
    out = copy.deepcopy(cfg)
    with open_dict(out.dataset):
        out.dataset.pop("limit_passages", None)
    return out


def previous_run(run_dir: Path, results: str) -> dict:
    """run.json of the run whose results (``predictions.jsonl``, the extraction log) ``run_dir`` holds, else {}."""
    return rf.read_run_info(run_dir) if (run_dir / results).exists() else {}


def _old_config(run_dir: Path, like: DictConfig) -> DictConfig | None:
    """The run dir's config.yaml (the run whose results it holds), None when absent or unreadable; without
    ``dataset.limit_passages`` when ``like`` is without it (an extraction's fingerprint)."""
    path = run_dir / rf.CONFIG
    try:
        old = OmegaConf.load(path) if path.is_file() else None
    except Exception:  # a damaged copy only costs the message its details
        return None
    if not isinstance(old, DictConfig) or not isinstance(old.get("dataset"), DictConfig):
        return None
    return old if "limit_passages" in like.dataset else without_limit_passages(old)


def check_resume(run_dir: Path, cfg: DictConfig, res: Resources, previous: dict, results: str = PREDICTIONS,
                 key: str = "fingerprint") -> str:
    """The resume fingerprint of ``cfg`` and the data; a ConfigError naming what differs when ``run_dir`` holds
    ``results`` whose run.json (``previous``) ``key`` differs (another config or data). A fingerprint of the format
    that held ``dataset.path`` is accepted when the dir's own config.yaml path gives it (same settings, same data
    content); the run then records the new one."""
    hashes = res.dataset.hashes
    classes = given_classes(res)
    fp = data_fingerprint(cfg, hashes, classes=classes)
    old = previous.get(key)
    if not old or old == fp:
        return fp
    old_cfg = _old_config(run_dir, cfg)
    if old_cfg is not None:
        as_before = copy.deepcopy(cfg)
        with open_dict(as_before):
            as_before.dataset.path = OmegaConf.select(old_cfg, "dataset.path", default=None)
        if old == data_fingerprint(as_before, hashes, with_path=True, classes=classes):
            log.info("%s: run.json's fingerprint is of the format that held dataset.path (%s); same settings "
                     "and data content: resuming, recorded under the new fingerprint", run_dir, as_before.dataset.path)
            return fp
    try:
        diffs = what_differs(old_cfg, cfg, previous.get("data_hashes") or {}, hashes, recorded_environ(previous))
    except Exception:  # a config.yaml of an older layout: the refusal without its details
        diffs = what_differs(None, cfg, previous.get("data_hashes") or {}, hashes)
    diffs = classes_differ(previous.get("components"), classes) + diffs
    why = ("; ".join(diffs) if diffs else "no setting of its config.yaml and no data file differs: what does "
           "is not recorded there (the files of a model given by path, a secret shown as ***)")
    raise ConfigError(
        f"{run_dir} holds {_WHAT[results]} of a different config or different data ({why}; fingerprint "
        f"{old} != {fp}); use a new run dir (hydra.run.dir=...) instead of mixing results")


def check_prompts(run_dir: Path, previous: dict, results: str) -> dict[str, str]:
    """For a run that calls an LLM: its prompt files' hash (run.json ``prompts``), refused when ``run_dir`` holds
    ``results`` made with other prompt files (``previous``: their run.json; an edited template would otherwise mix
    two prompts in one run)."""
    now = prompts_hash()
    old = previous.get("prompts")
    if old and old != now:
        raise ConfigError(
            f"{run_dir} holds {_WHAT[results]} made with other prompt files (gear_repro/prompts/: {old} != {now}); "
            "restore them or use a new run dir (hydra.run.dir=...) instead of mixing two prompts in one run")
    return {"prompts": now}
