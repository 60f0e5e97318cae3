"""IRCoT (Trivedi et al., 2023) as HippoRAG runs it, and HippoRAG w/ IRCoT (GEAR Table 2/3 multi-step rows,
Fig. 2, Fig. 4): retrieval interleaved with chain-of-thought sentences.

Reference code: OSU-NLP-Group/HippoRAG ``legacy`` branch ``src/ircot_hipporag.py`` (``parse_prompt``,
``reason_step`` and its main loop; HippoRAG w/ IRCoT) and ``src/baselines/ircot.py`` (IRCoT with BM25 and other
retrievers). Our own code; differences in docs/baselines.md.

Per question q (rounds n = 1..max_rounds; MuSiQue 4, 2Wiki/HotpotQA 2, as ``--max_steps`` in the scripts):

1. round 1: retrieve ``top_k`` (10) passages for q;
2. after round n < max_rounds, the LLM (stage ``cot``, round n) writes the next thought over the top ``top_k``
   passages of the merged list, the demonstrations and the thoughts so far (``prompts/templates/ircot.txt``);
3. a thought containing "So the answer is:" stops the loop (trace ``stop: answerable``, the text after the mark
   is ``trace['answer']``); otherwise round n+1 retrieves ``top_k`` with the thought, an empty one included
   (counted, ``empty_thoughts``; ``empty_thought: stop`` stops there instead), and merges: a passage keeps its best raw score over the rounds and the merged list is sorted by
   score, ties in first-seen order (``merge: raw``, the reference code); ``merge: normalised`` first divides
   every score by the best score of its retrieval (for HippoRAG's min-max scores both readings agree; for BM25
   a long thought's larger raw scores no longer outrank the question's passages).

Each round record carries ``ranking``: the merged list after that round, i.e. what the method returns had it
stopped there (Fig. 2). The retriever is the run's base retriever (``retriever: base``; BM25 is the paper's
IRCoT (BM25)) or HippoRAG (``retriever: hipporag`` = HippoRAG w/ IRCoT, whose NER calls are stage ``ner`` of
the round that retrieves).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from statistics import mean
from typing import Any, ClassVar

from gear_repro.llm.base import LLM
from gear_repro.llm.context import check_fits, fit_passages, prompt_tokens
from gear_repro.llm.ledger import tags
from gear_repro.methods.base import MethodOutput, Searcher, SearchResult
from gear_repro.methods.report_contract import (
    HIPPORAG_SETTINGS,
    PAPER_MAX_ROUNDS,
    PaperValue,
    ReportHooks,
    RowParts,
    detail_table,
    hipporag_label,
    hipporag_uses_retriever,
    json_cell,
    node_setting,
    passages_cell,
    recall_text,
    result_lines,
    rounds_note,
    text_cell,
    with_notes,
)
from gear_repro.retrieval.base import Retriever
from gear_repro.types import Passage, Question, Ranking
from gear_repro.utils.component import Component, Dependency, PlannedCall, PromptSample
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.settings import Choice, Settings, as_dict, num
from gear_repro.utils.trace import bump

TITLE_PREFIX = "Wikipedia Title: "  # before each passage title in the thought prompt (baselines/ircot.py:224)

DEMO_DIR = Path(__file__).resolve().parent.parent / "prompts" / "ircot_demos"
ANSWER_MARK = "So the answer is:"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


class IRCoTRetrieverKind(Choice):
    """Where IRCoT retrieves from (agent.retriever)."""

    base = "base"            # the run's `retriever` group ("IRCoT (BM25)" with retriever=bm25)
    hipporag = "hipporag"    # HippoRAG (HippoRAG w/ IRCoT)


class IRCoTThought(Choice):
    """What of the LLM's reply becomes the next thought (agent.thought)."""

    full = "full"                      # the whole reply (HippoRAG's ircot_hipporag.py)
    first_sentence = "first_sentence"  # its first sentence (the IRCoT paper)


class IRCoTMerge(Choice):
    """How retrievals are merged across steps (agent.merge)."""

    raw = "raw"                # max raw score per passage (ircot_hipporag.py:242-251, baselines/ircot.py:270-279)
    normalised = "normalised"  # each step's scores / that step's best, then the max


