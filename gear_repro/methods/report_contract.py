"""The report contract of the methods (docs/ARCHITECTURE.md "Add a method"): :class:`ReportHooks`, which every
method declares in its folder, and the helpers its hooks build labels, paper settings and walk-throughs with.

A leaf of the methods layer (it imports none of it; only the metrics below), so the methods that declare hooks and
``reporting/`` that reads them both import it without a cycle and without the methods' own code."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def class_path(cls: type) -> str:
    """A class's ``_target_`` string (module + qualified name), as a run's config.yaml records it."""
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class RowParts:
    """What the report derives of a run before its method names the row: the base retriever's label (from
    ``report.labels`` when ``paper_label``, else the retriever's own), the retriever config's ``name`` and the
    expansion's label (None without expansion); ``fixed_base_k``: the one base k of a run with ``run.matched_k=false``
    (None: the base k matched to each evaluated rank, Table 2's protocol)."""

    base: str
    paper_label: bool
    retriever: str
    expansion: str | None
    fixed_base_k: int | None = None
    notes: tuple[str, ...] = ()  # settings that differ from the paper's row (the hooks' ``paper_settings``)


PAPER_MAX_ROUNDS = {"MuSiQue": 4, "2Wiki": 2, "HotpotQA": 2}  # GEAR §6.3 / App. B.1; IRCoT's --max_steps (scripts)


def rounds_note(n: Any) -> str:
    """ "1 round", "2 rounds": a run with other than the paper's rounds."""
    return f"{n} round{'' if n == 1 else 's'}"


def config_value(cfg: Mapping[str, Any], dotted: str, missing: Any = None) -> Any:
    """The value at ``dotted`` (``"retriever.name"``) of a run's config, ``missing`` where a part is missing."""
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return missing
        node = node[part]
    return getattr(node, "value", node)


@dataclass(frozen=True)
class PaperValue:
    """One setting of a method's paper row (``ReportHooks.paper_settings``): the dotted config ``key``, the paper's
    ``value`` (``per_dataset``: dataset paper name -> value; ``of_config``: a function of the run's config), and the
    ``note`` naming a run's other value ("{value}" is replaced by it, or a function of it). ``{paper}`` in ``key``
    stands for the run's dataset (a per-dataset entry: ``agent.title_prefixes.{paper}``). A run whose config does
    not record the key ran the default: no note; one that records null ran ``null`` (None: a null that is the
    paper's value, e.g. γ = 2b)."""

    key: str
    note: str | Callable[[Any], str]
    value: Any = None
    per_dataset: Mapping[str, Any] | None = None
    null: Any = None
    of_config: Callable[[Mapping[str, Any]], Any] | None = None  # the paper's value where more than the dataset decides it
    unrecorded: Any = None  # what a run recorded before the key existed ran with (None: not compared)


def _analysis_unless_analyzer(config: Mapping[str, Any]) -> str | None:
    """The paper's stop words / stemmer of the memory backend ("none": ES's standard analyzer), compared only where
    the run names no ``backend.bm25.analyzer`` (one that is set replaces both, and is compared itself)."""
    return "none" if config_value(config, "backend.bm25.analyzer") is None else None


def _memory_backend_tokenizer(config: Mapping[str, Any]) -> str | None:
    """The paper's tokenizer where the memory backend ranks: ES's standard analyzer; other backends run a real
    analyzer and have no such setting."""
    target = config_value(config, "backend._target_", missing=None)
    return "standard" if target == "gear_repro.backends.memory.MemoryBackend" else None


# BM25 as the papers ran it: Elasticsearch's BM25 similarity at its defaults (GEAR App. B.1; the backends' defaults,
# configs/backend/*.yaml), Lucene's formula (``lucene``: backends/lucene_bm25.py; the ES backend has no other) and ES's default text
# analysis, the standard analyzer (no stop words, no stemming; HippoRAG legacy src/elastic_search_tool.py:6-28 maps
# a text field with no analyzer); a base retriever that ranks with BM25 declares these as its paper settings
BM25_SETTINGS = (PaperValue("backend.bm25.k1", "BM25 k1 {value}", 1.2),
                 PaperValue("backend.bm25.b", "BM25 b {value}", 0.75),
                 PaperValue("backend.bm25.method", "BM25 variant {value}", "lucene"),  # ES's BM25 is Lucene's
                 # the memory backend's null analyzer defers to its stop words and stemmer, compared below
                 # the memory backend's analysis; its runs recorded before the setting split with \w\w+
                 PaperValue("backend.bm25.tokenizer", "{value} tokenizer", of_config=_memory_backend_tokenizer,
                            unrecorded="word2"),
                 PaperValue("backend.bm25.analyzer", "{value} analyzer", "standard"),
                 PaperValue("backend.bm25.stopwords", "stop words {value}", of_config=_analysis_unless_analyzer,
                              null="none"),
                 PaperValue("backend.bm25.stemmer", "{value} stemmer", of_config=_analysis_unless_analyzer,
                              null="none"))

def hipporag_uses_retriever(config: Mapping[str, Any]) -> bool:
    """HippoRAG ranks with the run's ``retriever`` only through its no-entity fallback (``uses_retriever``)."""
    return config_value(config, "hipporag.no_entity_fallback") == "retriever"


_UNRECORDED = object()  # a key the run's config does not hold


def variant_notes(config: Mapping[str, Any], settings: Sequence[PaperValue],
                  paper_config: Mapping[str, Any] | None = None, skip: Collection[str] = ()) -> tuple[str, ...]:
    """The notes of the ``settings`` a run's config differs in from the paper's row; ``paper_config`` (a preset's
    ``report.paper_config``) overrides the paper's value of a key (GRIEVER Table 4 runs IRCoT with top_k 5); the
    keys in ``skip`` are not noted (a preset's ``report.axes``, named by its row label)."""
    paper = (config.get("dataset") or {}).get("paper_name")
    notes: list[str] = []
    for s in settings:
        if s.key in skip:
            continue
        have = config_value(config, s.key.format(paper=paper), missing=_UNRECORDED)
        have = s.unrecorded if have is _UNRECORDED else s.null if have is None else have
        want = (s.of_config(config) if s.of_config is not None
                else s.per_dataset.get(paper) if s.per_dataset is not None else s.value)
        if paper_config and s.key in paper_config:
            want = paper_config[s.key]
        if have is not None and want is not None and have != want:
            notes.append(s.note(have) if callable(s.note) else s.note.format(value=have))
    return tuple(dict.fromkeys(notes))


def with_notes(label: str, notes: Sequence[str]) -> str:
    """``label`` naming what differs from the paper's row: "IRCoT (BM25; 1 round, top_k 2)", "HippoRAG (no synonyms)"."""
    if not notes:
        return label
    if label.endswith(")"):
        return f"{label[:-1]}; {', '.join(notes)})"
    return f"{label} ({', '.join(notes)})"


@dataclass(frozen=True)
class ReportHooks:
    """How the report shows the runs of one component class; every method declares its own in its folder
    (``report.py``, or beside the class) and :func:`gear_repro.methods.report_hooks` registers them.

    targets: the class's ``_target_`` and its former paths (run dirs written before a move).
    names: config ``name`` values that identify it in a config without ``_target_`` (hand-written configs).
    label: agents: ``(the run's resolved config, RowParts) -> row label`` (must match paper_results.csv's method
        column for the paper's configuration only: an ablation or variant names what differs, so it is never placed
        beside the paper's number);
        retrievers: ``(config name) -> label``.
    expansion_label: expansions: the suffix of a single-step row ("Hybrid + SyncGE").
    stages: the LLM stages its calls record, in display order (tokens table); ``figure4_stages``: those Fig. 4
        counts as retrieval tokens.
    rounds_table: its runs make Table 9 (R@k by beam length and rounds).
    figure2_reference: expansions: a single-step run with it is Fig. 2's reference line.
    summaries: ``(file stem, title, row function)``: one table per hook, one row per run of the class; the row
        function gets the run's predictions and returns its columns (None: no row).
    trace_lines: the walk-through of one prediction record when the record is its shape, else None
        (``(record, plist, recall_line) -> lines``).
    question_detail: the HTML explorer's view of one prediction record of its runs (GEAR's rounds as Table 6,
        IRCoT's thoughts, ...): a list of :func:`detail_table` blocks, or None when the record holds nothing of it.
    reply_failures: its ``agent_stats`` counters of LLM replies that did not parse (handled as its reading says, and
        counted): the run command warns when one is non-zero.
    paper_settings: the settings of its paper row (:class:`PaperValue`): a run that differs in one is named by its
        label (``RowParts.notes``) and never stands for the paper's row in a claim (``paper_row: true``); a
        retriever's count for the runs of a method that retrieves with it (``uses_retriever``).
    uses_retriever: methods: whether a run's ``retriever`` feeds its rankings, given its config (None: always;
        HippoRAG only through its no-entity fallback, T²RAG never).
    """

    targets: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    label: Callable[..., str] | None = None
    expansion_label: str | None = None
    stages: tuple[str, ...] = ()
    figure4_stages: tuple[str, ...] = ()
    rounds_table: bool = False
    figure2_reference: bool = False
    summaries: tuple[tuple[str, str, Callable[[list[dict]], dict[str, Any] | None]], ...] = ()
    trace_lines: Callable[[dict, Any, Any], list[str] | None] | None = None
    question_detail: Callable[[dict], list[dict] | None] | None = None
    reply_failures: tuple[str, ...] = ()
    paper_settings: tuple[PaperValue, ...] = ()
    uses_retriever: Callable[[Mapping[str, Any]], bool] | None = None


# HippoRAG v1 as GEAR re-ran it (configs/hipporag/default.yaml: the scripts' values): agent=hipporag|hipporag_ircot
HIPPORAG_SETTINGS = (
    PaperValue("hipporag.node_specificity", "no node specificity", True),
    PaperValue("hipporag.synonyms", "no synonym edges", True),
    PaperValue("hipporag.damping", "damping {value}", 0.5),
    PaperValue("hipporag.synonym_threshold", "synonym threshold {value}", 0.8),
    PaperValue("hipporag.normalisation", "{value} phrase keys", "hipporag"),
    PaperValue("hipporag.no_entity_fallback", "{value} fallback", "uniform"),
    PaperValue("hipporag.tie_order", "{value} tie order", "reference"),
    # the query NER's JSON mode: the reference's for its OpenAI client, none for its local ones (null = auto = that)
    PaperValue("hipporag.ner_json", lambda on: "NER JSON mode" if on else "NER without JSON mode",
                 of_config=lambda c: not (c.get("llm") or {}).get("server")),
)


def hipporag_label(config: Mapping[str, Any]) -> str:
    """The name of the run's HippoRAG (its ``hipporag`` node): "HippoRAG" for v1, the code GEAR re-ran (Table 2);
    "HippoRAG2" for ``hipporag.version=v2`` (T²RAG Table 1's row), never placed beside v1's numbers."""
    return "HippoRAG2" if node_setting(config.get("hipporag") or {}, "version", "v1") == "v2" else "HippoRAG"


def node_setting(node: Mapping[str, Any], key: str, default: Any = None) -> Any:
    """A setting of a run's config node as written (Enum members by value)."""
    value = node.get(key, default) if node else default
    return getattr(value, "value", value)


def format_triple_list(ts: Sequence[Sequence[str]], limit: int = 12) -> str:
    """Triples as the report's walk-through lists them ("    T1 <s, p, o>"), at most ``limit``."""
    if not ts:
        return "    (none)"
    out = [f"    T{i + 1} <{', '.join(map(str, t))}>" for i, t in enumerate(ts[:limit])]
    if len(ts) > limit:
        out.append(f"    ... {len(ts) - limit} more")
    return "\n".join(out)


def result_lines(pred: dict, plist: Callable[..., str], recall_line: Callable[[Sequence[str]], str]) -> list[str]:
    """The walk-through's closing block of a prediction record (stop, rounds, final ranking, recall, answer)."""
    trace = pred.get("trace") or {}
    final = (pred.get("rankings") or {}).get("final", [])
    lines = ["\n== Result ==", f"  stop: {trace.get('stop', '-')}   rounds: {len(pred.get('rounds', []))}",
             f"  final ranking: {plist(final, 15)}", f"  recall: {recall_line(final)}"]
    if "answer" in pred:
        lines.append(f"  QA answer ({pred.get('qa_mode')}): {pred.get('answer')!r}   EM {pred.get('em')}  "
                     f"F1 {pred.get('f1') if pred.get('f1') is None else round(pred['f1'], 3)}")
    return lines


# -- explorer blocks (gear-repro-report --html; docs/explorer.md) ---------------------------------------------
# A method's ``question_detail`` hook describes a record as tables whose cells are plain values (str, number, bool,
# None) or one of the typed cells below; the explorer renders them, marks gold passages and shows passage texts.
def detail_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "",
                 folded: bool = False) -> dict[str, Any]:
    """One block of the explorer's question view: a titled table (a key-value list is a two-column table);
    ``folded``: shown closed until clicked (long tables)."""
    return {"title": title, "columns": list(columns), "rows": [list(r) for r in rows], "note": note, "folded": folded}


def passages_cell(ids: Sequence[str]) -> dict[str, Any]:
    """Passage ids, shown as titles with gold passages marked and their text on demand."""
    return {"t": "passages", "ids": [str(i) for i in ids]}


def triples_cell(triples: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Triples <s, p, o>, one a line."""
    return {"t": "triples", "items": [[str(x) for x in t] for t in triples]}


def text_cell(text: str | None) -> dict[str, Any]:
    """A long text (an LLM reply, a prompt), folded until opened; whitespace kept."""
    return {"t": "text", "text": "" if text is None else str(text)}


def json_cell(value: Any) -> dict[str, Any]:
    """A nested record shown as indented JSON, folded until opened."""
    return {"t": "json", "value": value}


def recall_text(ids: Sequence[str], gold: Sequence[str], ks: Sequence[int] = (5, 10, 15)) -> str:
    """ "R@5 50 · R@10 100 · R@15 100" of a ranking (per-question recall ×100), or a note without gold."""
    from gear_repro.evaluation.metrics import recall_at_k

    if not gold:
        return "n/a (no gold)"
    return " · ".join(f"R@{k} {100 * recall_at_k(ids, gold, k):.0f}" for k in ks)
