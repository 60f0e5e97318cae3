"""Reading T²RAG's LLM replies (seed 002, App. E formats): the decomposition (our lenient repairs, or as
rockcor/T2RAG TRAG.py reads it), its retry, the resolve reply (both ways) and the final answer. Malformed replies never
raise: they come back with a ``status`` the agent counts."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from gear_repro.methods.t2rag.clues import RESOLVED, SEARCHABLE, Clue, dedupe

_MD = re.compile(r"[*_`#]+")


def _clean(part: str) -> str:
    return _MD.sub("", part).strip().strip("\"'“”‘’[]()").strip()


def _template_echo(parts: Sequence[str]) -> bool:
    """A part left as the template's "..." (the reply copied the format instead of filling it)."""
    return any(p.strip(" .…") == "" for p in parts)


def _triple_from_line(line: str, allow_commas: bool) -> Clue | None:
    line = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", _MD.sub("", line)).strip()
    line = re.sub(r"^(?:triples?|triplets?)\s*(?:\d+)?\s*:\s*", "", line, flags=re.IGNORECASE)
    if "|" in line:
        parts = [_clean(p) for p in line.split("|")]
        parts = [p for p in parts if p]
        if len(parts) < 3 or _template_echo(parts):
            return None
        # more than three cells: the middle ones belong to the predicate
        return Clue(parts[0], " ".join(parts[1:-1]), parts[-1])
    if allow_commas:
        parts = [_clean(p) for p in line.strip("()").split(",")]
        if len(parts) == 3 and all(parts) and not _template_echo(parts):
            return Clue(*parts)
    return None


@dataclass
class Parsed:
    """Clues read off a reply and how: ``ok`` (the requested format), ``repaired`` or ``failed``."""

    clues: list[Clue] = field(default_factory=list)
    searchable: list[Clue] = field(default_factory=list)
    status: str = "ok"


def parse_decomposition(text: str | None) -> Parsed:
    """Triplets of a decomposition reply (App. E): ``s | p | o`` lines after "Triples:".

    Repairs: triplets on the "Triples:" line itself or separated by ';', bullets/numbering/Markdown, more than
    three cells (middle cells joined into the predicate), and, inside the Triples section, ``(s, p, o)`` or
    ``s, p, o`` lines; ``|`` lines anywhere when there is no "Triples:" header.
    """
    if not text or not text.strip():
        return Parsed(status="failed")
    lines = _MD.sub("", text).splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(r"\s*triples?\s*:", ln, re.IGNORECASE)), None)
    section = lines[start:] if start is not None else lines
    clues: list[Clue] = []
    repaired = start is None
    for raw in section:
        if re.match(r"\s*(reasoning|propositions?)\s*:", raw, re.IGNORECASE) and clues:
            break  # the code's "Propositions:" section or a second reasoning block ends the triplets
        for piece in raw.split(";"):
            c = _triple_from_line(piece, allow_commas=start is not None)
            if c is not None:
                repaired |= "|" not in piece or ";" in raw
                clues.append(c)
    clues = dedupe(clues)
    if not clues:
        return Parsed(status="failed")
    return Parsed(clues=clues, status="repaired" if repaired else "ok")


_CODE_SECTIONS = ("Reasoning:", "Triples:", "Propositions:")  # TRAG.py:324-331, case-sensitive line starts


def _code_clue(line: str, strip_quotes: bool = False) -> Clue | None:
    """The first three ``|`` cells of ``line`` (more are ignored, fewer give nothing), stripped (and of quotes)."""
    cells = [c.strip() for c in line.split("|")]
    if strip_quotes:
        cells = [c.strip('"').strip("'") for c in cells]
    return Clue(*cells[:3]) if len(cells) >= 3 else None


def parse_decomposition_code(text: str | None) -> Parsed:
    """Triplets of a decomposition reply as TRAG.py:319-373 reads them (``decompose_parse: code``).

    Primary pass: each stripped line; one starting with ``Reasoning:``, ``Triples:`` or ``Propositions:`` opens
    that section and is not parsed itself; in the Triples section a line with ``|`` and at least three cells gives
    (cells 0, 1, 2), nothing stripped but spaces. Only when that finds nothing, the secondary pass (status
    ``repaired``): every ``|`` line outside the three headers (case-insensitive), cut after its first ``". "``,
    every ``"- "`` removed, cells stripped of quotes. De-duplicated as every decomposition (398-417)."""
    lines = [ln.strip() for ln in (text or "").strip().split("\n")]
    section = None
    clues: list[Clue] = []
    for line in lines:
        head = next((h for h in _CODE_SECTIONS if line.startswith(h)), None)
        if head is not None:
            section = head
        elif section == "Triples:" and "|" in line and (c := _code_clue(line)) is not None:
            clues.append(c)
    if clues:
        return Parsed(clues=dedupe(clues), status="ok")
    for line in lines:
        if not line or "|" not in line or line.lower().startswith(tuple(h.lower() for h in _CODE_SECTIONS)):
            continue
        if ". " in line:
            line = line.split(". ", 1)[1]
        c = _code_clue(line.replace("- ", ""), strip_quotes=True)
        if c is not None:
            clues.append(c)
    return Parsed(clues=dedupe(clues), status="repaired" if clues else "failed")


_HEADER = re.compile(r"(fully\s+resolved|newly\s+(?:searchable|traceable))\s+clues?\s*(?:\d+)?\s*[:.-]?",
                     re.IGNORECASE)
