"""Resuming a run dir: the fingerprint of what changes results, what differs when a resume is refused, the code
versions that ran its questions, and the questions it already finished (the runner's bookkeeping, docs/ARCHITECTURE.md
"Predictions")."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gear_repro.backends.lucene import LUCENE_TARGET, jar_fingerprint
from gear_repro.config import resolved
from gear_repro.embedding.precision import Precision, QueryPrecision, resolve_device, resolve_precision
from gear_repro.llm.cache import served_base_url
from gear_repro.llm.gguf_weights import served_weights
from gear_repro.pipeline.run_folder import finished_predictions, without_no_result
from gear_repro.utils.hashing import hash_obj, model_path_identity
from gear_repro.utils.provenance import environment
from gear_repro.utils.secrets import redact_url
from gear_repro.utils.settings import RENAMED, flat_settings, saved_config

log = logging.getLogger("gear_repro")


def fingerprint_settings(cfg: DictConfig, with_path: bool = False, environ: Mapping[str, str] | None = None) -> dict:
    """What :func:`run_fingerprint` hashes: the resolved config less the settings that change no result
    (``run_folder.NO_RESULT_SETTINGS``), plus the identities of what serves the LLM and of a local model folder. ``dataset.path`` is left out: the data are
    identified by their content (:func:`data_fingerprint`), so a byte-identical copy of them, or another clone or
    mount of the repo (``${repo:}/data/...``), resumes. ``with_path`` keeps it: the fingerprint run dirs were given
    before (accepted by :func:`~gear_repro.pipeline.resume_guard.check_resume` when the run dir's own path gives it). ``environ``: where
    ``OPENAI_BASE_URL`` is read (default: this process's environment; a run dir's recorded one, :func:`what_differs`)."""
    c = saved_config(resolved(cfg, enum_to_str=False))  # a run dir's config that records a renamed key: the new name
    emb = c.get("embedder")
    if isinstance(emb, dict):  # the precisions that run (`auto` differs between machines); fp32 (queries too)
        # keeps the fingerprint of run dirs written before the settings existed, and bf16 with bf16 queries that of
        # bf16 runs before query_precision
        if emb.get("device") == "auto":  # the device it ran on: a GPU's vectors differ from a CPU's in the last bits
            emb["device"] = resolve_device("auto")
        used = resolve_precision(emb.pop("precision", Precision.fp32), emb.get("device", "cpu"),
                                 emb.get("backend", "torch"))
        queries = QueryPrecision(emb.pop("query_precision", QueryPrecision.same))
        if used is not Precision.fp32:
            emb["precision"] = used.value
            if queries is QueryPrecision.fp32:
                emb["query_precision"] = queries.value
        if emb.get("backend") == "openvino":  # older run dirs' "fp32" ran OpenVINO's own default (bf16 here)
            emb["inference_precision"] = used.value
    without_no_result(c)
    c.get("dataset", {}).pop("limit", None)  # a larger limit extends a run; finished questions stay valid
    if not with_path:
        c.get("dataset", {}).pop("path", None)  # the files' content is in data_fingerprint
    url = served_base_url(OmegaConf.select(cfg, "llm.base_url", default=None),
                          bool(OmegaConf.select(cfg, "llm.server", default=None)), environ)
    if url:  # another server may serve another model: a resume never mixes two servers' replies (secrets masked,
        c["llm"]["endpoint"] = redact_url(url)  # so a rotated key is the same endpoint); the hosted API: as before
    elif (weights := served_weights(OmegaConf.select(cfg, "llm", default=None))):
        c["llm"]["weights"] = weights  # what the harness-started server serves (the shipped pairings: as before)
    if OmegaConf.select(cfg, "backend._target_", default=None) == LUCENE_TARGET:  # the Lucene that ranks, found
        c["backend"]["lucene_jar"] = jar_fingerprint(OmegaConf.select(cfg, "backend.jar", default=None))  # as it runs
    if (files := model_path_identity(OmegaConf.select(cfg, "embedder.model", default=None))):
        c["embedder"]["files"] = files  # a local model folder by content, as its vectors' key
    return c


def run_fingerprint(cfg: DictConfig, with_path: bool = False) -> str:
    """Hash of the settings that change results (:func:`fingerprint_settings`), a renamed setting hashed under its
    former name (``settings.RENAMED``): the run dirs written before the rename keep their fingerprint and resume."""
    settings = fingerprint_settings(cfg, with_path)
    for old, (new, _) in RENAMED.items():
        node, _, key = new.rpartition(".")
        values = settings.get(node)
        if isinstance(values, dict) and key in values:
            values[old.rpartition(".")[2]] = values.pop(key)
    return hash_obj(settings)


def data_fingerprint(cfg: DictConfig, data_hashes: dict, with_path: bool = False,
                     classes: Mapping[str, str] | None = None) -> str:
    """Resume fingerprint: the result-relevant config plus the hashes of the data files (corpus, questions,
    triples), so editing the data and re-running into the same dir never reuses old predictions. Indexes are
    built from these files with settings that are part of the config, so they are covered too. ``with_path``:
    the fingerprint of run dirs written before ``dataset.path`` was left out. ``classes``: role -> class of the
    user's objects the API handed the run (:func:`gear_repro.pipeline.user_code.given_classes`; none: as before)."""
    rec = {"config": run_fingerprint(cfg, with_path), "data": dict(sorted(data_hashes.items()))}
    if classes:
        rec["classes"] = dict(sorted(classes.items()))
    return hash_obj(rec)


# the environment variables the fingerprint reads (fingerprint_settings), recorded in run.json ``environ``
# (credentials and secret query parameters masked) so a refused resume names the run dir's value beside this one's
FINGERPRINTED_ENVIRON = ("OPENAI_BASE_URL",)


def fingerprinted_environ() -> dict[str, str | None]:
    """run.json ``environ``: this process's :data:`FINGERPRINTED_ENVIRON`, secrets masked (None: unset)."""
    return {k: redact_url(v) if (v := os.environ.get(k)) else None for k in FINGERPRINTED_ENVIRON}


def recorded_environ(run_info: dict) -> dict[str, str] | None:
    """The fingerprinted environment a run dir's run read (its run.json ``environ``); None for a run.json from before
    it was recorded (then this process's stands in)."""
    rec = run_info.get("environ")
    if not isinstance(rec, dict):
        return None
    return {k: str(v) for k, v in rec.items() if k in FINGERPRINTED_ENVIRON and v}


_DIFFS_SHOWN = 8  # differing settings a refused resume names at most


def what_differs(old_cfg: DictConfig | None, new_cfg: DictConfig, old_data: dict, new_data: dict,
                 old_environ: Mapping[str, str] | None = None) -> list[str]:
    """What tells a run dir's run from this one, for a refused resume: each fingerprinted setting that differs
    (``run.ks: [5, 10, 15] → [5, 10]``; secrets shown as ``***``, as in config.yaml) and each data file whose
    content hash differs. ``old_cfg``: the dir's config.yaml (None when it has none); ``old_environ``: the
    environment its run read (:func:`recorded_environ`; None: this process's)."""
    from gear_repro.config import redact

    out = []
    if old_cfg is not None:
        old, new = (flat_settings(redact(fingerprint_settings(c, environ=e)))
                    for c, e in ((old_cfg, old_environ), (new_cfg, None)))
        for key in sorted(old.keys() | new.keys()):
            if old.get(key) != new.get(key):
                out.append(f"{key}: {old.get(key, '(unset)')} → {new.get(key, '(unset)')}")
    for name in sorted(old_data.keys() | new_data.keys()):
        if old_data.get(name) != new_data.get(name):
            out.append(f"the {name} file's content (sha256 {old_data.get(name) or '(none)'} → "
                       f"{new_data.get(name) or '(none)'})")
    return out[:_DIFFS_SHOWN] + ([f"{len(out) - _DIFFS_SHOWN} more"] if len(out) > _DIFFS_SHOWN else [])


def code_history(previous: dict, done: int, todo: int, user_code: Mapping[str, str | None] | None = None) -> list[dict]:
    """run.json ``code_history``: the code of every start that ran questions (``git_commit``, ``-dirty`` for
    uncommitted edits, and ``source``, the hash of the package's files, which tells two edits of one dirty tree
    apart; ``user_code``: class -> hash of its source file of each class of the user's in the run,
    :func:`gear_repro.pipeline.user_code.user_sources`), with how many were finished before it; a resume after a code
    change (the harness's or a user's class) appends a second entry, which the report names (the fingerprint leaves
    code out, so a changed method would otherwise mix two methods' records). A run.json from before the history
    counts as one start of its own code."""
    history = [dict(h) for h in previous.get("code_history") or [] if isinstance(h, dict)] if done else []
    if not history and done:
        env = previous.get("environment") or {}
        history = [{"git_commit": env.get("git_commit"), **({"source": env["source"]} if env.get("source") else {}),
                    "finished_before": 0}]
    if todo:
        env = environment()
        last = history[-1] if history else {}
        if last.get("source") and env.get("source") and last["source"] != env["source"]:
            log.warning("resuming a run whose %d finished questions were run by other code (source %s, now %s): "
                        "the report names both versions", done, last["source"], env["source"])
        user = dict(sorted((user_code or {}).items()))
        if history and ("user_code" in last or not user) and last.get("user_code", {}) != user:
            edited = sorted(k for k in last.get("user_code", {}).keys() | user.keys()
                            if last.get("user_code", {}).get(k) != user.get(k))
            log.warning("resuming a run whose %d finished questions were run by another version of the user's code "
                        "(%s): the report names both versions", done, ", ".join(edited))
        history.append({"git_commit": env.get("git_commit"),
                        **({"source": env["source"]} if env.get("source") else {}),
                        **({"user_code": user} if user else {}), "finished_before": done})
    return history


def load_finished(path: Path) -> dict[str, dict]:
    """Finished questions of a run dir: the last record per id, without errored ones (they are retried); a partial
    last line is cut from the file (the run appends after it)."""
    return finished_predictions(path)
