"""The Python API (docs in README.md "From Python" and examples/quickstart.ipynb).

- :func:`compose`: the validated run config of a set of overrides, with the CLI's start-up checks.
- :class:`Pipeline`: ``Pipeline.from_config(cfg, ...)`` → ``retrieve`` / ``answer`` one question (a :class:`Result`)
  and ``evaluate`` a question set by the runner itself (an :class:`Evaluation`); data from memory
  (``passages=``, ``questions=``, ``triples=``: lists of dicts or DataFrames).
- :func:`load_runs` / :func:`compare`: finished runs as a DataFrame, and the claims' paired test.
- :class:`BaseRetriever`, :class:`BaseExpansion`, :class:`BaseMethod`: bases of a component of your own.
"""

from gear_repro.api.compose import compose
from gear_repro.api.pipeline import Evaluation, Pipeline, Result
from gear_repro.api.runs import compare, load_runs
from gear_repro.pipeline.components import BaseExpansion, BaseMethod, BaseRetriever

__all__ = ["BaseExpansion", "BaseMethod", "BaseRetriever", "Evaluation", "Pipeline", "Result", "compare", "compose",
           "load_runs"]
