"""The run folder's format, owned in one place: the runner writes it, the report and the explorer read it.

    config.yaml        resolved config (secrets redacted)
    run.json           provenance: fingerprint, package versions, data/index hashes and warnings, question subset,
                       timings; an LLM run the hash of its prompt files (``prompts``), an extraction its own
                       fingerprint without ``dataset.limit_passages`` (``extraction_fingerprint``)
    predictions.jsonl  one line per finished question (appended, so an interrupted run resumes)
    metrics.json       recall@k (0-100), EM/F1 with qa=true, tokens, latency, n_errors, the evaluated question ids
    llm_stats.json     LLM cache hits/misses, retries, failures (when an LLM was used)
    failure.json       why the last attempt stopped, when it raised (error, traceback, host, SLURM job); removed by a
                       run that finishes; gear-repro-report lists it under "Unfinished runs"
    .lock              held while the run writes (utils/lock.py); a second run into the dir is refused
    run.log            the CLI's log of the run
    .hydra/            the CLI's copies of Hydra's config, overrides and hydra.yaml

Also here: the one reader of predictions.jsonl (the last record per question id; a partial last line, left by a
killed writer, dropped with a note) and the one list of settings that change no result (left out of the resume
fingerprint, never named by a report tag).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from gear_repro.evaluation.aggregate import check_record
from gear_repro.utils.errors import DataError
from gear_repro.utils.hashing import hash_obj
from gear_repro.utils.io import atomic_open, read_json_object, write_json
from gear_repro.utils.lock import LOCK_FILE

log = logging.getLogger("gear_repro")

CONFIG = "config.yaml"
RUN_INFO = "run.json"
PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
LLM_STATS = "llm_stats.json"
FAILURE = "failure.json"
RUN_LOG = "run.log"
HYDRA_DIR = ".hydra"
HYDRA_OVERRIDES = f"{HYDRA_DIR}/overrides.yaml"
LOCK = LOCK_FILE
# what a run dir holds before metrics.json: a folder with one of these and no metrics.json is an unfinished run
RUN_MARKERS = (PREDICTIONS, FAILURE, RUN_INFO, HYDRA_OVERRIDES)

# Settings that change no result: a resume across them reuses the finished questions (they are left out of the
# fingerprint) and a report tag never names them. ``None``: the whole node.
NO_RESULT_SETTINGS: dict[str, frozenset[str] | None] = {
    "hydra": None, "name": None,
    "report": None,  # where the report places and labels a row (a tag still shows it, after the run's settings)
    "run": frozenset({"progress", "resume", "fail_fast", "allow_errors", "workers", "capacity_check"}),
    "dataset": frozenset({"allow_unknown_source"}),
    "hipporag": frozenset({"capacity_check"}),  # the graph build's memory check (run.capacity_check)  # a start-up check: the data and the results are the same
    "backend": frozenset({"heap_mb", "ram_buffer_mb", "jar"}),  # backend=lucene's JVM and writer memory; its jar
    "embedder": frozenset({"num_threads", "show_progress", "batch_size", "cache", "cache_chunk_rows",
                           "cache_chunk_s", "cuda_graphs"}),  # graphs: the eager passes' bits (bench_gpu)
    "llm": frozenset({"timeout_s", "max_reply_bytes", "max_retries", "backoff_base_s", "backoff_max_s", "concurrency",
                      "cache", "cache_dir", "cache_mode", "server", "record_prompts", "base_url",
                      "cache_lock_timeout_s", "check_endpoint", "estimate_latency_s", "estimate_output_tokens",
                      "estimate_warn_usd", "estimate_warn_s"}),
}
# Of those, the settings that name what serves the model: the fingerprint holds their identity instead of their
# value (resume.fingerprint_settings: the endpoint without secrets, the weights served and the server flags that
# change replies, backend=lucene's jar by name and size), and a tag names them, since two values may be two models.
BY_IDENTITY = frozenset({"llm.base_url", "llm.server.model_path", "llm.server.extra_args", "backend.jar"})


def changes_no_result(key: str) -> bool:
    """Whether the dotted setting ``key`` (``llm.server.n_threads``) is one of :data:`NO_RESULT_SETTINGS` and not
    one of :data:`BY_IDENTITY`."""
    if any(key == k or key.startswith(f"{k}.") for k in BY_IDENTITY):
        return False
    group, _, rest = key.partition(".")
    if group not in NO_RESULT_SETTINGS:
        return False
    sub = NO_RESULT_SETTINGS[group]
    return sub is None or rest.split(".", 1)[0] in sub


def without_no_result(config: dict) -> dict:
    """``config`` (a plain resolved dict, changed in place and returned) less :data:`NO_RESULT_SETTINGS`."""
    for key, sub in NO_RESULT_SETTINGS.items():
        if sub is None:
            config.pop(key, None)
        elif isinstance(config.get(key), dict):
            config[key] = {k: v for k, v in config[key].items() if k not in sub}
    return config


# -- predictions.jsonl --------------------------------------------------------------------------------------------
def read_predictions(path: str | Path, notes: list[str] | None = None, *, repair: bool = False) -> dict[str, dict]:
    """The records of a predictions.jsonl by question id (the last record per id, in first-seen order; {} without
    the file). A last line without its newline that is not a whole JSON object was left by a killed writer: it is
    dropped with a warning (and a note in ``notes``); ``repair`` (a run about to append) also cuts it from the file,
    or ends a whole last record with its newline. Any other bad line is a DataError naming file and line."""
    path = Path(path)
    if not path.exists():
        return {}
    data = path.read_bytes()
    lines = data.split(b"\n")
    last: dict[str, dict] = {}
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if n == len(lines):  # no newline after it: the line a killed writer left unfinished
                msg = f"{path}:{n}: dropped a partial last line (the run was interrupted while writing)"
                log.warning(msg)
                if notes is not None:
                    notes.append(msg)
                if repair:
                    with open(path, "rb+") as f:
                        f.truncate(data.rfind(b"\n") + 1)
                continue
            raise DataError(f"{path}:{n}: malformed prediction line ({e})") from None
        if not isinstance(rec, dict):
            raise DataError(f"{path}:{n}: expected a JSON object")
        check_record(rec, f"{path}:{n}")
        if repair and n == len(lines):  # a whole record without its newline (an edited file): kept, then ended
            with open(path, "ab") as f:
                f.write(b"\n")
        last[str(rec["id"])] = rec
    return last


def finished_predictions(path: str | Path) -> dict[str, dict]:
    """The finished questions of a run dir's predictions (:func:`read_predictions`, repaired for appending),
    without errored ones (a resume retries them)."""
    return {qid: rec for qid, rec in read_predictions(path, repair=True).items() if not rec.get("error")}


# -- run.json, config.yaml and the other json files ---------------------------------------------------------------
def write_json_file(run_dir: Path, name: str, obj: Any) -> Path:
    """Write ``run_dir/name`` atomically (a killed writer leaves the old file whole)."""
    path = Path(run_dir) / name
    write_json(path, obj)
    return path


# run.json section of what the report needs to know of the run's classes, written by the runner so that the report of
# a run never imports today's classes to learn how yesterday's behaved: ``k_dependent`` (the method ran once per
# evaluated k), ``needs_vectors`` (a class of the run embeds), ``figure2_reference`` (Fig. 2's reference line)
REPORT_FLAGS = "report_flags"


def write_run_info(run_dir: Path, sections: dict[str, Any]) -> Path:
    """Write run.json from its sections (``fingerprint``, ``environment``, ``data_hashes``, ``code_history``, ...),
    atomically, replacing the file."""
    return write_json_file(run_dir, RUN_INFO, dict(sections))


def read_run_info(run_dir: Path) -> dict:
    """The run dir's run.json ({} without one; a DataError naming it when it is not a JSON object)."""
    path = Path(run_dir) / RUN_INFO
    return read_json_object(path) if path.is_file() else {}


