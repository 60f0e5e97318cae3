"""Print the content identities of the offline samples, for gear_repro/resources/known_datasets.yaml.

    python scripts/known_dataset_ids.py [SHARED_DATA] [--write-ids]

converts each sample with the project's own converters (as scripts/prepare_samples.sh does), prints its
corpus_identity / questions_identity (gear_repro/data/identity.py), and with --write-ids writes the sorted question
ids, each with its question text's hash, to gear_repro/resources/known_question_ids/<name>.txt (a question
set is recognised by its ids and texts, never by its count). The bundled MuSiQue sample is read from
data/musique_sample (its prepared form); its raw files in SHARED_DATA/musique_sample must give the same hashes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gear_repro.data import load_dataset
from gear_repro.data.converters import FORMATS
from gear_repro.data.identity import corpus_identity, questions_identity, write_known_ids

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    shared = Path(args[0]) if args else REPO.parent / "shared" / "data"
    sets = {
        "musique_train_100": load_dataset(REPO / "data" / "musique_sample"),
        "musique_train_100 (raw)": FORMATS["musique"](shared / "musique_sample" / "musique_train_100.json",
                                                      corpus=shared / "musique_sample" /
                                                      "musique_train_100_corpus.json"),
        "hipporag_2wiki_300": FORMATS["2wiki_hipporag"](shared / "2wiki_sample" / "2wikimultihopqa_questions_300.json",
                                                        corpus=shared / "2wiki_sample" /
                                                        "2wikimultihopqa_corpus.json"),
        "hotpotqa_train_25": FORMATS["hotpotqa"](shared / "hotpotqa_sample" / "hotpotqa_train_25.json"),
    }
    for name, data in sets.items():
        c, q = corpus_identity(data.passages), questions_identity(data.questions)
        print(f"{name}: passages {c['passages']} corpus_sha256 {c['content_sha256']}  "
              f"questions {q['questions']} ids_sha256 {q['ids_sha256']} texts_sha256 {q['texts_sha256']}")
        if "--write-ids" in argv and "(raw)" not in name:
            write_known_ids(name, q)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
