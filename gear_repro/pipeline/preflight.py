"""The start-up checks of a question run (:func:`preflight`), before any question: the runner's and the Python
API's."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from gear_repro.data.dataset import check_gold_answers
from gear_repro.methods.base import Method
from gear_repro.pipeline import capacity
from gear_repro.pipeline.resources import Resources
from gear_repro.qa.reader import AnswerReader
from gear_repro.registry import node_component
from gear_repro.utils.errors import ConfigError

__all__ = ["preflight"]


def preflight(cfg: DictConfig, res: Resources, method: Method, qa_reader: AnswerReader | None, *,
              gold: bool = True) -> None:
    """Configuration errors found at start-up, before any question runs: each component's own check (its
    declaration's ``preflight``: GEAR's beam scorer and its options), ``run.workers``, the LLM's credentials when the method (``needs_llm``) or QA uses it, that the
    prompts of the method and the QA reader fit ``llm.context_window`` without passages, and (last: the machine,
    not the config) that the embedder's weights can be found when the run embeds. ``gold=False`` (the API's
    one-off questions) skips the check that every question has a gold answer."""
    for key in cfg:
        node = cfg.get(key)
        found = node_component(str(key), node) if isinstance(node, DictConfig) else None
        if found is not None and found.preflight is not None:
            found.preflight(node)
    if int(cfg.run.workers) < 1:
        raise ConfigError(f"run.workers must be >= 1 (got {cfg.run.workers})")
    if method.answers_questions and qa_reader is not None and \
            str(OmegaConf.select(cfg, "qa_reader.mode", default="retrieved")) != "retrieved":
        raise ConfigError(f"qa_reader.mode={cfg.qa_reader.mode} is a bound of the K.3 reader, but this method "
                          "answers with its own prompt (the reader is not used; its row would stand as the paper's "
                          "bound): run the bound with agent=single, or drop qa_reader.mode")
    if gold and (qa_reader is not None or method.answers_questions):
        check_gold_answers(res.dataset, "qa=true" if qa_reader is not None and not method.answers_questions
                           else "agent.answer=false")
    if cfg.get("llm") is not None and (qa_reader is not None or method.needs_llm):
        res.llm.check_ready()
    # the prompts without passages must fit llm.context_window (llm/context.py)
    method.check_prompts(res.dataset.questions)
    if qa_reader is not None:
        qa_reader.check_prompts(res.dataset.questions)
    if res.needs_vectors and (embedder := res.built("embedder")) is not None:
        embedder.check_ready()  # the weights exist, before every question fails on the same missing model
    capacity.check_run(cfg, res, capacity.opened_collections(cfg))  # disk and memory for the caches, before encoding