class IRCoTEmptyThought(Choice):
    """What an empty thought does (agent.empty_thought)."""

    # the reference retrieves with "" and thinks again, up to max_steps (ircot_hipporag.py:232-251,
    # baselines/ircot.py:263-279: only "So the answer is:" breaks the loop)
    retrieve = "retrieve"
    stop = "stop"  # stop the loop (trace stop = empty_thought; our earlier default)


@dataclass(frozen=True)
class Demo:
    """One IRCoT demonstration: its question id, documents, question and the full thought chain."""

    qid: str
    document: str
    question: str
    answer: str


@cache
def load_demos(name: str) -> tuple[Demo, ...]:
    """Demonstrations of ``prompts/ircot_demos/<name>.txt`` in file order (the reference's ``parse_prompt``
    format: ``# METADATA: {"qid": ...}``, documents, ``Q: ...``, ``A: ...``; lines before the first
    ``# METADATA:`` are a header)."""
    path = DEMO_DIR / f"{name}.txt"
    if not path.is_file():
        known = sorted(p.stem for p in DEMO_DIR.glob("*.txt"))
        raise ConfigError(f"no IRCoT demonstration file '{name}' ({path}); known: {known}")
    out = []
    for part in path.read_text(encoding="utf-8").split("# METADATA: ")[1:]:
        meta, rest = part.split("\n", 1)
        docs, qa = rest.strip().split("\n\nQ: ", 1)
        question, answer = qa.split("\nA: ", 1)
        out.append(Demo(str(json.loads(meta).get("qid", "")), docs.strip(), question.strip(), answer.strip()))
    return tuple(out)


def format_demos(demos: Sequence[Demo]) -> str:
    """The system-turn demonstrations as ``reason_step`` writes them."""
    return "\n\n".join(f"{d.document}\n\nQuestion: {d.question}\nThought: {d.answer}" for d in demos)


def first_sentence(text: str) -> str:
    """The first sentence of a reply (IRCoT paper's reading; the HippoRAG code keeps the whole reply)."""
    return _SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]


def merge_step(merged: dict[str, float], ranking: Ranking, mode: str = "raw") -> None:
    """Fold one retrieval into ``merged`` (insertion = first-seen order), keeping each passage's max score:
    the raw score (``raw``) or score / best score of the step (``normalised``)."""
    best = max((float(s) for s in ranking.scores), default=0.0)
    for pid, s in zip(ranking.ids, ranking.scores, strict=True):
        # HippoRAG legacy@b144c46 src/ircot_hipporag.py:242-251 (and baselines/ircot.py:270-279): max raw score
        v = float(s) if mode == "raw" else (float(s) / best if best > 0 else 0.0)
        if pid not in merged or v > merged[pid]:
            merged[pid] = v


def merged_ranking(merged: dict[str, float]) -> Ranking:
    """Sort by score descending, ties in first-seen order (Python's sort is stable)."""
    order = sorted(merged, key=lambda p: -merged[p])
    return Ranking(order, [merged[p] for p in order])


