"""LLM layer: one client over OpenAI-compatible endpoints, reply cache, token ledger, parsers.

Build with Hydra ``instantiate(cfg.llm)`` (configs/llm/*.yaml); see docs/llm.md.
"""

from gear_repro.llm.base import LLM
from gear_repro.llm.client import LLMCallError, LLMClient, LLMReply
from gear_repro.llm.ledger import TokenLedger
from gear_repro.llm.parsing import ParsedTriples, parse_extraction, parse_reason, parse_rewrite, parse_triples

__all__ = ["LLM", "LLMCallError", "LLMClient", "LLMReply", "ParsedTriples", "TokenLedger", "parse_extraction",
           "parse_reason", "parse_rewrite", "parse_triples"]
