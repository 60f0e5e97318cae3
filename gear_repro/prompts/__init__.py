"""The paper's Appendix K prompts as template files, rendered to chat messages.

One file per prompt in ``templates/`` (Python ``str.format`` syntax, so the paper's literal
``{{ ... }}`` braces in K.1 render as single braces):

- ``extraction``      K.1 joint NER + triple extraction (§6.2): ``wiki_title``, ``passage``
- ``reader``          K.2 reader without gist memory (§4.1): ``docs``, ``query`` (blue parts omitted,
                      ``Facts:`` left empty; the omitted wording follows the authors' code)
- ``reader_gist``     K.2 reader with gist memory (§5.1): ``docs``, ``query``, ``triples``
- ``reason``          K.2 reasoning for termination (§5.2): ``query``, ``triples``
- ``rewrite``         K.2 query re-writing (§5.3): ``query``, ``triples``, ``reason``
- ``qa``              K.3 QA with retrieved passages and the in-context example: ``passages``, ``question``
- ``qa_no_passages``  K.3 QA without passages: ``question``
- ``t2rag_decompose`` T²RAG App. E "Structured Query Decomposition" (§4.3 Step 1): ``query``
- ``t2rag_resolve``   T²RAG App. E "Triplets Resolving" (§4.3 Step 2.2): ``example_propositions``, ``query``,
                      ``searchable``, ``fuzzy``, ``passages_section`` (the "Context Passages:" block, empty for
                      the w/o-chunk ablation of Table 2), ``propositions``, ``resolved``
- ``t2rag_answer``    T²RAG App. E "Final Answering" (§4.3 Step 3): ``query``, ``clues`` (the code's text is the
                      same, rockcor/T2RAG ``src/TRAG.py``:1091-1109)
- ``t2rag_decompose_code`` the code's decomposition prompt (``agent.prompt_text: code``; TRAG.py:264-306, transcribed:
                      the question also at the top, ``Triples:`` alone on its line, a ``Propositions:`` request): ``query``
- ``t2rag_resolve_code`` the code's resolve prompt (TRAG.py:666-725, transcribed with its f-string's indentation:
                      "Traceable", the example's new clue filled in, "20 March 851"): ``example_propositions``,
                      ``query``, ``traceable`` and ``fuzzy`` (clue blocks in the code's layout, empty when none),
                      ``passages_section``, ``propositions``, ``resolved_section`` (empty when nothing is resolved,
                      else ``t2rag_resolve_code_resolved``)
- ``t2rag_resolve_code_resolved`` its resolved clues' section (TRAG.py:649-654): ``resolved``
- ``t2rag_decompose_simple`` the authors' code's retry of a failed decomposition (rockcor/T2RAG
                      ``src/TRAG.py``:980-995; not in the paper), in our own words: ``query``
- ``hipporag_ner``    HippoRAG's one-shot query NER prompt (baselines, docs/baselines.md): ``question``
- ``ircot``           IRCoT's next-thought prompt as HippoRAG runs it (baselines): ``demos``, ``passages``,
                      ``question``, ``thoughts``

T²RAG layout notes: the paper's appendix is a PDF rendering with flattened lines; the line breaks of the
examples and of the "Subject:/Predicate:/Object:" blocks follow the authors' code (rockcor/T2RAG
``src/TRAG.py``), the wording follows the paper (e.g. "Searchable", where the code says "Traceable"); the
``*_code`` templates are the code's texts (``agent.prompt_text: code``, the default under ``agent.reading: code``).
Their one loss: the loader drops a template's final newline, which ends the code's decomposition prompt.

A template may hold several chat turns: a line ``<|system|>``, ``<|user|>`` or ``<|assistant|>`` starts a turn
(the baselines' prompts have a system turn and a one-shot exchange); without such lines the whole text is one
user message.

Layout notes: the paper's rendered "“‘" is a Markdown code fence (```), as in HippoRAG's OpenIE prompt;
K.1 closes the input paragraph's fence. Each prompt is one user message (the paper shows no system turn).
Values of ``docs``/``passages`` may be pre-formatted strings or passages (``format_passages``);
``triples`` may be a string or a list of triples (``format_triples``).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from gear_repro.types import Triple
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.hashing import hash_file, hash_obj

PROMPT_DIR = Path(__file__).resolve().parent
TEMPLATE_DIR = PROMPT_DIR / "templates"
PROMPT_NAMES = tuple(sorted(p.stem for p in TEMPLATE_DIR.glob("*.txt")))  # one template file per prompt
_ROLE_LINE = re.compile(r"^<\|(system|user|assistant)\|>[ \t]*$", re.MULTILINE)


def prompts_hash() -> str:
    """Hash of every prompt file (``templates/``, ``ircot_demos/``): run.json records it for a run that calls an LLM,
    and a resume that would read other prompt files than its finished questions did is refused."""
    files = sorted(p for sub in ("templates", "ircot_demos") for p in (PROMPT_DIR / sub).rglob("*") if p.is_file())
    return hash_obj({p.relative_to(PROMPT_DIR).as_posix(): hash_file(p) for p in files})


class PromptError(ConfigError):
    """A prompt name is unknown or a template variable is missing/unexpected."""


@cache
def load_template(name: str) -> str:
    """The raw template text of prompt ``name``."""
    path = TEMPLATE_DIR / f"{name}.txt"
    if not path.is_file():
        raise PromptError(f"unknown prompt '{name}' (no {path}); known: {', '.join(PROMPT_NAMES)}")
    return path.read_text(encoding="utf-8").rstrip("\n")


def template_variables(name: str) -> set[str]:
    """Names of the ``{variables}`` that prompt ``name`` needs."""
    return {f for _, f, _, _ in string.Formatter().parse(load_template(name)) if f}


def format_triples(triples: Iterable[Sequence[str] | Triple] | str) -> str:
    """Triples as in the paper's examples: ``("s", "p", "o"), ("s2", "p2", "o2")``."""
    if isinstance(triples, str):
        return triples
    out = []
    for t in triples:
        parts = t.as_tuple() if isinstance(t, Triple) else tuple(t)
        out.append("(" + ", ".join('"' + str(x).replace('"', "'") + '"' for x in parts) + ")")
    return ", ".join(out)


