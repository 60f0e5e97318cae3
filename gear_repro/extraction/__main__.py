"""Stand-alone extraction driver (the runner's ``stage=extract`` does the same through Hydra).

    python -m gear_repro.extraction --dataset data/musique_sample --llm local --limit 20 --out OUT
    python -m gear_repro.extraction --corpus musique_train_100_corpus.json \
        --openie openie_musique_train_results_ner_gpt-3.5-turbo-1106_1890.json --llm local --limit 20 --out OUT

``--llm`` names a file of configs/llm (local, tiny, openai, openai_compatible); ``--openie`` imports HippoRAG
OpenIE triples as the reference to compare counts with.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf.errors import OmegaConfBaseException

from gear_repro.config import group_config
from gear_repro.extraction.extract import extract_triples, extraction_error
from gear_repro.llm.server import check_server_overrides
from gear_repro.utils.errors import GearError
from gear_repro.utils.secrets import install_log_redaction, is_secret_override, redact_text, register_override


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--dataset", help="canonical dataset folder (corpus.jsonl, questions.jsonl, triples.jsonl)")
    src.add_argument("--corpus", help="HippoRAG-style corpus JSON ([{title, text}])")
    ap.add_argument("--openie", help="HippoRAG OpenIE file, imported as reference triples (with --corpus)")
    ap.add_argument("--llm", default="local", help="configs/llm/<name>.yaml (default local)")
    ap.add_argument("--limit", type=int, default=None, help="first N passages (default all)")
    ap.add_argument("--out", required=True, help="output folder (resumable)")
    ap.add_argument("--set", nargs="*", default=[], help="llm overrides, e.g. max_tokens=512 (+params.seed=1 adds a key)")
    a = ap.parse_args(argv)
    if a.limit is not None and a.limit < 1:  # 0 would mean "all" below
        ap.error(f"--limit must be a positive number of passages, got {a.limit}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    install_log_redaction()  # httpx's request lines quote the endpoint URL (credentials, ?key=)
    for kv in a.set:  # the run CLI's rule: a secret key, a header, a map holding one, a URL with credentials
        key, _, value = llm_override(kv).partition("=")
        if is_secret_override(key.lstrip("+~"), value):
            register_override(key.lstrip("+~"), value)
    try:
        check_server_overrides([f"llm={a.llm}", *(llm_override(kv) for kv in a.set)])
        _run(a)
    except (GearError, OmegaConfBaseException, HydraException, OSError) as e:
        cause = e.__cause__ if isinstance(e.__cause__, GearError) else e  # a setting refused while instantiating
        raise SystemExit(f"error: {redact_text(str(cause))}") from None


def llm_override(kv: str) -> str:
    """A ``--set`` item as an override of the ``llm`` node, Hydra's prefixes kept in front: ``max_tokens=5`` ->
    ``llm.max_tokens=5``, ``+params.seed=1`` (a key to add) -> ``+llm.params.seed=1``, ``~params.stop`` -> ``~llm...``."""
    prefix = kv[:2] if kv.startswith("++") else kv[:1] if kv[:1] in "+~" else ""
    return f"{prefix}llm.{kv[len(prefix):]}"


def _run(a: argparse.Namespace) -> None:
    if a.dataset:
        from gear_repro.data.dataset import load_dataset

        ds = load_dataset(a.dataset)
        passages, reference, name = ds.passages, ds.triples, ds.name
    else:
        from gear_repro.data.converters import load_hipporag_corpus
        from gear_repro.data.openie import import_hipporag_openie

        passages, name = load_hipporag_corpus(a.corpus), Path(a.corpus).stem
        reference = import_hipporag_openie(a.openie, passages)[0] if a.openie else None
    cfg = group_config("llm", a.llm, [llm_override(kv) for kv in a.set])
    llm = instantiate(cfg)
    llm.check_ready()  # the key or the local model file, before any passage
    try:
        stats = extract_triples(passages[: a.limit] if a.limit else passages, llm, a.out, reference=reference,
                                dataset_name=name)
    finally:
        llm.close()
    print(json.dumps({k: v for k, v in stats.items() if k != "llm_stats"} | {"llm_stats": llm.stats()}, indent=2))
    err = extraction_error(stats)
    if err is not None:
        raise SystemExit(f"error: {err}")


if __name__ == "__main__":
    main()
