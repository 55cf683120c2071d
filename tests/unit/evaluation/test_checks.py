"""The bench test types on hand-made pages: thresholds, order, tables, math, baseline."""

from __future__ import annotations

import pytest

from ocrflow.errors import ConfigError
from ocrflow.evaluation.bench import load_tests, parse_test, pass_rates, run_tests
from ocrflow.evaluation.fuzzy import find_near_matches
from ocrflow.evaluation.mathtex import canonical_tokens, same_formula
from ocrflow.evaluation.tables import parse_tables


def check(page: str, **fields: object) -> bool:
    test = parse_test({"id": "t", "pdf": "a.pdf", "page": 1, **fields})
    return test.check(page)[0]


def test_present_uses_max_diffs_and_case() -> None:
    page = "The quick brown fox jumps over the lazy dog."
    assert check(page, type="present", text="quick brown fox")
    assert not check(page, type="present", text="quick browm fox")
    # As in the reference, a substitution costs two Indel edits in partial_ratio.
    assert not check(page, type="present", text="quick browm fox", max_diffs=1)
    assert check(page, type="present", text="quick browm fox", max_diffs=2)
    assert not check(page, type="present", text="QUICK brown")
    assert check(page, type="present", text="QUICK brown", case_sensitive=False)
    assert check(page, type="absent", text="purple elephant")
    assert not check(page, type="present", text="lazy dog", first_n=20)
    assert check(page, type="present", text="lazy dog", last_n=20)


def test_order_needs_an_earlier_occurrence() -> None:
    page = "First paragraph here.\n\nSecond paragraph there."
    assert check(page, type="order", before="First paragraph", after="Second paragraph")
    assert not check(page, type="order", before="Second paragraph", after="First paragraph")
    assert not check(page, type="order", before="Frist paragraph", after="Second paragraph")
    assert check(page, type="order", before="Frist paragraph", after="Second", max_diffs=2)


def test_near_matches_are_grouped_and_the_closest_kept() -> None:
    matches = find_near_matches("PATTERN", "---PATERN---", 1)
    assert [(m.start, m.end, m.dist) for m in matches] == [(3, 9, 1)]
    assert [m.start for m in find_near_matches("ab", "abxab", 0)] == [0, 3]


PIPE = """
| Item | Qty | Price |
|---|---|---|
| Boxes | 40 | 160.00 |
| Scanning | 2500 | 375.00 |
"""
HTML = """<table><thead><tr><th>Item</th><th colspan="2">Cost</th></tr></thead>
<tr><td rowspan="2">Boxes</td><td>40</td><td>160.00</td></tr>
<tr><td>41</td><td>170.00<br>net</td></tr></table>"""


def test_table_neighbours_in_pipe_tables() -> None:
    assert check(PIPE, type="table", cell="40", right="160.00", left="Boxes", up="Qty")
    assert check(PIPE, type="table", cell="375.00", top_heading="Price", left_heading="Scanning")
    assert not check(PIPE, type="table", cell="40", right="375.00")
    assert not check("no table here", type="table", cell="40")


def test_table_spans_in_html_tables() -> None:
    (table,) = parse_tables(HTML)
    assert check(HTML, type="table", cell="41", left="Boxes", up="40", top_heading="Cost")
    assert check(HTML, type="table", cell="Boxes", right="41")  # a rowspan has two rights
    assert check(HTML, type="table", cell="170.00 net", up="160.00")
    assert not check(HTML, type="table", cell="Boxes", ignore_markdown_tables=True, right="x")
    assert len(table.cells) == 7


def test_math_compares_canonical_tokens() -> None:
    page = r"Text $$\dfrac{a}{b} + x^{2} \leq \alpha'$$ and \(y_1\)."
    assert check(page, type="math", math=r"\frac{a}{b}+x^2\le\alpha^{\prime}")
    assert check(page, type="math", math="y_{1}")
    assert not check(page, type="math", math=r"\frac{b}{a}")
    assert check(page, type="math", math="y_1", ignore_dollar_delimited=True)
    assert not check(page, type="math", math=r"\frac{a}{b}", ignore_dollar_delimited=True)
    assert canonical_tokens(r"\left( \mathcal{I} \right)") == ["(", "I", ")"]
    assert same_formula(r"\alpha", "α") and not same_formula("", "x")


def test_baseline() -> None:
    assert check("Some text.", type="baseline")
    assert not check("   ", type="baseline")
    assert not check("text " + "ab" * 40, type="baseline")
    assert not check("Text with 漢字", type="baseline")
    assert check("Text with 漢字", type="baseline", check_disallowed_characters=False)
    assert check(
        "![image](x.png) 12", type="baseline", max_length=5, max_length_skips_image_alt_tags=True
    )
    assert not check("a long page of text", type="baseline", max_length=5)


def test_load_and_rates(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"pdf": "a.pdf", "page": 1, "id": "1", "type": "present", "text": "hello"}\n\n'
        '{"pdf": "a.pdf", "page": 2, "id": "2", "type": "absent", "text": "bye", "url": "x"}\n'
    )
    tests = load_tests(path)
    results = run_tests(tests, {("a.pdf", 1): "hello world"})
    assert [(r.passed, r.explanation) for r in results] == [(True, ""), (False, "missing page")]
    rates = pass_rates(results)
    assert (rates["overall"].passed, rates["overall"].total) == (1, 2)
    assert list(rates) == ["present", "absent", "overall"]


@pytest.mark.parametrize(
    "line",
    [
        '{"pdf": "a.pdf", "page": 1, "id": "1", "type": "bogus"}',
        '{"pdf": "a.pdf", "page": 1, "id": "1", "type": "present", "text": " "}',
        '{"pdf": "a.pdf", "page": 1, "id": "1", "type": "order", "before": "ab", "after": "cd",'
        ' "max_diffs": 2}',
        '{"pdf": "a.pdf", "page": 1, "id": "1", "type": "present", "text": "x", "max_diffs": -1}',
        "not json",
    ],
)
def test_bad_tests_name_their_line(tmp_path, line: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"pdf": "a.pdf", "page": 1, "id": "0", "type": "baseline"}\n' + line + "\n")
    with pytest.raises(ConfigError, match=":2:"):
        load_tests(path)