def format_passages(passages: Iterable[Any] | str, title_prefix: str = "Wikipedia Title: ") -> str:
    """Passages as K.3 shows them: ``Wikipedia Title: {title}\\n{text}`` (``title_prefix``), blank line between.

    Items may be ``Passage`` objects, ``{"title", "text"}`` dicts or ``(title, text)`` pairs.
    """
    if isinstance(passages, str):
        return passages
    blocks = []
    for p in passages:
        if isinstance(p, dict):
            title, text = p.get("title", ""), p.get("text", "")
        elif isinstance(p, (tuple, list)):
            title, text = p[0], p[1]
        else:
            title, text = p.title, p.text
        blocks.append(f"{title_prefix}{title}\n{text}")
    return "\n\n".join(blocks)


_FORMATTERS = {"docs": format_passages, "passages": format_passages, "triples": format_triples}


def render(name: str, **variables: Any) -> list[dict]:
    """Render prompt ``name`` (App. K) to chat messages ``[{"role": "user", "content": ...}]``.

    Every template variable must be given and no other: a missing or unknown one raises ``PromptError``.
    """
    text = load_template(name)
    need = template_variables(name)
    missing, extra = need - variables.keys(), variables.keys() - need
    if missing:
        raise PromptError(f"prompt '{name}' needs variable(s) {sorted(missing)} (given {sorted(variables)})")
    if extra:
        raise PromptError(f"prompt '{name}' takes only {sorted(need)}; unexpected {sorted(extra)}")
    values = {k: _FORMATTERS.get(k, str)(v) for k, v in variables.items()}
    return [{"role": role, "content": part.format(**values)} for role, part in _turns(text)]


def _turns(text: str) -> list[tuple[str, str]]:
    """(role, template part) per chat turn: split at the role lines (module docstring), before formatting so a
    value can never open a turn."""
    marks = list(_ROLE_LINE.finditer(text))
    if not marks:
        return [("user", text)]
    return [(m.group(1), text[m.end() + 1: nxt.start() if nxt else len(text)].rstrip("\n"))
            for m, nxt in zip(marks, [*marks[1:], None], strict=True)]


__all__ = ["PROMPT_NAMES", "PromptError", "format_passages", "format_triples", "load_template", "render",
           "template_variables"]