@dataclass
class IRCoTAgentSettings(Settings):
    """``agent=ircot`` and ``agent=hipporag_ircot`` (each field's default and its source declared here;
    docs/baselines.md): the schema, :class:`IRCoTAgent`'s settings and its describe(). IRCoT (Trivedi et al.,
    2023) §3 as HippoRAG's ``ircot_hipporag.py`` and ``baselines/ircot.py`` run it."""

    config_key: ClassVar[str] = "agent"

    _target_: str = "gear_repro.methods.ircot.IRCoTAgent"
    name: str = "ircot"
    retriever: IRCoTRetrieverKind = IRCoTRetrieverKind.base  # the run's ``retriever`` group | hipporag
    # passages per retrieval and shown to the LLM (GEAR App. B.2: "a consistent maximum of 10 retrieved chunks";
    # --top_k 10 in the HippoRAG w/ IRCoT scripts; baselines/ircot.py's own default is 8 and no script runs it)
    top_k: int = num(10, ge=1)
    max_rounds: int = num(4, ge=1)  # retrievals at most (YAML: ${dataset.max_rounds})
    # dataset paper name -> prompts/ircot_demos file, the table ``demos`` picks the run's dataset's file from; each
    # file must exist (checked when built, so a misspelt entry fails at start-up)
    demo_files: dict[str, str] = field(default_factory=dict)
    demos: str = "musique"  # demonstration file
    # its demonstrations used, in file order, skipping the run's questions (1, as ircot_hipporag.py; null = all)
    num_demo: int | None = num(1, ge=0)
    thought: IRCoTThought = IRCoTThought.full  # full (the reference keeps the whole reply) | first_sentence (IRCoT paper)
    # across steps: raw (max raw score, ircot_hipporag.py:242-251) | normalised (score / the step's best, then max)
    merge: IRCoTMerge = IRCoTMerge.raw
    # pack the demonstrations (file order; one that overflows is skipped) while the prompt stays under this many
    # tokens: null = no budget (ircot_hipporag.py:159) | 15000 = baselines/ircot.py:227-230
    demo_budget: int | None = num(None, ge=1)
    cot_params: dict[str, Any] = field(default_factory=dict)  # extra llm.chat kwargs of the thought call (reference: none)
    round_ranking_depth: int | None = num(None, ge=1)  # ids kept in each round's ``ranking`` (null = all)
    # retrieve (with the empty thought, and think again: ircot_hipporag.py:232-251, baselines/ircot.py:263-279 break
    # only on "So the answer is:") | stop (trace stop = empty_thought)
    empty_thought: IRCoTEmptyThought = IRCoTEmptyThought.retrieve
    # dataset paper name -> what precedes a passage's title in the thought prompt (``Wikipedia Title: `` for IRCoT,
    # baselines/ircot.py:224; none for HippoRAG w/ IRCoT on MuSiQue/2Wiki, ircot_hipporag.py:56)
    title_prefixes: dict[str, str] = field(default_factory=dict)
    paper_name: str = "MuSiQue"  # the run's dataset (YAML: ${dataset.paper_name})


