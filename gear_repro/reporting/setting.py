"""Like for like: whether a paper's number may stand beside a run's (DESIGN.md "Outputs").

A paper's cell stands beside ours, with a Δ, only when the run is on that table's setting: its corpus and questions
are the table's data set (recognised by content or the paper's counts, run.json ``setting.known``;
gear_repro/data/identity.py), or a subset of its questions ("100 of 500 questions"), and the LLM, embedder and
triples the run used are the table's (gear_repro/resources/paper_settings.csv). Otherwise the paper's number is
shown apart, as "paper, other setting", with what differs named ("corpus 1,890 vs 148,793 passages; LLM
qwen2.5-coder-1.5b vs gpt-4o-mini"). Nothing here reads a dataset's name or path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gear_repro.data.identity import MATCHED_QUESTIONS, known_sets, owners
from gear_repro.reporting.paper import PaperSetting, paper_setting, paper_setting_rows

NOT_A_MODEL = ("", "unstated", "none", "n/a", "nan")  # paper_settings.csv words (and their "(...)" glosses)


@dataclass(frozen=True)
class Placement:
    """Where the paper's number of a cell goes: ``beside`` ours with a Δ, else apart with ``differs`` named;
    ``subset``: "100 of 500 questions" when the run holds part of the table's question set."""

    beside: bool
    differs: tuple[str, ...] = ()
    subset: str | None = None
    unchecked: tuple[str, ...] = ()  # what the match did not check (a corpus known by its count only): a footnote

    @property
    def why(self) -> str:
        return "; ".join(self.differs)


def model_options(value: str | None) -> tuple[str, ...]:
    """The models a paper setting names ("a|b": one setting per model), without the words for none or unstated."""
    out = []
    for option in str(value or "").split("|"):
        option = option.strip()
        if option.split(" (", 1)[0].strip().lower() not in NOT_A_MODEL:
            out.append(option)
    return tuple(out)


def _model_key(name: str) -> str:
    """A model name as compared: lower case, no hub organisation ("sentence-transformers/all-mpnet-base-v2")."""
    return name.strip().lower().rsplit("/", 1)[-1]


def same_model(ours: str, paper: str) -> bool:
    """Whether two model names are one model: equal names, or one the other's dated snapshot ("gpt-4o-mini" and
    "gpt-4o-mini-2024-07-18")."""
    a, b = _model_key(ours), _model_key(paper)
    return a == b or a.startswith(f"{b}-20") or b.startswith(f"{a}-20")


def _model_differs(ours: str | None, paper: str | None) -> str | None:
    """The paper's model(s) when the run used another, else None (the run used none, or the paper names none)."""
    theirs = model_options(paper)
    if not ours or not theirs or any(same_model(ours, t) for t in theirs):
        return None
    return " / ".join(theirs)


def _cell_llms(options: str | None, cell: str) -> str | None:
    """The LLM options of a table with several (``a|b``) that the cell's setting or method names ("GPT-4o-mini",
    "GEAR (Llama-3.1-8B)"), as an options string; all of them when the cell names none (a one-LLM table, or a cell
    that does not say)."""
    theirs = model_options(options)
    if len(theirs) < 2 or not cell:
        return options

    def words(name: str) -> str:
        return re.sub(r"[\s_]+", "-", name.strip().lower())

    text = words(cell)
    named = [t for t in theirs if re.sub(r"-(20\d\d-\d\d-\d\d|instruct|chat)$", "", words(_model_key(t))) in text]
    return "|".join(named) if named else options


def _count(n: Any) -> str:
    return f"{int(n):,}" if isinstance(n, int | float) and n == n else "?"


def matched_sets(known: dict) -> set[str]:
    """The registry entries a run's data is, corpus and questions both (run.json ``setting.known.matched``). A run
    recorded before that field: its best entry and the sets that one is a registered subset of, when its questions
    matched by ids; a count match ("count", "count_subset") no longer matches a question set (25 relabelled questions
    over a corpus of a paper's passage count are not that paper's questions)."""
    if isinstance(known.get("matched"), list):
        return set(known["matched"])
    if known.get("questions_matched_by") not in MATCHED_QUESTIONS or not known.get("name"):
        return set()
    by_name = {k.name: k for k in known_sets()}
    out, name = {known["name"]}, known["name"]
    while name in by_name and by_name[name].subset_of:
        name = by_name[name].subset_of
        out.add(name)
    return out


