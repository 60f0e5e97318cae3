"""Import HippoRAG OpenIE triple files (``openie_results*.json``) as canonical triples (DESIGN.md
"Datasets": importer for HippoRAG OpenIE result files; docs/data.md)."""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from gear_repro.data.converters import _N_EXAMPLES, _NFC, CorpusIndex, norm_text, norm_title
from gear_repro.types import Passage, Triple
from gear_repro.utils.errors import DataError
from gear_repro.utils.io import read_json, record_bar, require_file

log = logging.getLogger(__name__)


def import_hipporag_openie(path: str | Path, passages: list[Passage]) -> tuple[list[Triple], dict[str, Any]]:
    """Triples from a HippoRAG OpenIE file ({"docs": [{title?, text?, passage, extracted_triples}]}).

    A doc maps to its passage by normalised (title, text) when it has both, else by its ``passage``
    ("title\\ntext" in HippoRAG) against the passage content, else by text alone. Triples must be
    three non-empty strings (trimmed, in NFC as prepare writes passages: an NFD "Jime\u0301nez" would be
    another entity of the graph and another BM25 word; counted in ``nfc_normalised``); others, exact repeats
    within a passage, and triples of unmatched docs are dropped and counted by reason. Ids are
    "<passage_id>-<n>", n counting kept triples of that passage in file order.
    """
    p = require_file(path, "OpenIE file")
    data = read_json(p)
    if not isinstance(data, dict) or not isinstance(data.get("docs"), list):
        raise DataError(f"{p}: expected a JSON object with a 'docs' list (HippoRAG OpenIE output)")
    index = CorpusIndex(passages)
    nfc = _NFC()
    dropped: Counter[str] = Counter()
    matched_by: Counter[str] = Counter()
    triples: list[Triple] = []
    per_passage: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    n_in = 0
    unmatched_examples: list[str] = []
    bar = record_bar(len(data["docs"]), f"matching {p.name} docs", "doc")
    for i, doc in enumerate(data["docs"]):
        bar.update()
        ref = f"{p} docs[{i}]"
        if not isinstance(doc, dict):
            raise DataError(f"{ref}: expected an object")
        raw = doc.get("extracted_triples")
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise DataError(f"{ref}: 'extracted_triples' should be a list")
        n_in += len(raw)
        pid = _match_doc(doc, index, matched_by)
        if pid is None:
            dropped["doc_not_in_corpus"] += len(raw)
            if len(unmatched_examples) < _N_EXAMPLES:
                unmatched_examples.append(ref)
            continue
        seen = per_passage[pid]
        for t in raw:
            if not isinstance(t, list | tuple) or len(t) != 3:
                dropped["wrong_arity"] += 1
            elif not all(isinstance(x, str) for x in t):
                dropped["non_string_part"] += 1
            elif not all(x.strip() for x in t):
                dropped["empty_part"] += 1
            else:
                s, r, o = (nfc(" ".join(x.split()), "triple_parts") for x in t)
                if (s, r, o) in seen:
                    dropped["duplicate_in_passage"] += 1
                    continue
                triples.append(Triple(f"{pid}-{len(seen)}", s, r, o, pid))
                seen.add((s, r, o))
    bar.close()
    docs_matched = sum(v for k, v in matched_by.items() if k != "none")
    with_triples = sum(1 for s in per_passage.values() if s)
    stats = {
        "file": str(p), "docs": len(data["docs"]), "docs_matched": docs_matched,
        "docs_unmatched": matched_by["none"], "docs_matched_by": dict(sorted(matched_by.items())),
        "triples_in_file": n_in, "triples_kept": len(triples), "triples_dropped": sum(dropped.values()),
        "dropped_by_reason": dict(sorted(dropped.items())),
        "passages_with_triples": with_triples, "passages_without_triples": len(passages) - with_triples,
        "unmatched_doc_examples": unmatched_examples, "nfc_normalised": nfc.changed["triple_parts"],
    }
    if matched_by["none"]:
        log.warning("%s: %d OpenIE docs match no corpus passage; their %d triples are dropped", p,
                    matched_by["none"], dropped["doc_not_in_corpus"])
    if dropped:
        log.info("%s: dropped triples by reason: %s", p, json.dumps(stats["dropped_by_reason"]))
    return triples, stats


def _match_doc(doc: dict, index: CorpusIndex, how: Counter[str]) -> str | None:
    title, text, passage = doc.get("title"), doc.get("text"), doc.get("passage")
    if isinstance(title, str) and isinstance(text, str):
        ids = index.by_key.get((norm_title(title), norm_text(text)))
        if ids:
            how["title_text"] += 1
            return ids[0]
    if isinstance(passage, str):
        ids = index.by_content.get(norm_text(passage)) or index.by_text.get(norm_text(passage))
        if ids:
            how["passage"] += 1
            return ids[0]
    how["none"] += 1
    return None