def update_run_info(run_dir: Path, sections: dict[str, Any]) -> Path:
    """Replace or add ``sections`` of the run dir's run.json, keeping the others."""
    return write_run_info(run_dir, {**read_run_info(run_dir), **sections})


def code_versions(history: object) -> list[str]:
    """The distinct code versions of a run.json ``code_history``, in order, each as ``<commit[:12]>[-dirty]`` and,
    where recorded, ``source <hash[:8]>``: entries are told apart by their source hash (two edits of one dirty tree
    share a commit), else by their commit."""
    seen: dict[str, str] = {}
    for h in history if isinstance(history, list) else []:
        if not isinstance(h, dict):
            continue
        commit, source = str(h.get("git_commit")), h.get("source")
        user = h.get("user_code") if isinstance(h.get("user_code"), dict) else {}
        user_id = hash_obj(user, 8) if user else ""  # the user's classes' sources, edited between two starts
        label = commit[:12] + ("-dirty" if commit.endswith("-dirty") else "") + (f" source {str(source)[:8]}"
                                                                                if source else "")
        label += f" user code {user_id}" if user_id else ""
        seen.setdefault((str(source) if source else commit) + user_id, label)
    return list(seen.values())


def write_config(run_dir: Path, config: dict) -> Path:
    """Write config.yaml (``config``: the resolved, redacted config as a plain dict), atomically."""
    from omegaconf import OmegaConf

    path = Path(run_dir) / CONFIG
    with atomic_open(path) as f:
        f.write(OmegaConf.to_yaml(OmegaConf.create(config)))
    return path


def read_json_file(run_dir: Path, name: str) -> dict:
    """``run_dir/name`` as a JSON object ({} without the file)."""
    path = Path(run_dir) / name
    return read_json_object(path) if path.is_file() else {}


def recorded_stage(run_dir: Path) -> str | None:
    """The stage (``retrieve``, ``index``, ``extract``) of the run a dir holds: its config.yaml's ``stage`` (a
    config without one is a retrieve run's), else its metrics.json's; None for a dir that holds no run."""
    import yaml

    run_dir = Path(run_dir)
    try:
        config = yaml.safe_load((run_dir / CONFIG).read_text(encoding="utf-8")) if (run_dir / CONFIG).is_file() else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        config = None
    if isinstance(config, dict) and config:
        return str(config.get("stage") or "retrieve")
    metrics = read_json_file(run_dir, METRICS) if (run_dir / METRICS).is_file() else {}
    if metrics:
        return str(metrics.get("stage") or "retrieve")
    return None
