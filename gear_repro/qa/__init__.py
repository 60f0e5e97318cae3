"""End-to-end QA (Table 3): answer from the top-5 passages of a retriever's final ranking (App. K.3)."""

from gear_repro.qa.reader import QA_MODES, QAReader, extract_answer

__all__ = ["QA_MODES", "QAReader", "extract_answer"]