def _questions_why(setting: dict, ps: PaperSetting) -> str:
    """Why the run's questions are not the table's, for a corpus the table's: "questions 25 vs 1,000 dev (not
    <the paper's set>: the registry has no ids of its questions, a count is no match)"."""
    known = setting.get("known") or {}
    why = known.get("why_not") or ("matched by count only, before question sets were checked by ids: re-run it"
                                   if known.get("questions_matched_by") in ("count", "count_subset") else
                                   "not the table's question set")
    return f"{_questions_vs(setting, ps)} ({why})"


def _questions_vs(setting: dict, ps: PaperSetting) -> str:
    """ "questions 100 train vs 500 test (<the set's source> ...)": the run's count and split (of the set its ids are, where
    the registry knows them) against the table's."""
    questions, known = setting.get("questions") or {}, setting.get("known") or {}
    split = known.get("split") or ""
    if (owned := owners(questions)) and not owned & matched_sets(known):
        split = "/".join(sorted({k.split for k in known_sets() if k.name in owned}))  # the ids' own set
    elif not matched_sets(known):
        split = ""  # not the known set's questions: its split says nothing of them
    ours_q = f"{_count(questions.get('questions'))} {split}".strip()
    return f"questions {ours_q} vs {_count(ps.questions_count)} {ps.questions_split}".replace("? ", "")


def _data_differs(setting: dict, ps: PaperSetting) -> tuple[str, str]:
    """How the run's corpus and questions differ from the table's (its known data set is none the table was
    measured on): "corpus 1,890 vs 148,793 passages", "questions 100 train vs 500 test (...)"."""
    corpus, known = setting.get("corpus") or {}, setting.get("known") or {}
    n, theirs = corpus.get("passages"), ps.corpus_passages
    ours_c = (f"of {_count(n)} passages (the known count; content unchecked)" if known.get("corpus_matched_by") ==
              "count" else known.get("source") or f"of {_count(n)} passages, not a known data set")
    data = (f"corpus {_count(n)} vs {_count(theirs)} passages" if theirs and n != theirs
            else f"corpus {ours_c} vs {ps.corpus_source}")
    return data, _questions_vs(setting, ps)


PAPER_CEILING = 100.0  # a paper's gold passages are all in its corpus (none of the papers reports a ceiling)


def gold_differs(setting: dict | None) -> str | None:
    """Why a run's gold is not the paper's, or None: its recall ceiling is below the paper's (gold references in no
    passage of the corpus) or some of its gold was mapped by loose title matching (``--match-titles``). E.g. "gold
    by evidence subject, 75 of 737 references unmapped (56 in the corpus under another title, e.g. Godomar ->
    Godomar II; 19 not in the corpus): recall ceiling 87.3"."""
    gold = (setting or {}).get("gold") or {}
    ceiling = gold.get("recall_ceiling")
    parts = []
    if isinstance(ceiling, int | float) and ceiling < PAPER_CEILING:
        how = f"gold by {gold['derived']}" if gold.get("derived") else "gold"
        refs = (f"{_count(gold['refs_unmapped'])} of {_count(gold['refs'])} references unmapped"
                if gold.get("refs") else "some gold passages not in the corpus")
        causes = gold.get("causes") or {}
        named = []
        if causes.get("other_title"):
            eg = f", e.g. {gold['example']}" if gold.get("example") else ""
            named.append(f"{_count(causes['other_title'])} in the corpus under another title{eg}")
        if causes.get("not_in_corpus"):
            named.append(f"{_count(causes['not_in_corpus'])} not in the corpus")
        parts.append(f"{how}, {refs}" + (f" ({'; '.join(named)})" if named else "") + f": recall ceiling {ceiling:.1f}")
    if gold.get("title_matched"):
        parts.append(f"gold by title matching (--match-titles: {_count(gold['title_matched'])} references mapped to a "
                     "page of another title)")
    return "; ".join(parts) or None


