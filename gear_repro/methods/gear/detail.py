"""How the HTML explorer shows one GEAR record (``gear-repro-report --html``; docs/explorer.md): the agent's
rounds in the layout of the paper's Table 6 (query, proximal triples, gist memory, reasoner verdict, rewrite, recall
after the round), the beam paths that brought each expanded passage (Alg. 1), every LLM reply, and passageLink
(§5); for single-step runs the SyncGE / NaiveGE expansion of each pass (§4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gear_repro.methods.report_contract import (
    detail_table,
    passages_cell,
    recall_text,
    text_cell,
    triples_cell,
)


def _reasoner(rs: Mapping[str, Any] | None) -> str:
    if rs is None:
        return "(not called)"
    verdict = "answerable" if rs.get("answerable") else "not answerable"
    flag = "" if rs.get("parsed", True) else " [reply did not parse; raw kept]"
    return f"{verdict}: {rs.get('reason') or ''}{flag}".strip()


def _rewrite(rw: Mapping[str, Any] | None) -> str:
    if rw is None:
        return "—"
    return f"{rw.get('query')}" + (" [did not parse: fell back to q]" if rw.get("fallback") else "")


def beam_paths(beams: Sequence[Mapping[str, Any]], expanded: Sequence[str], title: str) -> dict[str, Any] | None:
    """Per expanded passage, the final beams whose triples lie in it (the paths that brought it, Alg. 1)."""
    rows = []
    for pid in expanded:
        for b, beam in enumerate(beams):
            if pid in beam.get("passages", []):
                path = " → ".join(str(t) for t in beam.get("texts", []))
                rows.append([passages_cell([pid]), b + 1, beam.get("score"), path, passages_cell(beam.get("passages", []))])
    if not rows:
        return None
    return detail_table(title, ["expanded passage", "beam", "score", "path (triples, in order)", "passages of the path"],
                        rows, note="beams in the order beam search ranked them; a passage reached by several beams "
                                   "is listed once per beam", folded=True)


def _linked(linked: Sequence[Mapping[str, Any]]) -> list[str]:
    return [f"{x.get('text', '')} ⇒ {x.get('triple_text') or '(no link)'}" for x in linked]


def expansion_blocks(exp: Mapping[str, Any], base: Sequence[str], gold: Sequence[str], label: str) -> list[dict]:
    """One graph expansion (a single-step pass): what it read, linked, searched and returned."""
    rows: list[list[Any]] = [["base retrieval C'_q", passages_cell(base)]]
    if "proximal" in exp:
        rows.append(["reader → proximal triples", triples_cell(exp.get("proximal", []))])
        rows.append(["tripleLink (proximal ⇒ linked triple)", "\n".join(_linked(exp.get("linked", []))) or "(none)"])
    rows += [["initial triples of the beam", exp.get("initial_triples")],
             ["expanded passages", passages_cell(exp.get("expanded", []))],
             ["counters", ", ".join(f"{k} {v}" for k, v in (exp.get("counters") or {}).items())]]
    read = exp.get("read") or {}
    if read:
        rows.append(["reader reply", text_cell(read.get("reply"))])
    blocks = [detail_table(f"{label}: {exp.get('expansion', 'expansion')}", ["step", "value"], rows)]
    paths = beam_paths(exp.get("beams", []), exp.get("expanded", []), f"{label}: beam paths per expanded passage")
    return blocks + ([paths] if paths else [])


def expansion_detail(record: Mapping[str, Any]) -> list[dict] | None:
    """A single-step record's expansion, one pass per evaluated k (the trace is ``{k: {base, expansion}}``) or one
    pass; None without an expansion trace (GEAR's own records, no expansion)."""
    trace = record.get("trace")
    if not isinstance(trace, dict):
        return None
    passes = {k: v for k, v in trace.items() if str(k).isdigit() and isinstance(v, dict)}
    if not passes and isinstance(trace.get("expansion"), dict):
        passes = {"": trace}
    gold = record.get("gold_ids") or []
    blocks: list[dict] = []
    for k in sorted(passes, key=lambda x: int(x) if x else 0):
        exp = passes[k].get("expansion")
        if isinstance(exp, dict) and exp.get("expansion") not in (None, "none"):
            blocks += expansion_blocks(exp, passes[k].get("base", []), gold, f"pass k={k}" if k else "expansion")
    return blocks or None


def agent_detail(record: Mapping[str, Any]) -> list[dict] | None:
    """A GEAR record: Table 6 rounds, beam paths per round, the LLM replies and passageLink. None for a record
    without GEAR's rounds."""
    trace = record.get("trace")
    rounds = record.get("rounds") or []
    if not isinstance(trace, dict) or ("passage_link" not in trace and not any("gist_new" in r for r in rounds)):
        return None
    gold = record.get("gold_ids") or []
    table6 = []
    for r in rounds:
        table6.append([
            r.get("round"), r.get("query"), passages_cell(r.get("base", [])),
            triples_cell(r.get("proximal", [])), "\n".join(_linked(r.get("linked", []))) or "(none)",
            passages_cell(r.get("expanded", [])),
            [f"+{len(r.get('gist_new', []))} new", triples_cell(r.get("memory", []))],
            _reasoner(r.get("reason")), _rewrite(r.get("rewrite")), recall_text(r.get("ranking", []), gold),
        ])
    blocks = [detail_table(
        "GEAR rounds (the paper's Table 6)",
        ["n", "query q(n)", "base retrieval", "reader → proximal triples", "tripleLink (proximal ⇒ linked)",
         "expanded passages", "gist memory G(n)", "reasoner", "rewrite → q(n+1)", "recall after the round"],
        table6, note=f"stop: {trace.get('stop', '-')}; recall after round n = the list GEAR returns had it stopped "
                     "there (Fig. 2)")]
    for r in rounds:
        paths = beam_paths(r.get("beams", []), r.get("expanded", []), f"Round {r.get('round')}: beam paths per "
                                                                          "expanded passage")
        if paths:
            blocks.append(paths)
    replies = [[r.get("round"), text_cell(((r.get("expansion") or {}).get("read") or {}).get("reply")),
                text_cell((r.get("gist_read") or {}).get("reply")), text_cell((r.get("reason") or {}).get("raw")),
                text_cell((r.get("rewrite") or {}).get("raw"))] for r in rounds]
    if replies:
        blocks.append(detail_table("GEAR LLM replies by round", ["n", "reader (proximal triples)", "gist memory",
                                                                 "reasoner", "rewriter"], replies))
    link = trace.get("passage_link") or []
    if link:
        blocks.append(detail_table("passageLink: passages of each gist-memory triple (fused into the final list)",
                                   ["memory triple", "passages"],
                                   [[triples_cell([x.get("triple", [])]), passages_cell(x.get("ids", []))] for x in link]))
    return blocks
