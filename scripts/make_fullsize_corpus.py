"""A MuSiQue-size text corpus (GEAR Table 5: 148,793 chunks, 1.52M triples) grown from the bundled sample, in the
native files ``gear-repro-prepare --format musique`` reads (docs/scale.md, "Full-size dress rehearsal").

    python scripts/make_fullsize_corpus.py --out DIR [--chunks 148793] [--triples 1520000] [--seed 0]

writes DIR/questions.json (the sample's 100 questions, unchanged), DIR/corpus.json ([{title, text}]: the sample's
1,890 passages, then the distractors) and DIR/openie.json (HippoRAG OpenIE form: {"docs": [{title, text, passage,
extracted_triples}]}), then

    gear-repro-prepare --format musique --dataset musique --questions DIR/questions.json \\
        --corpus DIR/corpus.json --triples-hipporag DIR/openie.json --out PREPARED

Each distractor is one of the sample's OpenIE documents (title, text and its extracted triples) with its
question-local entities renamed: an entity that the sample finds in the contexts of fewer than
``GLOBAL_QUESTIONS`` (3) questions (benchmarks/bench_scale.py :func:`entity_spans`) gets a new name in each copy, in
the text, the title and the triples alike; an entity found in more (United States, London, 1998, ...) keeps its
name, so it links ~78x more triples, its share of the corpus in the sample: the hub model of ``bench_scale
--hubs sample``. Templates are drawn with weight (triples + 1)^alpha, alpha fitted so the corpus holds ``--triples``
triples (MuSiQue: 10.2 per chunk; the sample 9.1). New names are made of the bench's syllables, one unique word
per renamed entity (numbers and dates: other digits), so two copies never share a local entity by accident.

Realistic: passage lengths, sentence structure and vocabulary (real English from the sample), triples per passage,
the degree of the corpus-wide entities and of the local ones, the gold passages and triples of the 100
questions. Not realistic: the distractors are ~78 renamed copies of each of 1,890 templates (real distractors
are 148k different paragraphs), so they are harder negatives than Wikipedia's for dense search (same sentences
as a gold passage, other names) and easier for BM25 on the questions' entity names (renamed away); the renamed
names are syllable strings a word-piece tokenizer splits into more pieces than real names.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_scale import GLOBAL_QUESTIONS, SIZES, SYLLABLES, entity_spans  # noqa: E402
from gear_repro.core.triple_graph import normalize_entity  # noqa: E402

SHARED = REPO.parent / "shared" / "data" / "musique_sample"
KEEP_WORDS = {"of", "the", "and", "in", "for", "a", "an", "de", "la", "le", "von", "van", "on", "at", "to", "&"}
NUMBERISH = re.compile(r"^[\d\s,./:-]+$")


class Namer:
    """Unique new names: word ``i`` is ``i`` in base len(SYLLABLES), one syllable per digit, over a shuffled id
    space, so names differ across copies and look alike (3-5 syllables)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.next = 0
        self.offset = int(rng.integers(0, 10_000))
        self.base = len(SYLLABLES)

    def word(self) -> str:
        i = (self.next * 7_919 + self.offset) % (self.base ** 5 - self.base ** 2) + self.base ** 2
        self.next += 1
        out = []
        while i:
            i, d = divmod(i, self.base)
            out.append(SYLLABLES[d])
        return "".join(out)

    def rename(self, surface: str) -> str:
        """A new name shaped like ``surface``: digits -> other digits, words -> syllable words (function words
        kept), the first word unique."""
        if NUMBERISH.match(surface):
            return "".join(str(self.rng.integers(0, 10)) if c.isdigit() else c for c in surface)
        words, first = [], True
        for w in surface.split():
            if w.lower() in KEEP_WORDS and not first:
                words.append(w)
                continue
            new = self.word() if first else SYLLABLES[int(self.rng.integers(0, self.base))] + self.word()[:4]
            first = False
            words.append(new.capitalize() if w[:1].isupper() else new)
        return " ".join(words)


def load_templates(openie: Path) -> list[dict]:
    """The sample's OpenIE docs with their well-formed triples (three strings, as the importer keeps them)."""
    docs = json.loads(openie.read_text())["docs"]
    out = []
    for d in docs:
        triples = [t for t in d.get("extracted_triples") or []
                   if isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) and x.strip() for x in t)]
        out.append({"title": d["title"], "text": d["text"], "triples": triples})
    return out