# any "<label> Clue n:" line, e.g. the prompt's "Fuzzy Clue 2:" echoed back: it ends the previous block
_ANY_HEADER = re.compile(r"^[ \t]*[A-Za-z][A-Za-z ]*?\bclues?\s*\d*\s*:", re.IGNORECASE | re.MULTILINE)
_SPO = re.compile(r"subject\s*:\s*(?P<s>.*?)\s*predicate\s*:\s*(?P<p>.*?)\s*object\s*:\s*(?P<o>.*?)\s*"
                  r"(?=subject\s*:|$)", re.IGNORECASE | re.DOTALL)


def _spo_clues(segment: str) -> list[Clue]:
    out = []
    for m in _SPO.finditer(segment):
        s, p, o = (_clean(next((ln for ln in m.group(g).splitlines() if ln.strip()), "")) for g in "spo")
        if s and p and o and not _template_echo((s, p, o)):
            out.append(Clue(s, p, o))
    return out


def parse_resolution(text: str | None) -> Parsed:
    """"Fully Resolved Clue n" / "Newly Searchable Clue n" blocks (App. E) of a resolve reply.

    Accepts Subject/Predicate/Object on one line or on separate lines, Markdown emphasis, the code's
    "Newly Traceable" wording; other "... Clue n:" blocks (e.g. the prompt's fuzzy clues echoed back) are
    ignored. When no such header is present, ``s | p | o`` lines classified by their
    placeholders (``repaired``). ``clues`` holds the fully resolved ones, ``searchable`` the newly searchable.
    """
    if not text or not text.strip():
        return Parsed(status="failed")
    body = _MD.sub("", text)
    heads = list(_HEADER.finditer(body))
    if heads:
        resolved: list[Clue] = []
        searchable: list[Clue] = []
        starts = sorted({m.start() for m in _ANY_HEADER.finditer(body)} | {h.start() for h in heads})
        for h in heads:
            end = next((x for x in starts if x > h.start()), len(body))
            seg = body[h.end(): max(end, h.end())]
            seg = re.split(r"\(continue numbering", seg, flags=re.IGNORECASE)[0]
            found = _spo_clues(seg)
            if not found:
                c = next((x for x in (_triple_from_line(ln, False) for ln in seg.splitlines()) if x), None)
                found = [c] if c else []
            (resolved if h.group(1).lower().startswith("fully") else searchable).extend(found[:1])
        if resolved or searchable:
            return Parsed(clues=resolved, searchable=searchable, status="ok")
    loose = [c for c in (_triple_from_line(ln, False) for ln in body.splitlines()) if c is not None]
    loose += _spo_clues(body) if not loose else []
    if not loose:
        if re.search(r"\bnone\b", body, re.IGNORECASE) and len(body) < 200:
            return Parsed(status="ok")  # "None" / "no clues could be resolved": an answer, not a format error
        return Parsed(status="failed")
    return Parsed(clues=[c for c in loose if c.kind == RESOLVED],
                  searchable=[c for c in loose if c.kind != RESOLVED], status="repaired")


_CODE_FIELDS = (("Subject:", "subject"), ("Predicate:", "predicate"), ("Object:", "object"))


def parse_resolution_code(text: str | None, new_headers: tuple[str, ...] = ("Newly Traceable Clue",)) -> Parsed:
    """A resolve reply read as the authors' code reads it (TRAG.py:944-978, ``_parse_combined_clue_response``).

    Each line is stripped; one starting with "Fully Resolved Clue" or one of ``new_headers`` ("Newly Traceable
    Clue", the code's; the agent adds "Newly Searchable Clue" when it sent App. E's prompt text) opens a clue, and "Subject:", "Predicate:", "Object:" at
    the start of a line set its fields (the rest of the line, stripped, kept verbatim: quotes, '?' and all; a later
    line of the same field, even of an echoed "Fuzzy Clue", overwrites it). A clue is kept only with all three
    fields when the next header or the reply ends. Nothing else is read: no Markdown, no fields on one line, no
    ``s | p | o`` lines. ``status`` is ``ok`` when a clue was kept, else ``failed``."""
    if not text or not text.strip():
        return Parsed(status="failed")
    resolved: list[Clue] = []
    searchable: list[Clue] = []
    section: str | None = None
    fields: dict[str, str] = {}

    def close() -> None:
        if section is not None and len(fields) == 3:
            (resolved if section == RESOLVED else searchable).append(
                Clue(fields["subject"], fields["predicate"], fields["object"]))

    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("Fully Resolved Clue", *new_headers)):
            close()
            section = RESOLVED if line.startswith("Fully Resolved Clue") else SEARCHABLE
            fields = {}
            continue
        for label, key in _CODE_FIELDS:
            if line.startswith(label):
                fields[key] = line.split(label, 1)[1].strip()
                break
    close()
    return Parsed(clues=resolved, searchable=searchable, status="ok" if resolved or searchable else "failed")


def parse_simple_decomposition(text: str | None) -> Parsed:
    """Triplets of the retry reply (``t2rag_decompose_simple``) as TRAG.py:1008-1028 reads them: every
    ``s | p | o`` line, bullets and numbering stripped, a generic ``? | ...related... | <long object>`` line
    dropped, the first 3 kept (1028), then de-duplicated as every decomposition is (398-417: a repeated line among
    the three leaves fewer). Status ``retried`` or ``failed``."""
    clues = []
    for line in (text or "").splitlines():
        c = _triple_from_line(line, allow_commas=False)
        if c is not None and not (c.subject == "?" and "related" in c.predicate.lower() and len(c.object) > 30):
            clues.append(c)
    clues = dedupe(clues[:3])
    return Parsed(clues=clues, status="retried" if clues else "failed")


def code_answer(text: str | None) -> str:
    """The answer as TRAG.py:1117-1119 takes it: the text after the last "Answer:", else the whole reply."""
    text = text or ""
    return (text.split("Answer:")[-1] if "Answer:" in text else text).strip()