def placement(setting: dict | None, paper: str, table: str, dataset: str, cell: str = "") -> Placement:
    """Where the paper's cell of ``paper`` ``table`` on ``dataset`` goes for a run whose run.json ``setting`` is
    ``setting`` (None: a run from before settings were recorded). ``cell``: the cell's setting and method as
    paper_results.csv names them; in a table with several LLMs the run must have used the one the cell names
    (a Llama run never stands beside the GPT-4o-mini column because the table also has a Llama one)."""
    if not setting:
        return Placement(False, ("the run records no setting (run.json from before like-for-like placement; re-run "
                                 "it to compare)",))
    ps = paper_setting(paper, table, dataset)
    key = f"{paper} {table}"
    if ps is None:
        return Placement(False, (f"{key}'s setting on {dataset} is not recorded (paper_settings.csv)",))
    known = setting.get("known") or {}
    differs: list[str] = []
    unchecked: list[str] = []
    subset = None
    table_sets = set(ps.known_datasets)
    if matched_sets(known) & table_sets:
        if known.get("questions", 0) < known.get("questions_of", 0):
            subset = f"{_count(known['questions'])} of {_count(known['questions_of'])} questions"
        if known.get("corpus_matched_by") == "count":
            unchecked.append(f"corpus recognised by its passage count ({_count((setting.get('corpus') or {}).get('passages'))}) "
                             "only: its content was not checked (the registry has no hash of it)")
    elif set(known.get("names") or ()) & table_sets:  # the table's corpus, not its questions
        differs.append(_questions_why(setting, ps))
        if known.get("corpus_matched_by") == "count":
            differs.insert(0, f"corpus of {_count((setting.get('corpus') or {}).get('passages'))} passages (the known "
                              "count; content unchecked)")
    else:
        if known.get("questions_matched_by") in ("count", "count_subset"):  # recorded before the ids rule
            known = {**known, "questions_matched_by": "none"}
        differs.extend(_data_differs({**setting, "known": known}, ps))
    if gold := gold_differs(setting):
        differs.append(gold)
    if theirs := _model_differs(setting.get("llm"), _cell_llms(ps.llm, cell)):
        differs.append(f"LLM {setting['llm']} vs {theirs}")
    emb = (setting.get("embedder") or {}).get("model")
    if theirs := _model_differs(emb, ps.embedder):
        differs.append(f"embedder {_model_key(emb)} vs {theirs}")
    triples = setting.get("triples") or {}
    if triples and (theirs := " / ".join(model_options(ps.triples_llm))):
        ours = triples.get("llm")
        if not ours or _model_differs(ours, ps.triples_llm):
            differs.append(f"triples by {ours or 'an unrecorded LLM'} ({triples.get('source')}) vs {theirs}")
    return Placement(not differs, tuple(differs), subset, tuple(unchecked))


def model_notes(setting: dict | None, paper: str, table: str, dataset: str) -> tuple[str, ...]:
    """The embedder and LLM a run used where they are not the paper table's, for its row label ("all-minilm-l6-v2",
    "LLM qwen2.5-coder-1.5b-instruct-q4_k_m")."""
    ps = paper_setting(paper, table, dataset) if setting else None
    if ps is None:
        return ()
    emb = (setting.get("embedder") or {}).get("model")
    return (*([_model_key(emb)] if _model_differs(emb, ps.embedder) else []),
            *([f"LLM {setting['llm']}"] if _model_differs(setting.get("llm"), ps.llm) else []))


def describe_setting(setting: dict | None) -> str:
    """A run's setting in words: "bundled MuSiQue sample ... (1,890 passages; 100 questions); embedder
    all-minilm-l6-v2; LLM qwen2.5-coder-1.5b-instruct-q4_k_m" ("" without a recorded setting)."""
    if not setting:
        return ""
    known = setting.get("known") or {}
    corpus, questions = setting.get("corpus") or {}, setting.get("questions") or {}
    sizes = f"{_count(corpus.get('passages'))} passages; {_count(questions.get('questions'))} questions"
    if known.get("questions", 0) < known.get("questions_of", 0):
        sizes = f"{_count(corpus.get('passages'))} passages; {_count(known['questions'])} of {_count(known['questions_of'])} questions"
    parts = [f"{known['source']} ({sizes})" if known.get("source") else f"an unrecognised data set ({sizes})"]
    if (setting.get("embedder") or {}).get("model"):
        parts.append(f"embedder {_model_key(setting['embedder']['model'])}")
    if setting.get("llm"):
        parts.append(f"LLM {setting['llm']}")
    if setting.get("triples"):
        t = setting["triples"]
        parts.append(f"triples {t.get('source')}" + (f" ({t['llm']})" if t.get("llm") else ""))
    return "; ".join(parts)


def tables_on(known_names: Sequence[str], dataset: str) -> list[tuple[str, str]]:
    """(paper, table) of every paper table measured on one of the known data sets ``known_names`` (a run's
    run.json ``setting.known.names``) for ``dataset``: the reference numbers a run's own data has."""
    names = set(known_names)
    return [(p, t) for (p, t, d), ps in paper_setting_rows().items() if d == dataset and names & set(ps.known_datasets)]
