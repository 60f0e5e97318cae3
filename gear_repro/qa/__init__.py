"""End-to-end QA (Table 3): answer from the top-5 passages of a retriever's final ranking (App. K.3)."""

from gear_repro.qa.reader import QAMode, QAReader, extract_answer

__all__ = ["QAMode", "QAReader", "extract_answer"]