class IRCoTAgent:
    """IRCoT / HippoRAG w/ IRCoT. Built by the runner from configs/agent/ircot.yaml or hipporag_ircot.yaml.

    Args:
        llm: the thought (CoT) calls' client.
        passage_by_id: passage texts of the corpus (shown to the LLM).
        question_ids: the run's evaluated question ids (demonstrations about them are skipped).
        base_retriever: the run's base retriever (``retriever=base``; None otherwise).
        hipporag: the HippoRAG retriever (``retriever=hipporag``; None otherwise).
        settings, **given: :class:`IRCoTAgentSettings` (an instance, or its fields as keywords).
    """

    k_dependent = False
    needs_vectors = False  # the retriever (base retriever class or HippoRAG) decides
    needs_llm = True  # every round but the last asks for a thought
    answers_questions = False

    def __init__(self, llm: LLM, passage_by_id: Mapping[str, Passage], question_ids: Collection[str],
                 base_retriever: Retriever | None = None, hipporag: Searcher | None = None,
                 settings: IRCoTAgentSettings | None = None, **given: Any):
        s = self.settings = IRCoTAgentSettings.of(settings, "IRCoTAgent", **given)
        for dataset, file in as_dict(s.demo_files).items():
            if not (DEMO_DIR / f"{file}.txt").is_file():
                raise ConfigError(f"agent.demo_files.{dataset}: no IRCoT demonstration file '{file}' in {DEMO_DIR}")
        self.name = s.name
        self.llm = llm
        self.passage_by_id = passage_by_id
        self.base_retriever = base_retriever
        self.hipporag = hipporag
        self.retriever_kind = s.retriever.value
        self.top_k, self.max_rounds = s.top_k, s.max_rounds
        self.thought = s.thought.value
        self.merge = s.merge.value
        self.empty_thought = s.empty_thought
        paper_name = s.paper_name
        prefixes = as_dict(s.title_prefixes) or {paper_name: TITLE_PREFIX}
        if paper_name not in prefixes:
            raise ConfigError(f"agent.title_prefixes has no entry for the dataset '{paper_name}' (has "
                              f"{sorted(prefixes)}): add +agent.title_prefixes.{paper_name}='Wikipedia Title: '")
        self.title_prefix = str(prefixes[paper_name])
        self.cot_params = as_dict(s.cot_params)
        llm.check_params(self.cot_params, "agent.cot_params")  # a param the API lacks: one error now, not one per call
        self.round_ranking_depth = s.round_ranking_depth
        evaluated = set(question_ids)
        pool = [d for d in load_demos(s.demos) if d.qid not in evaluated]
        self.demos_skipped = len(load_demos(s.demos)) - len(pool)
        self.demos = pool if s.num_demo is None else pool[: s.num_demo]
        self.demo_budget = s.demo_budget

    def describe(self) -> dict[str, Any]:
        return {**self.settings.asdict(), "demo_file": self.settings.demos, "demos": [d.qid for d in self.demos],
                "demos_skipped_as_evaluated": self.demos_skipped, "title_prefix": self.title_prefix}

    def summarize(self, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """No run statistics beyond metrics.json's."""
        return {}

    # -- steps ------------------------------------------------------------------------------------------
    def search(self, query: str) -> SearchResult:
        if self.retriever_kind == "hipporag":
            return self.hipporag.search(query, self.top_k)
        t = time.perf_counter()
        ranking = self.base_retriever.retrieve(query, self.top_k)
        return SearchResult(ranking, {"total_ms": round(1000 * (time.perf_counter() - t), 3)})

    def messages(self, question: str, passages: Sequence[Passage], thoughts: Sequence[str],
                 demos: Sequence[Demo]) -> list[dict]:
        """The thought prompt (``prompts/templates/ircot.txt``): instruction and demonstrations, then the user turn."""
        from gear_repro.prompts import format_passages, render

        return render("ircot", demos=format_demos(demos), question=question, thoughts=" ".join(thoughts),
                      passages=format_passages(passages, title_prefix=self.title_prefix))

    def pack_demos(self, question: str, passages: Sequence[Passage], thoughts: Sequence[str]) -> list[Demo]:
        """The demonstrations of this call: all of ``demos`` without a budget; else, in file order, each one whose
        addition keeps the prompt under ``demo_budget`` tokens (a longer one is skipped, a later shorter one may
        still go in)."""
        if self.demo_budget is None:
            return list(self.demos)
        packed: list[Demo] = []
        for demo in self.demos:
            # HippoRAG legacy@b144c46 src/baselines/ircot.py:227-230: `if tokens(instruction + demos + demo + user)
            # < 15000: demos += demo` (an `if`, not a `break`)
            if prompt_tokens(self.llm, self.messages(question, passages, thoughts, [*packed, demo])) < self.demo_budget:
                packed.append(demo)
        return packed

    def check_prompts(self, questions: Sequence[Question]) -> None:
        """Start-up check: the thought prompt without passages (the longest question, its demonstrations) must
        leave room for the reply in ``llm.context_window``."""
        question = max((q.question for q in questions), key=len, default="")
        msgs = self.messages(question, [], [], self.pack_demos(question, [], []))
        check_fits(self.llm, msgs, "IRCoT thought", self.cot_params)

    def next_thought(self, question: str, passage_ids: Sequence[str], thoughts: Sequence[str]) -> tuple[str, str, int]:
        """(thought, raw reply, passages dropped to fit ``llm.context_window``)."""
        by_id = self.passage_by_id
        passages = [by_id[p] for p in passage_ids if p in by_id]
        demos = self.pack_demos(question, passages, thoughts)
        msgs, dropped = fit_passages(self.llm, lambda ps: self.messages(question, ps, thoughts, demos),
                                     passages, self.cot_params)
        reply = self.llm.chat(msgs, stage="cot", **self.cot_params)
        text = reply.text.strip()
        return (first_sentence(text) if self.thought == "first_sentence" else text), reply.text, dropped

    # -- the loop -----------------------------------------------------------------------------------------
    def run(self, question: Question, k: int) -> MethodOutput:
        """IRCoT on one question; ``k`` is ignored (each retrieval takes ``top_k``)."""
        t_start = time.perf_counter()
        q = question.question
        merged: dict[str, float] = {}
        counters: dict[str, int] = {}
        thoughts: list[str] = []
        rounds: list[dict[str, Any]] = []
        query, stop, answer = q, "max_rounds", None
        for n in range(1, self.max_rounds + 1):
            with tags(round=n):  # the retrieval's NER (HippoRAG) and the thought
                res = self.search(query)
                for key, val in (res.trace.get("counters") or {}).items():
                    bump(counters, key, val)
                merge_step(merged, res.ranking, self.merge)
                ranking = merged_ranking(merged)
                depth = self.round_ranking_depth
                rec: dict[str, Any] = {"round": n, "query": query, "retrieved": list(res.ranking.ids),
                                       "retrieval": res.trace, "thought": None,
                                       "ranking": ranking.ids[:depth] if depth else list(ranking.ids)}
                rounds.append(rec)
                if n == self.max_rounds:
                    break
                t = time.perf_counter()
                thought, raw, dropped = self.next_thought(q, ranking.ids[: self.top_k], thoughts)
                rec.update(thought=thought, raw_thought=raw, dropped_passages=dropped,
                           cot_ms=round(1000 * (time.perf_counter() - t), 3))
                if dropped:
                    bump(counters, "context_fitted_calls")
                    bump(counters, "context_dropped_passages", dropped)
                thoughts.append(thought)
                if ANSWER_MARK in thought:
                    stop, answer = "answerable", thought.split(ANSWER_MARK, 1)[1].strip()
                    break
                if not thought:
                    bump(counters, "empty_thoughts")
                    if self.empty_thought is IRCoTEmptyThought.stop:
                        stop = "empty_thought"
                        break
                query = thought  # an empty thought retrieves with "" as the reference does
        trace = {"agent": self.name, "stop": stop, "n_rounds": len(rounds), "max_rounds": self.max_rounds,
                 "thoughts": thoughts, "answer": answer, "demos": [d.qid for d in self.demos],
                 "counters": counters, "timings": {"total_s": round(time.perf_counter() - t_start, 6)}}
        return MethodOutput(ranking=merged_ranking(merged), rounds=rounds, trace=trace)


def row_label(config: Mapping[str, Any], parts: RowParts) -> str:
    """"HippoRAG w/ IRCoT" with HippoRAG (v1, as GEAR re-ran it) as the retriever ("HippoRAG2 w/ IRCoT" with v2);
    else "IRCoT (BM25)" (the paper's; SBERT/Hybrid runs stand in for ColBERTv2 and say so), or "IRCoT + <label>"
    when ``report.labels`` names the base."""
    if node_setting(config.get("agent") or {}, "retriever", "base") == "hipporag":
        return with_notes(f"{hipporag_label(config)} w/ IRCoT", parts.notes)
    return with_notes(f"IRCoT + {parts.base}" if parts.paper_label else f"IRCoT ({parts.base})", parts.notes)


def summary_row(predictions: list[dict]) -> dict[str, Any] | None:
    """One IRCoT run: questions, mean retrievals, stops by reason, thought calls, context fitting. None without
    IRCoT records."""
    preds = [p for p in predictions if isinstance(p.get("trace"), dict) and "thoughts" in p["trace"]]
    if not preds:
        return None
    stops = Counter(p["trace"].get("stop", "?") for p in preds)
    counters: Counter[str] = Counter()
    for p in preds:
        counters.update({k: v for k, v in p["trace"].get("counters", {}).items() if isinstance(v, int)})
    return {"n_questions": len(preds), "rounds_mean": round(mean(len(p.get("rounds", [])) for p in preds), 3),
            "stop_answerable": stops.get("answerable", 0), "stop_empty_thought": stops.get("empty_thought", 0),
            "stop_max_rounds": stops.get("max_rounds", 0),
            "empty_thoughts": counters.get("empty_thoughts", 0),
            "cot_calls": sum(r.get("thought") is not None for p in preds for r in p.get("rounds", [])),
            "context_fitted_calls": counters.get("context_fitted_calls", 0),
            "context_dropped_passages": counters.get("context_dropped_passages", 0)}


def trace_lines(pred: dict, plist: Any, recall_line: Any) -> list[str] | None:
    """The walk-through of an IRCoT record: per round the query, the retrieved passages and the thought, then the
    result. None for a record without IRCoT rounds."""
    rounds = pred.get("rounds") or []
    if not rounds or "thought" not in rounds[0] or "retrieved" not in rounds[0]:
        return None
    lines: list[str] = []
    for r in rounds:
        thought = r.get("thought")
        lines += [f"\n== Round {r.get('round')} ==", f"1. Query: {r.get('query')}",
                  f"2. Retrieved: {plist(r.get('retrieved', []))}",
                  f"3. Thought: {thought if thought is not None else '(none: the last round)'}",
                  f"   ranking had IRCoT stopped here: {recall_line(r.get('ranking', []))}"]
    return lines + result_lines(pred, plist, recall_line)


def question_detail(record: Mapping[str, Any]) -> list[dict] | None:
    """The HTML explorer's view of an IRCoT record (docs/explorer.md): per round the query, the passages it
    retrieved, the thought (and the raw reply when it was cut), the retriever's own trace (HippoRAG's linked entities
    for HippoRAG w/ IRCoT) and the merged list's recall; None for a record without IRCoT's thoughts."""
    trace = record.get("trace")
    if not isinstance(trace, dict) or "thoughts" not in trace:
        return None
    gold = record.get("gold_ids") or []
    rows = []
    for r in record.get("rounds") or []:
        retrieval = {k: v for k, v in (r.get("retrieval") or {}).items() if k not in ("counters",) and not k.endswith("_ms")}
        thought: Any = r.get("thought") or "(none: last round)"
        if r.get("raw_thought") and r.get("raw_thought") != r.get("thought"):
            thought = [thought, text_cell(r["raw_thought"])]
        rows.append([r.get("round"), r.get("query"), passages_cell(r.get("retrieved", [])), thought,
                     json_cell(retrieval) if retrieval else "", recall_text(r.get("ranking", []), gold)])
    return [detail_table("IRCoT rounds: retrieve, then think", ["n", "query", "retrieved", "thought (cot)",
                                                              "retriever trace", "recall of the merged list"], rows,
                         note=f"stop: {trace.get('stop')}; answer in the thoughts: {trace.get('answer')!r}")]


def reference_title_prefix(config: Mapping[str, Any]) -> str:
    """What precedes a passage's title in the reference code's thought prompt on the run's dataset: baselines/ircot.py:224
    "Wikipedia Title: " for IRCoT; ircot_hipporag.py:56 none for HippoRAG w/ IRCoT on MuSiQue/2Wiki, the prefix on
    HotpotQA (:60-75, 93)."""
    hipporag = node_setting(config.get("agent") or {}, "retriever", "base") == "hipporag"
    paper = (config.get("dataset") or {}).get("paper_name")
    return "" if hipporag and paper in ("MuSiQue", "2Wiki") else TITLE_PREFIX


REFERENCE_DEMOS = {"MuSiQue": "musique", "2Wiki": "2wikimultihopqa", "HotpotQA": "hotpotqa"}  # the dataset's own


# IRCoT as HippoRAG's scripts run it (configs/agent/ircot.yaml cites each); HippoRAG's own for HippoRAG w/ IRCoT
IRCOT_SETTINGS = (
    # the run's dataset's own demonstrations (data/ircot_prompts/<dataset>/...): agent.demos=hotpotqa on MuSiQue sat as
    # "IRCoT (BM25)" beside the paper's cell
    PaperValue("agent.demos", "{value} demonstrations", per_dataset=REFERENCE_DEMOS),
    PaperValue("agent.max_rounds", rounds_note, per_dataset=PAPER_MAX_ROUNDS),
    PaperValue("agent.top_k", "top_k {value}", 10),
    PaperValue("agent.merge", "{value} merge", "raw"),
    PaperValue("agent.thought", "{value} thought", "full"),
    PaperValue("agent.empty_thought", "empty thought: {value}", "retrieve"),
    PaperValue("agent.title_prefixes.{paper}", lambda p: f"title prefix {p.strip() or 'none'!r}",
                 of_config=reference_title_prefix),
    PaperValue("agent.num_demo", lambda n: f"{n} demonstration{'' if n == 1 else 's'}", 1, null="all"),
    PaperValue("agent.demo_budget", "demonstrations within {value} tokens", 0, null=0),  # null = no budget
    # IRCoT (BM25)'s text analysis (the reference index's ES standard analyzer, src/elastic_search_tool.py:6-28) is
    # the BM25 base retriever's paper setting (methods/report_contract.py BM25_SETTINGS), as for every BM25 row
    *HIPPORAG_SETTINGS,
)

REPORT_HOOKS = ReportHooks(names=("ircot", "hipporag_ircot"), label=row_label, stages=("cot",), figure4_stages=("cot",),
                           summaries=(("ircot_stats", "IRCoT loop statistics", summary_row),),
                           trace_lines=trace_lines,
                           question_detail=question_detail, reply_failures=("empty_thoughts",),
                           paper_settings=IRCOT_SETTINGS,
                           uses_retriever=lambda c: c.get("agent", {}).get("retriever") != "hipporag"
                           or hipporag_uses_retriever(c))


def ircot_dependencies(node: Any, dep: Dependency) -> dict[str, Any]:
    """The constructor's dependencies: the run's passage retriever, or HippoRAG for ``agent.retriever=hipporag``
    (HippoRAG w/ IRCoT; IRCoTAgentSettings always sets it)."""
    via_hipporag = node.retriever == "hipporag"
    return {"llm": dep("llm"), "passage_by_id": dep("passage_by_id"), "question_ids": dep("question_ids"),
            "base_retriever": None if via_hipporag else dep("retriever"),
            "hipporag": dep("hipporag") if via_hipporag else None}


def ircot_plan(cfg: Any) -> list[PlannedCall]:
    """A question's calls at most: a CoT call after each round but the last (``agent.max_rounds`` - 1), each over
    ``agent.top_k`` passages and the demonstrations the agent puts in every prompt; with ``agent.retriever:
    hipporag``, the calls HippoRAG's declaration plans for a search (its query NER) at each round's search."""
    from omegaconf import OmegaConf

    from gear_repro.registry import component_for

    rounds = int(OmegaConf.select(cfg, "agent.max_rounds", default=1) or 1)
    top_k = int(OmegaConf.select(cfg, "agent.top_k", default=10) or 10)
    num_demo = OmegaConf.select(cfg, "agent.num_demo", default=1)
    pool = str(OmegaConf.select(cfg, "agent.demos", default="musique"))

    @cache  # read when the first prompt is made (a plan is also asked for its counts only)
    def demos() -> str:
        demos = load_demos(pool)
        return format_demos(demos if num_demo is None else demos[: int(num_demo)])

    def values(s: PromptSample) -> dict[str, Any]:
        return {"demos": demos(), "passages": s.passages, "question": s.question, "thoughts": ""}

    searches: list[PlannedCall] = []
    if OmegaConf.select(cfg, "agent.retriever", default="base") == "hipporag":
        retriever = component_for(OmegaConf.select(cfg, "hipporag._target_", default=None), "hipporag")
        if retriever is not None and retriever.llm_plan is not None:
            searches = [replace(p, calls=p.calls * rounds) for p in retriever.llm_plan(cfg)]
    return [*searches, PlannedCall("ircot", rounds - 1, top_k, values)]


# the registry's declaration (gear_repro/registry.py)
COMPONENTS = (Component("agent", "ircot_schema", IRCoTAgentSettings, IRCoTAgentSettings._target_,
                        wiring=ircot_dependencies, report=f"{__name__}:REPORT_HOOKS", llm_plan=ircot_plan),)
