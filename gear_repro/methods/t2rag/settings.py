"""T²RAG's settings: the values each ``agent.*`` choice takes (``configs/agent/t2rag.yaml`` sets the code
reading's, ``configs/agent/t2rag_paper.yaml`` the paper's; docs/t2rag.md) and the constants they select."""

from __future__ import annotations

from gear_repro.utils.settings import Choice


class T2RAGRanking(Choice):
    """How T²RAG's iteration lists become the method's ranking (agent.ranking)."""

    rrf = "rrf"        # RRF of the iteration lists (as GEAR fuses its rounds, Eq. 9)
    concat = "concat"  # iteration lists in order, de-duplicated


class T2RAGReading(Choice):
    """Which preset's reading a T²RAG config is (agent.reading: recorded for the report; the behaviours are the
    preset's explicit keys; docs/readings.md)."""

    code = "code"    # rockcor/T2RAG src/TRAG.py, behind the published numbers (configs/agent/t2rag.yaml; DESIGN.md)
    paper = "paper"  # the paper's prose (Alg. 1-2, §4.3, App. E; configs/agent/t2rag_paper.yaml)


class T2RAGQuestionQuery(Choice):
    """How question words are removed from the extra question query (agent.question_query_mode)."""

    substring = "substring"  # the code: lower-cased, removed as substrings (TRAG.py:481-485)
    word = "word"            # on word boundaries


class T2RAGDecomposeRetry(Choice):
    """What follows a decomposition with no parsable triplet (agent.decompose_retry)."""

    simple = "simple"  # the code: one retry with the simpler prompt, at most 3 triplets (TRAG.py:375-383)
    none = "none"      # the paper: no retry; answered from no clues


class T2RAGOnNoTriplets(Choice):
    """What a question gets when the decomposition (and its retry) yields no triplet (agent.on_no_triplets)."""

    fail = "fail"      # the code: the query fails (TRAG.py:385-396 raise; 1429-1437: no documents, the answer
                       # FAILED_ANSWER), no answer call
    answer = "answer"  # the paper (no such case in its prose): answered from no clues


FAILED_ANSWER = "Error processing query"  # TRAG.py:1436, the answer recorded for a query that failed


class T2RAGPromptText(Choice):
    """Which texts the decomposition and resolve prompts have (agent.prompt_text)."""

    code = "code"    # TRAG.py:264-306, 641-725: "Traceable", the example's object filled in ("20 March 851"), the
                     # question at the top, a Propositions: request; t2rag_decompose_code, t2rag_resolve_code
    paper = "paper"  # App. E: "Searchable", the example's object "?"; t2rag_decompose, t2rag_resolve


class T2RAGDecomposeParse(Choice):
    """How the decomposition reply is read (agent.decompose_parse)."""

    code = "code"        # TRAG.py:319-373 (parse_decomposition_code)
    lenient = "lenient"  # our repairs (parse_decomposition)


class T2RAGQueryPlaceholders(Choice):
    """How a searchable triplet becomes a query proposition (agent.query_placeholders)."""

    code = "code"    # TRAG.py:466-471: a part is left out when it starts with '?', else kept verbatim; and
                     # candidates with a best similarity <= 0 are skipped (532)
    strip = "strip"  # every '?token' removed from every part


class T2RAGResolveParse(Choice):
    """How a resolve reply is read (agent.resolve_parse)."""

    code = "code"        # TRAG.py:944-978 (parse_resolution_code): headers and field names must start the line
    lenient = "lenient"  # our repairs (parse_resolution)


class T2RAGResolvedUpdate(Choice):
    """Where a clue the resolve reply lists under "Fully Resolved" goes (agent.resolved_update)."""

    code = "code"              # TRAG.py:1231: to the resolved set, whatever '?' it still holds
    reclassify = "reclassify"  # by its own placeholders: 0 resolved, 1 searchable, >= 2 fuzzy (§4.3 Step 1)


class T2RAGPropositionPassage(Choice):
    """Which passages a retrieved proposition brings (agent.proposition_passage)."""

    code = "code"  # TRAG.py:196-210: one passage per proposition text, the last one it was extracted from
    own = "own"    # each triple its own passage (a text extracted from several passages brings each)


class T2RAGFuzzyMatch(Choice):
    """How a new clue fills a fuzzy triplet in Step 2.3 (agent.fuzzy_match)."""

    placeholder = "placeholder"  # bound named placeholders, position and known entities (predicate reworded ok)
    words = "words"              # every known part, the predicate included, agrees word by word


class T2RAGAnswerParse(Choice):
    """How T²RAG's answer is read off the reply (agent.answer_parse)."""

    code = "code"      # after the last "Answer:", else the whole reply (TRAG.py:1117-1119)
    reader = "reader"  # the K.3 reader's first non-empty line (qa.reader.extract_answer)



# prompt_text -> (decomposition, resolve) templates
PROMPTS = {"code": ("t2rag_decompose_code", "t2rag_resolve_code"), "paper": ("t2rag_decompose", "t2rag_resolve")}
# prompt_text -> the "new clue" headers the strict parse accepts: the code's, and App. E's wording when it was asked for
NEW_CLUE_HEADERS = {"code": ("Newly Traceable Clue",), "paper": ("Newly Traceable Clue", "Newly Searchable Clue")}
# the keys where the paper and the public code differ: configs/agent/t2rag.yaml gives the code's value of each,
# configs/agent/t2rag_paper.yaml the paper's (docs/readings.md)
READING_KEYS = ("question_query", "question_query_mode", "carry_fuzzy", "resolve_without_context",
                "example_propositions_chars", "decompose_retry", "on_no_triplets", "prompt_text", "decompose_parse",
                "query_placeholders", "resolve_parse", "resolved_update", "proposition_passage")
