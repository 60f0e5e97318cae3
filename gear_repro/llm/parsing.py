"""Forgiving, counted parsers for LLM replies (App. K output formats); they never raise.

Triples come as the paper's demonstrations show them (K.1: ``{"named_entities": [...]}`` then
``{"triples": [("s", "p", "o"), ...,]}``; K.2: ``Facts: ("s", "p", "o"), ("s", "p", "o")``), or as JSON
lists, inside code fences, with trailing garbage or cut off mid-way. The reply is normalised by a
string-aware scan (Python tuple parentheses -> JSON brackets, trailing commas removed, outside string
literals only), parsed strictly if possible and otherwise with the ``json_repair`` library
(``repaired=True``). Wrong-arity or non-string triples are dropped and counted; whitespace is squeezed (as the HippoRAG
importer does) and exact duplicates are removed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

from gear_repro.types import Triple3

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)


@dataclass
class ParsedTriples:
    """Triples parsed from one reply, with what it took to get them."""

    triples: list[Triple3] = field(default_factory=list)
    repaired: bool = False
    dropped: int = 0
    failed: bool = False
    error: str | None = None


def strip_fences(text: str) -> str:
    """The content of Markdown code fences if the reply has any, else the reply itself."""
    blocks = [m.group(1) for m in _FENCE.finditer(text)]
    blocks = [b for b in blocks if b.strip()]
    return "\n".join(blocks) if blocks else text


ECHO_MIN_CHARS = 64  # a reply must repeat this much of its prompt verbatim to count as an echo
ECHO_COUNTER = "llm_echoed_replies"  # metrics.json agent_stats: replies that repeated their prompt (warned about)
# metrics.json agent_stats: replies cut off at max_tokens (finish_reason "length"), parsed as they are (warned about)
TRUNCATED_COUNTER = "llm_truncated_replies"
_ROLE_MARKS = re.compile(r"^(?:\s*<\|[^|<>\n]{1,40}\|>|\s*(?:system|user|assistant)[ \t]*:?[ \t]*\n)*\s*",
                         re.IGNORECASE)


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def strip_echo(reply: str, prompts: list[str]) -> tuple[str, bool]:
    """``(completion, echoed)``: the reply without the repeat of its prompt it carries (a server that returns
    the prompt with the completion, a base model or a wrong chat template restating its input).

    Every App. K template carries worked examples in the very format its parser reads, so an echoed prompt
    would be parsed as its example (GEAR "Answerable: Yes", IRCoT's demo answer, HippoRAG's demo entities).
    An echo is (a) the whole last prompt message inside the reply: the completion is what follows its last
    occurrence; or (b) a reply that begins with the prompt's messages in order, at least ``ECHO_MIN_CHARS``
    characters verbatim (chat-template role marks between them skipped): the completion is what follows the
    repeated part, empty when the reply is nothing but (a cut-off) repeat. Parsers then count an empty
    completion as the failure it is."""
    parts = [p.strip() for p in prompts if p and p.strip()]
    if not parts or not reply:
        return reply, False
    last = parts[-1]
    if len(last) >= ECHO_MIN_CHARS and (at := reply.rfind(last)) >= 0:
        return _ROLE_MARKS.sub("", reply[at + len(last):], count=1), True
    rest, repeated = _ROLE_MARKS.sub("", reply, count=1), 0
    for part in parts:
        n = _common_prefix(rest, part)
        if n < len(part) and n < ECHO_MIN_CHARS:
            break
        repeated += n
        rest = _ROLE_MARKS.sub("", rest[n:], count=1) if n == len(part) else rest[n:]
        if n < len(part):
            break
    if repeated < ECHO_MIN_CHARS:
        return reply, False
    return rest, True


def _normalise(text: str) -> str:
    """Tuple parens -> brackets and drop trailing commas, outside of string literals."""
    out: list[str] = []
    quote: str | None = None
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c == '"' or (c == "'" and (not out or not out[-1].isalnum())):
            quote = c
            out.append(c)
        elif c == "(":
            out.append("[")
        elif c == ")":
            out.append("]")
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "])}":
                i = j
                continue
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _strict_values(text: str) -> list[Any] | None:
    """All top-level JSON values of ``text`` (leading label text allowed), or None if anything else."""
    start = min((p for p in (text.find("["), text.find("{")) if p >= 0), default=-1)
    if start < 0:
        return None
    dec = json.JSONDecoder()
    pos, n, values = start, len(text), []
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            return values
        try:
            val, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            return None
        values.append(val)


def _load(text: str) -> tuple[list[Any], bool, str | None]:
    """(top-level values, repaired?, error) for a reply."""
    body = _normalise(strip_fences(text))
    values = _strict_values(body)
    if values is not None:
        return values, False, None
    try:
        obj = json_repair.loads(body)
    except Exception as e:  # json_repair is forgiving but never trust a parser with a run
        return [], True, f"json_repair failed: {e}"
    if obj in ("", None) or obj == [] and "[" not in body:
        return [], True, "no JSON structure found"
    # json_repair returns several top-level values as a list of them
    return (obj if isinstance(obj, list) and len(obj) and isinstance(obj[0], dict) else [obj]), True, None


def _is_triple_list(x: Any) -> bool:
    return isinstance(x, list) and any(isinstance(i, (list, dict)) for i in x)


def _find(values: list[Any], key: str) -> Any:
    for v in values:
        if isinstance(v, dict) and key in v:
            return v[key]
        if isinstance(v, list):
            hit = _find([i for i in v if isinstance(i, (dict, list))], key) if any(
                isinstance(i, dict) for i in v) else None
            if hit is not None:
                return hit
    return None


def _coerce(item: Any) -> Triple3 | None:
    if isinstance(item, dict):
        keys = [k for k in ("subject", "predicate", "object") if k in item]
        item = [item.get(k) for k in keys] if len(keys) == 3 else list(item.values())
    if not isinstance(item, (list, tuple)) or len(item) != 3:
        return None
    if any(isinstance(x, (list, dict)) or x is None for x in item):
        return None
    parts = tuple(" ".join(str(x).split()) for x in item)
    return parts if all(parts) else None  # type: ignore[return-value]


def _collect(values: list[Any]) -> tuple[list[Any], bool]:
    """Candidate triple items and whether any triple-like structure was found."""
    found = _find(values, "triples")
    if found is not None:
        return (found if isinstance(found, list) else [found]), True
    items: list[Any] = []
    seen = False
    for v in values:
        if isinstance(v, list) and v and all(isinstance(x, (str, int, float)) for x in v):
            items.append(v)  # a bare triple such as ("s", "p", "o")
            seen = True
        elif _is_triple_list(v):
            items.extend(v)
            seen = True
        elif isinstance(v, dict) and {"subject", "object"} <= v.keys():
            items.append(v)
            seen = True
    return items, seen


def parse_triples(text: str | None) -> ParsedTriples:
    """Triples from a K.1/K.2 reply; exact duplicates removed, bad items dropped and counted."""
    if not text or not text.strip():
        return ParsedTriples(failed=True, error="empty reply")
    try:
        values, repaired, err = _load(text)
        if err:
            return ParsedTriples(failed=True, error=err)
        items, seen = _collect(values)
        if not seen:
            return ParsedTriples(failed=True, error="no triples in the reply")
        out: list[Triple3] = []
        dropped = 0
        for it in items:
            t = _coerce(it)
            if t is None:
                dropped += 1
            elif t not in out:
                out.append(t)
        if not out and dropped:  # valid JSON of the wrong shape (2-tuples, ...): nothing read is a failure, counted
            return ParsedTriples(failed=True, dropped=dropped, error=f"none of the {dropped} items is a "
                                 "(subject, predicate, object) triple")
        return ParsedTriples(triples=out, repaired=repaired, dropped=dropped)
    except Exception as e:  # never crash a run on a reply
        return ParsedTriples(failed=True, error=f"{type(e).__name__}: {e}")


def parse_extraction(text: str | None) -> tuple[list[str], ParsedTriples]:
    """(named entities, triples) of the K.1 joint extraction reply (§6.2)."""
    parsed = parse_triples(text)
    entities: list[str] = []
    if text and text.strip():
        try:
            values, _, _ = _load(text)
            ents = _find(values, "named_entities")
            if isinstance(ents, list):
                for e in ents:
                    if isinstance(e, (str, int, float)) and str(e).strip() and str(e).strip() not in entities:
                        entities.append(str(e).strip())
        except Exception:  # entities are a by-product; never fail on them
            entities = []
    return entities, parsed


@dataclass
class ParsedEntities:
    """Named entities parsed from one NER reply (HippoRAG's ``{"named_entities": [...]}`` format)."""

    entities: list[str] = field(default_factory=list)
    repaired: bool = False
    failed: bool = False
    error: str | None = None


def parse_named_entities(text: str | None) -> ParsedEntities:
    """Entities of a HippoRAG query-NER reply: the ``named_entities`` list of a JSON object, also inside code
    fences, after leading text, or cut off mid-way (repaired; a cut-off last item is kept as it stands);
    a bare JSON list of strings is accepted too. Empty or entity-free replies give ``failed=True``."""
    if not text or not text.strip():
        return ParsedEntities(failed=True, error="empty reply")
    try:
        values, repaired, err = _load(text)
        if err:
            return ParsedEntities(failed=True, repaired=repaired, error=err)
        found = _find(values, "named_entities")
        if found is None and len(values) == 1 and isinstance(values[0], list):
            found = values[0]
        if not isinstance(found, list):
            return ParsedEntities(failed=True, repaired=repaired, error="no named_entities list in the reply")
        out: list[str] = []
        flat = [x for e in found for x in (e if isinstance(e, list) else [e])]  # [["a"], ["b"]]: repaired
        repaired = repaired or any(isinstance(e, list) for e in found)
        for e in flat:
            e = " ".join(str(e).split()) if isinstance(e, str | int | float) and not isinstance(e, bool) else ""
            if e and e not in out:
                out.append(e)
        if found and not out:  # valid JSON of the wrong shape: a failure (counted), not "no entity"
            return ParsedEntities(failed=True, repaired=repaired,
                                  error=f"none of the {len(found)} named_entities items is a name")
        return ParsedEntities(entities=out, repaired=repaired)
    except Exception as e:  # never crash a run on a reply
        return ParsedEntities(failed=True, error=f"{type(e).__name__}: {e}")


_ANSWERABLE = re.compile(r"answerable\s*[:：]?\s*\**\s*(yes|no)\b", re.IGNORECASE)
_FIELD = re.compile(r"^\W*(answer|why|reason)\s*\**\s*[:：]\s*\**\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_reason(text: str | None) -> tuple[bool | None, str, bool]:
    """(answerable, answer-or-why, ok) from the K.2 "Answerable: Yes/No" reply (§5.2)."""
    if not text or not text.strip():
        return None, "", False
    m = _ANSWERABLE.search(text)
    if not m:
        return None, text.strip(), False
    answerable = m.group(1).lower() == "yes"
    rest = text[m.end():].strip()
    lines = rest.splitlines()
    for i, line in enumerate(lines):
        f = _FIELD.match(line)
        if f:
            body = "\n".join([f.group(2), *lines[i + 1:]]).strip()
            return answerable, body, True
    return answerable, rest, True


_NEXT_Q = re.compile(r"next\s+question\s*[:：]\s*(.*)", re.IGNORECASE | re.DOTALL)


def parse_rewrite(text: str | None) -> tuple[str, bool]:
    """(next question, ok) from the K.2 query re-writing reply (§5.3)."""
    if not text or not text.strip():
        return "", False
    m = _NEXT_Q.search(text)
    body = m.group(1) if m else text
    lines = [ln.strip() for ln in body.strip().splitlines() if ln.strip()]
    if not lines:
        return "", False
    q = lines[0].strip().strip('"“”\'`*').strip()
    return q, bool(q)


__all__ = ["ECHO_COUNTER", "ParsedEntities", "ParsedTriples", "parse_extraction", "parse_named_entities", "parse_reason",
           "parse_rewrite", "parse_triples", "strip_echo", "strip_fences"]
