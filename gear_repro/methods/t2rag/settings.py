"""T²RAG's settings (:class:`T2RAGAgentSettings`, the ``agent=t2rag`` schema), the values each ``agent.*`` choice
takes (``configs/agent/t2rag.yaml`` sets the code reading's, ``configs/agent/t2rag_paper.yaml`` the paper's;
docs/t2rag.md) and the constants they select."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from omegaconf import MISSING

from gear_repro.core.fusion import RRF_K
from gear_repro.utils.errors import ConfigError
from gear_repro.utils.settings import Choice, Settings, num


class T2RAGRanking(Choice):
    """How T²RAG's iteration lists become the method's ranking (agent.ranking; the paper evaluates no retrieval,
    §5.2, so only Recall@k and the K.3 reader's passages depend on it, never T²RAG's own EM/F1)."""

    concat = "concat"  # the code: the iteration lists joined in order, a passage whose text is already listed
                       # dropped (TRAG.py:1392-1398, the documents rag_qa records)
    rrf = "rrf"        # the paper reading (ours, the prose has no ranking): RRF of the iteration lists, as GEAR
                       # fuses its rounds (Eq. 9)


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


@dataclass
class T2RAGAgentSettings(Settings):
    """``agent=t2rag`` / ``agent=t2rag_paper`` (each field's default and meaning declared here; seed 002 §4.3,
    Alg. 1-2, §5.2; docs/t2rag.md): the schema, :class:`~gear_repro.methods.t2rag.method.T2RAGAgent`'s settings
    and its describe(). The :data:`READING_KEYS` have no default: each preset gives all of them."""

    config_key: ClassVar[str] = "agent"

    _target_: str = "gear_repro.methods.t2rag.method.T2RAGAgent"
    name: str = "t2rag"
    k: int = num(5, ge=1)  # unique passages per iteration (§5.2)
    max_iterations: int = num(3, ge=1)  # N (§5.2); 1 = "single round" ablation (Table 2)
    candidate_depth: int = num(200, ge=1)  # propositions per query before the global ranking (Alg. 2 Search(I, q, N))
    with_passages: bool = True  # passages in the resolve prompt; false = "w/o chunk" ablation (Table 2)
    # which reading the keys below are: code (agent=t2rag, DESIGN.md) | paper (agent=t2rag_paper); a label for the
    # report, the keys decide
    reading: T2RAGReading = T2RAGReading.code
    # the paper-vs-code keys: each preset gives all of them (code: t2rag.yaml, paper: t2rag_paper.yaml)
    question_query: bool = MISSING  # code true (question as an extra query, TRAG.py:478-487) | paper false (Alg. 2)
    question_query_mode: T2RAGQuestionQuery = MISSING  # code substring | paper word
    carry_fuzzy: bool = MISSING  # code false (TRAG.py:738-740) | paper true (Step 2.3)
    resolve_without_context: bool = MISSING  # code false (TRAG.py:622-629) | paper true (Alg. 1)
    example_propositions_chars: int = num(MISSING, ge=0)  # code 1000 (TRAG.py:668) | paper 0 (= whole, App. E)
    decompose_retry: T2RAGDecomposeRetry = MISSING  # code simple (TRAG.py:375-383) | paper none
    on_no_triplets: T2RAGOnNoTriplets = MISSING  # code fail (TRAG.py:385-396) | paper answer
    prompt_text: T2RAGPromptText = MISSING  # code (TRAG.py's decomposition/resolve texts) | paper (App. E)
    decompose_parse: T2RAGDecomposeParse = MISSING  # code (TRAG.py:319-373) | paper lenient (our repairs)
    query_placeholders: T2RAGQueryPlaceholders = MISSING  # code (TRAG.py:466-471, 532) | paper strip
    resolve_parse: T2RAGResolveParse = MISSING  # code (TRAG.py:944-978, strict) | paper lenient (our repairs)
    resolved_update: T2RAGResolvedUpdate = MISSING  # code (TRAG.py:1231) | paper reclassify (by its '?')
    proposition_passage: T2RAGPropositionPassage = MISSING  # code (TRAG.py:196-210, last) | paper own
    # placeholder: bound placeholders + position + known entities fill fuzzy triplets | words (every known part agrees)
    fuzzy_match: T2RAGFuzzyMatch = T2RAGFuzzyMatch.placeholder
    # stop when nothing is searchable, retrieved or new (stop = "stalled"); false = resolve with no context up to N
    stall_stop: bool = True
    answer: bool = True  # T²RAG's own answer (Step 3); false = qa_reader answers
    # code (the text after the last "Answer:", else the whole reply; TRAG.py:1117-1119) | reader (K.3's first line)
    answer_parse: T2RAGAnswerParse = T2RAGAnswerParse.code
    # not a READING_KEYS key: it moves no EM/F1, the paper's only numbers, so it never keeps a run from their cells
    # method ranking for Recall@k: code concat (the iteration lists in order, a passage whose text is already listed
    # dropped, TRAG.py:1392-1398) | paper rrf (RRF of the iteration lists, as GEAR's Eq. 9; the prose ranks nothing)
    ranking: T2RAGRanking = T2RAGRanking.concat
    k_rrf: int = num(RRF_K, ge=0)  # RRF constant (DESIGN.md)
    llm_params: dict[str, Any] = field(default_factory=dict)  # extra llm.chat kwargs (temperature 0: the llm group)

    def __post_init__(self) -> None:
        unset = [key for key in READING_KEYS if getattr(self, key) is None or getattr(self, key) == MISSING]
        if unset:  # the presets are where these come from: say so rather than "must be set"
            raise ConfigError(f"agent.{', agent.'.join(unset)} not set: configs/agent/t2rag.yaml gives the code "
                              "reading's values, configs/agent/t2rag_paper.yaml the paper's")
        super().__post_init__()
