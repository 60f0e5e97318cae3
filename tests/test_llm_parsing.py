"""Forgiving reply parsers: fences, tuples vs JSON, partial JSON, garbage, wrong arity; never raise."""

from __future__ import annotations

import pytest

from gear_repro.llm.parsing import (
    parse_extraction,
    parse_named_entities,
    parse_reason,
    parse_rewrite,
    parse_triples,
)

K1_DEMO_STYLE = '''{"named_entities": ["Magic Johnson", "Michigan State", "1979"]}
{
"triples": [
("Magic Johnson", "member of sports team", "Michigan State"),
("Michigan State", "award date", "1979"),
]
}'''


def test_k1_demo_style_is_not_a_repair() -> None:
    ents, p = parse_extraction(K1_DEMO_STYLE)
    assert ents == ["Magic Johnson", "Michigan State", "1979"]
    assert p.triples == [("Magic Johnson", "member of sports team", "Michigan State"),
                         ("Michigan State", "award date", "1979")]
    assert (p.repaired, p.dropped, p.failed, p.error) == (False, 0, False, None)


def test_code_fence_with_language_and_chatter() -> None:
    text = "Here is the JSON:\n```json\n" + K1_DEMO_STYLE + "\n```\nLet me know if you need more."
    ents, p = parse_extraction(text)
    assert len(p.triples) == 2 and len(ents) == 3 and not p.failed


def test_reader_facts_line_with_tuples() -> None:
    p = parse_triples('Facts: ("Neville A. Stanton", "employer", "University of Southampton"), '
                      '("University of Southampton", "founded in", "1862")')
    assert p.triples == [("Neville A. Stanton", "employer", "University of Southampton"),
                         ("University of Southampton", "founded in", "1862")]
    assert not p.repaired and not p.failed


def test_json_lists_and_dict_triples() -> None:
    assert parse_triples('[["a", "b", "c"], ["d", "e", "f"]]').triples == [("a", "b", "c"), ("d", "e", "f")]
    p = parse_triples('{"triples": [{"subject": "a", "predicate": "b", "object": "c"}]}')
    assert p.triples == [("a", "b", "c")]


def test_parentheses_inside_strings_are_kept() -> None:
    p = parse_triples('[("Laughter in Hell (film)", "directed by", "Edward L. Cahn")]')
    assert p.triples == [("Laughter in Hell (film)", "directed by", "Edward L. Cahn")]


def test_single_quoted_python_tuples_are_repaired() -> None:
    p = parse_triples("[('Paris', 'capital of', 'France'), ('O\\'Brien', 'plays', 'engineer')]")
    assert p.triples == [("Paris", "capital of", "France"), ("O'Brien", "plays", "engineer")]
    assert p.repaired and not p.failed


def test_partial_json_cut_mid_triple() -> None:
    text = '{"named_entities": ["A", "B"]}\n{"triples": [["A", "knows", "B"], ["B", "born in", "19'
    ents, p = parse_extraction(text)
    assert ents == ["A", "B"]
    assert p.triples[0] == ("A", "knows", "B")
    assert p.repaired and not p.failed
    assert len(p.triples) + p.dropped == 2


def test_trailing_garbage_after_json() -> None:
    p = parse_triples('[["a", "b", "c"]] <|im_end|> assistant: more text {')
    assert p.triples == [("a", "b", "c")] and p.repaired and not p.failed


def test_wrong_arity_and_bad_items_dropped_and_counted() -> None:
    p = parse_triples('{"triples": [["a", "b", "c"], ["a", "b"], ["a", "b", "c", "d"], ["x", "", "y"], '
                      '["x", null, "y"], ["x", ["nested"], "y"], "just text", ["e", 1979, "f"]]}')
    assert p.triples == [("a", "b", "c"), ("e", "1979", "f")]
    assert p.dropped == 6 and not p.failed


def test_a_reply_of_only_wrong_shape_items_is_a_failure() -> None:
    """2-tuples throughout (a common small-model format) read nothing: counted as a failed reply, not "no facts"
   ; a NER list of lists is repaired, one of non-names fails, a bool is never a name."""
    p = parse_triples('Facts: ("Stanley Hall", "Boston"), ("Boston", "Massachusetts")')
    assert p.failed and p.dropped == 2 and "none of the 2 items" in p.error
    nested = parse_named_entities('{"named_entities": [["Stanley Hall"], ["Boston"]]}')
    assert nested.entities == ["Stanley Hall", "Boston"] and nested.repaired and not nested.failed
    bad = parse_named_entities('{"named_entities": [true, {"a": 1}]}')
    assert bad.failed and bad.entities == [] and "none of the 2 named_entities items" in bad.error
    assert parse_named_entities('{"named_entities": ["Boston", true]}').entities == ["Boston"]
    assert not parse_named_entities('{"named_entities": []}').failed  # a question without names: no failure


def test_duplicates_and_whitespace_squeezed() -> None:
    p = parse_triples('[["a  b", " c", "d\\n"], ["a b", "c", "d"]]')
    assert p.triples == [("a b", "c", "d")] and p.dropped == 0


def test_empty_triples_is_not_a_failure() -> None:
    ents, p = parse_extraction('{"named_entities": []}\n{"triples": []}')
    assert ents == [] and p.triples == [] and not p.failed


@pytest.mark.parametrize("text", ["", "   ", None, "I cannot find any facts in these documents.",
                                  "```\n```", '{"name": "x", "authors": [{"id": 1}]}', "}}}]]])))", "(((", "\x00\xff"])
def test_garbage_fails_softly(text: str | None) -> None:
    p = parse_triples(text)
    assert p.failed and p.triples == [] and p.error
    ents, p2 = parse_extraction(text)
    assert p2.failed and ents == []


def test_bare_single_triple() -> None:
    assert parse_triples('("Paris", "capital of", "France")').triples == [("Paris", "capital of", "France")]


@pytest.mark.parametrize("text,expected", [
    ("Answerable: Yes\nAnswer: 1862", (True, "1862", True)),
    ("Answerable: No\nWhy: The facts do not say who founded it.", (False, "The facts do not say who founded it.", True)),
    ("**Answerable:** yes\n**Answer:** August 25, 1963", (True, "August 25, 1963", True)),
    ("answerable: NO\nwhy: missing hop\nsecond line", (False, "missing hop\nsecond line", True)),
    ("Answerable: Yes", (True, "", True)),
    ("I think the answer is Paris.", (None, "I think the answer is Paris.", False)),
    ("", (None, "", False)),
])
def test_parse_reason(text: str, expected: tuple) -> None:
    assert parse_reason(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("Next Question: What region of Jakarta contains SMA Negeri 68?", ("What region of Jakarta contains SMA Negeri 68?", True)),
    ("Reason: x\nNext Question:\n\"Who founded the University of Southampton?\"\nextra", ("Who founded the University of Southampton?", True)),
    ("Who directed Laughter in Hell?", ("Who directed Laughter in Hell?", True)),
    ("", ("", False)),
    ("Next Question:   ", ("", False)),
])
def test_parse_rewrite(text: str, expected: tuple) -> None:
    assert parse_rewrite(text) == expected
