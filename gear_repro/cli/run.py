"""`gear-repro`: run one experiment (or a -m sweep) from Hydra configs in configs/.

The working directory is on the import path (as with ``python -m``), so a ``_target_`` may name a module of your
own in it.

Before Hydra sees the command line: a secret given as an override (``backend.password=...``,
``llm.params.extra_headers={...}``, a URL with ``user:KEY@``) is moved into a process-private environment variable
and replaced by an ``${oc.env:...}`` reference, so ``.hydra/`` copies and ``multirun.yaml`` never hold it; log
lines are redacted (utils/secrets.py); a key passed by mistake as
``llm.api_key_env`` and a ``hydra.run.dir`` that is a file are refused with one line. Exit codes: 0 ok,
1 the run had errored questions (unless ``run.allow_errors=true``), 2 a user error, 130 interrupted. Under a launcher
that runs jobs in other processes (hydra/launcher=slurm|joblib) a job with errored questions fails itself
(``QuestionsFailed``, after writing its results), so the sweep command re-raises it and exits non-zero.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue

from gear_repro.config import register_configs
from gear_repro.llm.client import looks_like_env_name
from gear_repro.llm.server import check_server_overrides
from gear_repro.pipeline.run_folder import HYDRA_DIR
from gear_repro.utils.errors import ConfigError, GearError
from gear_repro.utils.lock import RunDirInUse, RunDirLock
from gear_repro.utils.paths import cache_dir, config_dir
from gear_repro.utils.secrets import (
    install_log_redaction,
    is_secret_override,
    redact_text,
    register_override,
)
from gear_repro.utils.settings import check_renamed_overrides
from gear_repro.utils.slurm import check_controller

register_configs()  # jobs a launcher starts compose in a process that imports this module, not main()

log = logging.getLogger("gear_repro")

SECRET_ENV_PREFIX = "GEAR_REPRO_SECRET_"


_ERRORED_RUNS: list[str] = []  # run dirs with errored questions (a sweep goes on; the exit code says so at the end)


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="config")
def _main(cfg: DictConfig) -> float | None:
    from gear_repro.pipeline.runner import Runner
    from gear_repro.reporting.paper import check_papers

    install_log_redaction()  # Hydra has set up the console and run.log handlers by now
    run_dir = HydraConfig.get().runtime.output_dir
    started = time.time()
    try:
        check_papers(cfg.get("report") or {})  # a misspelt report.paper fails now, not after the run at the report
        metrics = Runner(cfg, run_dir, on_start=lambda: save_hydra_copies(cfg, run_dir)).run()
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished questions are saved in {run_dir}; re-run the same command to resume",
              file=sys.stderr)
        _exit_now_if_questions_still_wait(130)
        raise SystemExit(130) from None
    except Exception as e:
        cause = _user_error(e)
        if cause is None:
            raise
        if not isinstance(cause, RunDirInUse):  # else run.log is the live run's own log: the console only
            log.error("%s", cause)
            if HydraConfig.get().mode == RunMode.MULTIRUN:  # a sweep's job: the report lists it (a single run's
                _record_startup_failure(Path(run_dir), cause, started)  # refusal is on the console only)
        print(f"error: {redact_text(str(cause))}", file=sys.stderr)
        raise SystemExit(2) from e
    print(f"run dir: {run_dir}")
    shown = {k: round(v, 2) for k, v in (metrics or {}).items() if isinstance(v, int | float)}
    print(shown)
    ref = (metrics or {}).get("reference")
    if isinstance(ref, dict):  # stage=extract: our triples vs the dataset's own (e.g. GPT-3.5 OpenIE)
        print("vs the dataset's triples on the same passages:",
              {k: round(v, 3) for k, v in ref.items() if isinstance(v, int | float)})
    _warn_reply_failures((metrics or {}).get("agent_stats"))
    _warn_context_dropped((metrics or {}).get("agent_stats"), cfg)
    n_err = int((metrics or {}).get("n_errors") or 0)
    if n_err:
        print(f"WARNING: {n_err} of {metrics.get('n_questions')} questions failed and are scored as misses "
              f"(see 'error' in {Path(run_dir) / 'predictions.jsonl'}); re-run the same command to retry them",
              file=sys.stderr)
        if not cfg.run.get("allow_errors", False):
            if not _in_process(HydraConfig.get()):  # a SLURM/joblib job: the job itself fails, so the sweep does
                raise QuestionsFailed(f"{n_err} of {metrics.get('n_questions')} questions failed in {run_dir} (see "
                                      "'error' in predictions.jsonl; run.allow_errors=true accepts them)")
            _ERRORED_RUNS.append(str(run_dir))
    objective = str(cfg.get("optimized_metric", "recall@15"))
    if metrics and cfg.get("stage", "retrieve") == "retrieve" and objective not in shown:
        # a sweeper would optimise None: say which keys exist
        print(f"WARNING: optimized_metric={objective} is not a number of this run's metrics.json (has: "
              f"{', '.join(sorted(shown))}); the sweeper gets None", file=sys.stderr)
    return shown.get(objective)


def _record_startup_failure(run_dir: Path, error: GearError, started: float) -> None:
    """failure.json for a sweep's job refused before its runner started (a setting checked at start-up): without it
    the job dir held only run.log and the report listed neither it nor its error. Not in a dir holding a
    finished run (its results stand), one a live run holds, or one a runner already recorded in this attempt."""
    from gear_repro.pipeline import run_folder as rf
    from gear_repro.pipeline.runner import record_failure

    failure = run_dir / rf.FAILURE
    if (run_dir / rf.METRICS).exists() or (failure.exists() and failure.stat().st_mtime >= started):
        return
    # a live run's dir (its lock held): left alone; a read-only or full disk: the console has the error
    with contextlib.suppress(OSError, GearError), RunDirLock(run_dir):
        record_failure(run_dir, error)


def _warn_context_dropped(stats: object, cfg: DictConfig) -> None:
    """One warning when prompts dropped passages to fit ``llm.context_window``: the run's numbers are of prompts
    with fewer passages than its settings say (counted in agent_stats; the report notes it too)."""
    from gear_repro.evaluation.aggregate import context_dropped

    found = context_dropped(stats)
    if found:
        window = (cfg.get("llm") or {}).get("context_window")
        print(f"WARNING: passages dropped to fit llm.context_window={window} "
              f"({', '.join(f'{k}={v}' for k, v in found.items())}): these prompts read fewer passages than the "
              "run's settings say. A smaller llm.max_tokens, fewer demonstrations or a model with a larger window "
              "keeps them (docs/llm.md)", file=sys.stderr)


def _warn_reply_failures(stats: object) -> None:
    """One warning naming the methods' counters of LLM replies that did not parse (``ReportHooks.reply_failures``),
    when any is non-zero: such questions are scored, each method handling the reply as its reading says."""
    from gear_repro.llm.parsing import ECHO_COUNTER, TRUNCATED_COUNTER
    from gear_repro.methods import report_hooks

    if not isinstance(stats, dict):
        return
    seen = dict.fromkeys(k for hook in report_hooks() for k in hook.reply_failures)
    found = {k: stats[k] for k in seen if isinstance(stats.get(k), int) and stats[k] > 0}
    if found:
        print("WARNING: LLM replies that did not parse (scored, handled as each method's reading says; "
              f"metrics.json agent_stats, the report's method tables): "
              f"{', '.join(f'{k}={v}' for k, v in found.items())}", file=sys.stderr)
    echoed = stats.get(ECHO_COUNTER)
    if isinstance(echoed, int) and echoed > 0:
        print(f"WARNING: {echoed} LLM replies repeated their prompt ({ECHO_COUNTER}); only what followed the "
              "repeat was parsed, an empty rest counts as a reply that did not parse. A server that echoes the "
              "prompt or a model without its chat template gives this (docs/llm.md, 'Replies that echo the "
              "prompt')", file=sys.stderr)
    truncated = stats.get(TRUNCATED_COUNTER)
    if isinstance(truncated, int) and truncated > 0:
        print(f"WARNING: {truncated} LLM replies were cut off at max_tokens ({TRUNCATED_COUNTER}, finish_reason "
              "'length') and parsed as they are: raise llm.max_tokens (or the component's max_tokens)", file=sys.stderr)


class QuestionsFailed(RuntimeError):
    """A run of a sweep job had errored questions (run.allow_errors=false): the job fails after writing its results
    (submitit returns the exception to the sweep command, which raises it)."""


def _in_process(hc: object) -> bool:
    """Whether Hydra runs this job in the process of the command (no launcher, or the basic launcher), so the
    command's exit code can report the job's errored questions."""
    target = str(getattr(getattr(hc, "launcher", None), "_target_", "") or "")
    return not target or target.endswith("BasicLauncher")


def save_hydra_copies(cfg: DictConfig, run_dir: str | Path) -> None:
    """Hydra's ``.hydra/{config,hydra,overrides}.yaml``, secrets redacted (``config.redact``).

    configs/config.yaml sets ``hydra.output_subdir: null`` so Hydra itself writes nothing there: the runner calls
    this once the run dir is locked and its resume check passed, so a run refused for a different config never
    overwrites the copies of the run already in the dir."""
    from omegaconf import OmegaConf

    from gear_repro.config import redact
    from gear_repro.utils.io import atomic_open

    hc = HydraConfig.get()
    nodes = {"config.yaml": cfg, "hydra.yaml": OmegaConf.create({"hydra": hc}), "overrides.yaml": hc.overrides.task}
    for name, node in nodes.items():
        with atomic_open(Path(run_dir) / HYDRA_DIR / name) as f:
            f.write(OmegaConf.to_yaml(OmegaConf.create(redact(OmegaConf.to_container(node, resolve=False)))))


def _exit_now_if_questions_still_wait(code: int) -> None:
    """After Ctrl-C with ``run.workers`` > 1 the question threads may still wait on LLM replies (up to
    ``llm.timeout_s`` × retries) and the interpreter would join them at exit: leave at once instead. Their records
    were never written (the run dir holds only finished questions, its lock is released); nothing else is lost."""
    import threading

    from gear_repro.pipeline.runner import QUESTION_THREADS

    if any(t.name.startswith(QUESTION_THREADS) and t.is_alive() for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        logging.shutdown()
        os._exit(code)


def _user_error(e: BaseException | None) -> GearError | None:
    """The GearError behind ``e`` (Hydra wraps errors raised while instantiating), if any; an OSError naming a file
    (disk full, read-only) becomes one (``utils.io.output_error``), and so does a mandatory ``???`` value the run
    reads."""
    from gear_repro.utils.io import output_error

    while e is not None:
        if isinstance(e, GearError):
            return e
        if isinstance(e, MissingMandatoryValue | InterpolationToMissingValueError):  # a preset's `???` left unset
            what = str(e).strip().splitlines()[0].split("Missing mandatory value: ")[-1]
            via = f" (via {e.full_key})" if e.full_key else ""
            return ConfigError(f"{what} has no value and this run reads it{via}; set it on the command line "
                               f"({what}=...)")
        if isinstance(e, OSError) and e.filename:
            return output_error(e.filename, e)
        e = e.__cause__
    return None


def _unquote(v: str) -> str:
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v


_SWEEP_FUNCTION = re.compile(r"^\s*(choice|range|interval|glob|sort|shuffle|tag)\s*\(")


def _split_top_level(value: str) -> list[str]:
    """``value`` split at the commas outside quotes and brackets (Hydra's sweep syntax ``a,b,c``)."""
    parts, depth, quote, cur = [], 0, "", ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    return [*parts, cur]


def _hide(name: str, value: str, var: str, environ: dict[str, str] | os._Environ) -> str:
    """Store one secret value in ``environ[var]``; the interpolation that reads it back (a header map decoded)."""
    value = _unquote(value)
    register_override(name, value)
    environ[var] = value
    if value.lstrip().startswith("{"):  # a map (header names, whole nodes): decoded back into one
        return f"'${{oc.decode:${{oc.env:{var}}}}}'"  # quoted: the override grammar nests interpolations in quotes
    return f"${{oc.env:{var}}}"


def protect_argv(argv: list[str], environ: dict[str, str] | os._Environ = os.environ) -> list[str]:
    """The command line with every secret override's value moved into ``environ`` (see the module doc).

    Secret overrides: secret-looking keys (``*.api_key``, ``*.password``, ...), any ``*headers`` key (every header
    value is a secret) and any value holding a URL with credentials (``http://user:KEY@host``). Under ``-m`` an
    unquoted comma is Hydra's sweep syntax: each value of the sweep is hidden on its own and the sweep is announced
    on stderr (quote the value, ``'A,B'``, for one secret containing a comma); a sweep function over a secret is
    refused. Raises ConfigError for a key passed as ``*.api_key_env`` and for a ``hydra.run.dir``/``hydra.sweep.dir``
    that is (inside) a file. Nothing of a secret is echoed.
    """
    multirun = any(a in ("-m", "--multirun") for a in argv) or "hydra.mode=MULTIRUN" in argv
    out = []
    for i, arg in enumerate(argv):
        key, sep, value = arg.partition("=")
        name = key.lstrip("+~")
        if not sep or arg.startswith("-"):
            out.append(arg)
            continue
        last = name.rsplit(".", 1)[-1]
        if name in ("llm.api_key", "llm.key", "llm.password", "llm.token"):  # not settings: Hydra's hint would say `+`
            raise ConfigError(f"{name} is not a setting (value not shown): the LLM reads its key from the environment "
                              "variable named by llm.api_key_env (default OPENAI_API_KEY); export it there")
        if last.endswith("api_key_env") and value and not looks_like_env_name(_unquote(value)):
            raise ConfigError(f"{name} must be the NAME of an environment variable (e.g. OPENAI_API_KEY); the "
                              "value given looks like a key itself (not shown). Put the key in the environment")
        if value and not value.startswith("${") and is_secret_override(name, value):
            if not multirun:
                out.append(f"{key}={_hide(name, value, f'{SECRET_ENV_PREFIX}{i}', environ)}")
                continue
            if _SWEEP_FUNCTION.match(value):
                raise ConfigError(f"{name}: a sweep function over a secret is not supported (value not shown); list "
                                  "the values (-m key=A,B) or run one job per value")
            values = _split_top_level(value)
            if len(values) > 1:
                print(f"note: {name} is swept over {len(values)} values (not shown), one job each; quote the value "
                      "('A,B') for a single secret that contains a comma", file=sys.stderr)
            hidden = [_hide(name, v, f"{SECRET_ENV_PREFIX}{i}_{j}", environ) for j, v in enumerate(values)]
            out.append(f"{key}={','.join(hidden)}")
            continue
        if name in ("hydra.run.dir", "hydra.sweep.dir"):
            from gear_repro.utils.io import require_dir_target, require_writable_dir

            target = _unquote(value)  # probed only without interpolations (${now:...} names a folder yet to be made)
            require_dir_target(target, name) if "${" in target else require_writable_dir(target, name, create=False)
        out.append(arg)
    return out


def submits_to_slurm(argv: list[str]) -> bool:
    """A sweep (``-m``) through a SLURM launcher (``hydra/launcher=slurm``, or submitit's own ``submitit_slurm``)."""
    sweep = any(a in ("-m", "--multirun") for a in argv)
    return sweep and any(a.split("=", 1)[0].lstrip("+~") == "hydra/launcher" and "slurm" in a.split("=", 1)[1]
                         for a in argv if "=" in a)


def import_from_cwd(environ: dict[str, str] | os._Environ = os.environ) -> None:
    """The working directory on the import path, as ``python -m`` has it, so that a ``_target_`` naming a module
    of your own beside you (``retriever._target_=mypkg.retrievers.TitleRetriever``) imports: a console script's path
    starts at its own bin folder instead. Appended, so an installed package of the same name still wins; also on
    ``PYTHONPATH``, for the jobs a sweep launcher starts in other processes."""
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.append(cwd)
    paths = [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if cwd not in paths:
        environ["PYTHONPATH"] = os.pathsep.join([*paths, cwd])


def main() -> None:
    import_from_cwd()
    try:
        sys.argv[1:] = protect_argv(sys.argv[1:])
        check_server_overrides(sys.argv[1:])  # llm.server.* under an LLM without one: Hydra's traceback otherwise
        check_renamed_overrides(sys.argv[1:])  # a setting's former name: Hydra would only say it is not in the schema
        cache_dir()  # $GEAR_CACHE must be a folder: refused once here, not once per question
        if submits_to_slurm(sys.argv[1:]):
            check_controller()
    except GearError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    register_configs()  # a package's own spec modules, registered after this module was imported
    try:
        _main()
    except KeyboardInterrupt:  # outside the run (Hydra start-up): nothing to resume
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None
    if _ERRORED_RUNS:
        print(f"error: {len(_ERRORED_RUNS)} run(s) had failed questions: {', '.join(_ERRORED_RUNS)} "
              "(exit 1; run.allow_errors=true accepts them)", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
