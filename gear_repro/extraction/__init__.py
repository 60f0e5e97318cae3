"""Offline triple extraction (GEAR §6.2, App. K.1): passages C -> triples T, each tied to one passage.

``run_extraction(cfg, dataset, llm, run_dir)`` is the ``stage=extract`` entry point; ``extract_triples`` is the
same work without a config. Outputs in the run dir:

- ``triples.jsonl``          canonical triples {id, subject, predicate, object, passage_id}, id "<passage_id>-<n>"
- ``extraction_log.jsonl``   one record per finished passage (entities, parse outcome, tokens, cached)
- ``extraction_stats.json``  triples-per-passage distribution, passages with none, parse failures/repairs/
                             dropped, tokens, passages/min, and counts against the dataset's own triples
                             (e.g. HippoRAG's GPT-3.5 OpenIE) on the same passages when it has them, and the
                             cost/time estimate said before the first call (``estimate``, ``estimate_revised``
                             after the first calls: llm/estimate.py).

Resumable: a passage counts as done once its log record is written (after its triples); a re-run skips
done passages and first drops triples of a passage whose log record never made it (killed in between).
"""

from gear_repro.extraction.extract import LOG_FILE as EXTRACTION_LOG
from gear_repro.extraction.extract import ExtractionError, extract_triples, extraction_error, run_extraction

__all__ = ["EXTRACTION_LOG", "ExtractionError", "extract_triples", "extraction_error", "run_extraction"]
