"""App. K prompt templates: every prompt renders with its variables; missing/unknown variables fail."""

from __future__ import annotations

import pytest

from gear_repro.prompts import (
    PROMPT_NAMES,
    PromptError,
    format_passages,
    format_triples,
    render,
    template_variables,
)
from gear_repro.types import Passage

VARS = {
    "extraction": {"wiki_title": "Laughter in Hell", "passage": "Laughter in Hell is a 1933 film."},
    "reader": {"docs": "Wikipedia Title: A\nA is B.", "query": "What is A?"},
    "reader_gist": {"docs": "Wikipedia Title: A\nA is B.", "query": "What is A?", "triples": '("A", "is", "B")'},
    "reason": {"query": "What is A?", "triples": '("A", "is", "B")'},
    "rewrite": {"query": "What is A?", "triples": '("A", "is", "B")', "reason": "B is unknown."},
    "qa": {"passages": "Wikipedia Title: A\nA is B.", "question": "What is A?"},
    "qa_no_passages": {"question": "What is A?"},
    "t2rag_decompose": {"query": "What is A?"},
    "t2rag_resolve": {"example_propositions": "- A is B", "query": "What is A?",
                      "searchable": "Searchable Clue 1:\nSubject: A\nPredicate: is\nObject: ?", "fuzzy": "None",
                      "passages_section": "Context Passages:\n- A\nA is B.\n\n", "propositions": "- A is B",
                      "resolved": "None"},
    "t2rag_answer": {"query": "What is A?", "clues": "Clue 1: A | is | B"},
    "t2rag_decompose_code": {"query": "What is A?"},
    "t2rag_resolve_code": {"example_propositions": "- A is B", "query": "What is A?",
                           "traceable": "\nTraceable Clue 1:\nSubject: A\nPredicate: is\nObject: ?\n", "fuzzy": "",
                           "passages_section": "Context Passages:\n        - A\nA is B.\n\n        ",
                           "propositions": "- A is B", "resolved_section": ""},
    "t2rag_resolve_code_resolved": {"resolved": "- A | is | B"},
    "t2rag_decompose_simple": {"query": "What is A?"},
    "hipporag_ner": {"question": "What is A?"},
    "ircot": {"demos": "Wikipedia Title: C\nC is D.\n\nQ: What is C?\nA: D.", "passages": "Wikipedia Title: A\nA is B.",
              "question": "What is A?", "thoughts": "A is B."},
}


def test_every_prompt_has_a_template_and_known_variables() -> None:
    assert set(PROMPT_NAMES) == set(VARS)
    for name in PROMPT_NAMES:
        assert template_variables(name) == set(VARS[name]), name


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_renders_with_its_variables(name: str) -> None:
    msgs = render(name, **VARS[name])
    assert msgs[-1]["role"] == "user"  # App. K prompts are one user turn; HippoRAG NER / IRCoT have more turns
    text = "\n".join(m["content"] for m in msgs)
    for v in VARS[name].values():
        assert v in text
    if name not in ("extraction", "hipporag_ner"):  # K.1 and HippoRAG's NER have literal JSON braces
        assert "{" not in text and "}" not in text


@pytest.mark.parametrize("name", PROMPT_NAMES)
def test_missing_variable_errors(name: str) -> None:
    first = sorted(VARS[name])[0]
    partial = {k: v for k, v in VARS[name].items() if k != first}
    with pytest.raises(PromptError, match=first):
        render(name, **partial)


def test_unknown_variable_and_prompt_error() -> None:
    with pytest.raises(PromptError, match="unexpected"):
        render("qa_no_passages", question="q", passages="p")
    with pytest.raises(PromptError, match="unknown prompt"):
        render("nope")


def test_paper_wording() -> None:
    ext = render("extraction", **VARS["extraction"])[0]["content"]
    assert ext.startswith("# Instruction\n\nYour task is to construct an RDF (Resource Description Framework) graph")
    assert '{"named_entities": ["Michigan State"' in ext  # the paper's {{ }} render as single braces
    assert '("Elden Ring", "screenwriter", "George R. R. Martin"),' in ext
    assert ext.endswith("```\nLaughter in Hell\n\nLaughter in Hell is a 1933 film.\n```")
    reader = render("reader", **VARS["reader"])[0]["content"]
    gist = render("reader_gist", **VARS["reader_gist"])[0]["content"]
    assert "preliminary facts" not in reader and reader.endswith("Question: What is A?\nFacts:")
    assert "Based on these documents and some preliminary facts provided below, find additional supporting" in gist
    assert gist.endswith('Facts: ("A", "is", "B")')
    reason = render("reason", **VARS["reason"])[0]["content"]
    assert "Answerable: Yes\nAnswer: ..." in reason and reason.endswith("# Your reply:")
    rewrite = render("rewrite", **VARS["rewrite"])[0]["content"]
    assert rewrite.endswith("Reason: B is unknown.\n\nNext Question:")
    qa = render("qa", **VARS["qa"])[0]["content"]
    assert "Question: When did the director of film Laughter In Hell die?\nAnswer: August 25, 1963." in qa
    assert qa.endswith("Wikipedia Title: A\nA is B.\n\nQuestion: What is A?\n\nAnswer:")
    qa0 = render("qa_no_passages", **VARS["qa_no_passages"])[0]["content"]
    assert qa0.startswith("Given the following question, please present a concise, definitive answer")
    assert "Wikipedia Title" not in qa0


def test_structured_values_are_formatted() -> None:
    ps = [Passage("1", "Paris", "Paris is in France."), {"title": "Lyon", "text": "Lyon too."}, ("Nice", "Nice too.")]
    assert format_passages(ps) == ("Wikipedia Title: Paris\nParis is in France.\n\nWikipedia Title: Lyon\nLyon too."
                                   "\n\nWikipedia Title: Nice\nNice too.")
    assert format_triples([("a", "b", "c"), ["d", 'say "x"', "f"]]) == '("a", "b", "c"), ("d", "say \'x\'", "f")'
    msg = render("reader_gist", docs=ps[:1], query="q?", triples=[("Paris", "in", "France")])[0]["content"]
    assert "Wikipedia Title: Paris\nParis is in France." in msg and msg.endswith('Facts: ("Paris", "in", "France")')