def fit_alpha(counts: np.ndarray, target_mean: float) -> float:
    """alpha such that templates drawn with weight (count + 1)^alpha average ``target_mean`` triples."""
    lo, hi = -4.0, 4.0
    for _ in range(60):
        mid = (lo + hi) / 2
        w = (counts + 1.0) ** mid
        if float((w * counts).sum() / w.sum()) < target_mean:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def local_pattern(template: dict, local: set[str]) -> re.Pattern | None:
    """A regex of the template's question-local entity surfaces (longest first, whole words, any case)."""
    surfaces = {x.strip() for t in template["triples"] for x in (t[0], t[2]) if normalize_entity(x) in local}
    surfaces = sorted((s for s in surfaces if s), key=len, reverse=True)
    if not surfaces:
        return None
    return re.compile(r"(?<!\w)(" + "|".join(re.escape(s) for s in surfaces) + r")(?!\w)", re.IGNORECASE)


def generate(out: Path, chunks: int, n_triples: int, seed: int, sample_dir: Path, shared: Path) -> dict:
    """Write the three native files into ``out``; returns the counts (also written to DIR/generator.json)."""
    rng = np.random.default_rng(seed)
    raw_questions = shared / "musique_train_100.json"
    templates = load_templates(next(shared.glob("openie_musique_*.json")))
    degree, spans, _ = entity_spans(raw_questions, sample_dir)
    local = {e for e, qs in spans.items() if len(qs) < GLOBAL_QUESTIONS}
    counts = np.asarray([len(t["triples"]) for t in templates], dtype=np.float64)
    n_dis = chunks - len(templates)
    if n_dis < 0:
        raise SystemExit(f"--chunks {chunks} is below the sample's {len(templates)} passages")
    target = (n_triples - counts.sum()) / max(1, n_dis)
    patterns = [local_pattern(t, local) for t in templates]
    usable = np.asarray([p is not None for p in patterns])  # a copy without a renamed entity would repeat it
    alpha = fit_alpha(counts[usable], target)
    w = np.where(usable, (counts + 1.0) ** alpha, 0.0)
    picks = rng.choice(len(templates), size=n_dis, p=w / w.sum())
    namer = Namer(rng)
    out.mkdir(parents=True, exist_ok=True)
    (out / "questions.json").write_bytes(raw_questions.read_bytes())
    n_out_triples = 0
    with open(out / "corpus.json", "w") as fc, open(out / "openie.json", "w") as fo:
        fc.write("[")
        fo.write('{"docs": [')
        for i in range(chunks):
            if i < len(templates):
                t = templates[i]
                title, text, triples = t["title"], t["text"], t["triples"]
            else:
                j = int(picks[i - len(templates)])
                t, pat = templates[j], patterns[j]
                names: dict[str, str] = {}

                def new(s: str, names: dict[str, str] = names) -> str:
                    key = normalize_entity(s)
                    if key not in local:
                        return s
                    if key not in names:
                        names[key] = namer.rename(s.strip())
                    return names[key]

                triples = [[new(s), p, new(o)] for s, p, o in t["triples"]]
                title = pat.sub(lambda m: new(m.group(0)), t["title"])
                text = pat.sub(lambda m: new(m.group(0)), t["text"])
            n_out_triples += len(triples)
            sep = "," if i else ""
            fc.write(sep + json.dumps({"title": title, "text": text}))
            fo.write(sep + json.dumps({"title": title, "text": text, "passage": f"{title}\n{text}",
                                       "extracted_triples": triples}))
        fc.write("]\n")
        fo.write("]}\n")
    stats = {"seed": seed, "chunks": chunks, "sample_passages": len(templates), "distractors": n_dis,
             "triples_in_openie": n_out_triples, "template_alpha": round(alpha, 4),
             "corpus_wide_entities": len(spans) - len(local), "local_entities": len(local),
             "global_questions": GLOBAL_QUESTIONS}
    (out / "generator.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats


def main() -> None:
    chunks, triples = SIZES["musique"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for questions.json, corpus.json, openie.json")
    ap.add_argument("--chunks", type=int, default=chunks, help=f"passages in all (default {chunks:,}: MuSiQue)")
    ap.add_argument("--triples", type=int, default=triples, help=f"triples in all, about (default {triples:,})")
    ap.add_argument("--seed", type=int, default=0, help="seed of the template draws and names (default 0)")
    ap.add_argument("--sample", type=Path, default=REPO / "data" / "musique_sample",
                    help="the bundled prepared sample (corpus.jsonl, triples.jsonl)")
    ap.add_argument("--shared", type=Path, default=SHARED,
                    help="the sample's native files (musique_train_100.json, openie_musique_*.json)")
    a = ap.parse_args()
    print(json.dumps(generate(a.out, a.chunks, a.triples, a.seed, a.sample, a.shared), indent=2))


if __name__ == "__main__":
    main()
