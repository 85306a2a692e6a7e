"""Loading and validating suite files: every bad input is one FixtureError naming where."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalloop.errors import FixtureError
from evalloop.suites.lookup import discover_suites, find_suite
from evalloop.suites.models import load_suite

GOOD = """\
name: demo
target: sut:echo
scorers:
  - equals
  - name: regex
    params: {pattern: "^a"}
    threshold: 0.2
cases:
  - id: a
    input: x
    expected: x
  - id: b
    input: y
    expected: y
    tags: "one, two"
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_loads_a_good_yaml_suite(tmp_path):
    suite = load_suite(write(tmp_path, "demo.yaml", GOOD))
    assert suite.name == "demo"
    assert suite.target.ref == "sut:echo"
    assert [s.name for s in suite.scorers] == ["equals", "regex"]
    assert suite.scorers[1].params == {"pattern": "^a"} and suite.scorers[1].threshold == 0.2
    cases = list(suite.iter_cases())
    assert [c.id for c in cases] == ["a", "b"]
    assert cases[1].tags == ["one", "two"]
    assert suite.validate_cases() == 2


def test_malformed_yaml_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.yaml", "name: x\ncases:\n  - id: a\n   input: [1, 2\n")
    with pytest.raises(FixtureError) as err:
        load_suite(path)
    line = err.value.one_line()
    assert str(path) in line and "invalid YAML" in line
    assert ":4" in line or ":5" in line


def test_malformed_json_names_line(tmp_path):
    path = write(tmp_path, "bad.json", '{"name": "x",\n "cases": [\n}')
    with pytest.raises(FixtureError, match=r"bad\.json:3: invalid JSON"):
        load_suite(path)


def test_missing_case_field_names_the_case_line(tmp_path):
    text = GOOD.replace("  - id: b\n    input: y\n", "  - id: b\n")
    path = write(tmp_path, "missing.yaml", text)
    with pytest.raises(FixtureError) as err:
        load_suite(path)
    msg = err.value.one_line()
    assert f"{path}:12" in msg and "case 'b'" in msg and "input" in msg and "required" in msg


def test_duplicate_ids_are_an_error_with_line(tmp_path):
    path = write(tmp_path, "dup.yaml", GOOD.replace("id: b", "id: a"))
    with pytest.raises(FixtureError, match=r"dup\.yaml:12: duplicate case id 'a'"):
        load_suite(path)


def test_unknown_suite_field_and_missing_scorers(tmp_path):
    with pytest.raises(FixtureError, match=r"scorerz: unknown field — did you mean 'scorers'\? \(\+1 more\)"):
        load_suite(write(tmp_path, "u.yaml", GOOD.replace("scorers:", "scorerz:")))
    text = "name: x\ntarget: sut:echo\nscorers: []\ncases: [{id: a, input: 1}]\n"
    with pytest.raises(FixtureError, match="scorers"):
        load_suite(write(tmp_path, "s.yaml", text))


def test_jsonl_cases_are_streamed_and_validated(tmp_path):
    lines = [json.dumps({"id": i, "input": i, "expected": i}) for i in range(5)]
    write(tmp_path, "cases.jsonl", "\n".join(lines) + "\n")
    suite = load_suite(write(tmp_path, "big.yaml",
                             "name: big\ntarget: sut:echo\nscorers: [equals]\ncases: cases.jsonl\n"))
    assert suite.validate_cases() == 5
    assert [c.id for c in suite.iter_cases()] == ["0", "1", "2", "3", "4"]
    write(tmp_path, "cases.jsonl", "\n".join(lines + [lines[2]]) + "\n")
    with pytest.raises(FixtureError, match=r"cases\.jsonl:6: duplicate case id '2'"):
        suite.validate_cases()
    write(tmp_path, "cases.jsonl", lines[0] + "\n{not json\n")
    with pytest.raises(FixtureError, match=r"cases\.jsonl:2: invalid JSON"):
        suite.validate_cases()
    write(tmp_path, "cases.jsonl", lines[0] + '\n{"id": "x"}\n')
    with pytest.raises(FixtureError, match=r"cases\.jsonl:2 \(case 'x'\): input: required"):
        suite.validate_cases()


def test_missing_jsonl_file(tmp_path):
    suite = load_suite(write(tmp_path, "m.yaml",
                             "name: m\ntarget: sut:echo\nscorers: [equals]\ncases: nope.jsonl\n"))
    with pytest.raises(FixtureError, match="cannot open cases file"):
        suite.validate_cases()


def test_project_suites_shadow_shipped_ones(tmp_path):
    (tmp_path / "fixtures").mkdir()
    shipped = discover_suites(tmp_path)
    assert "exact-match" in shipped
    write(tmp_path / "fixtures", "mine.yaml", GOOD.replace("name: demo", "name: exact-match"))
    assert discover_suites(tmp_path)["exact-match"].parent == tmp_path / "fixtures"
    with pytest.raises(FixtureError, match="unknown suite 'exact-mach'.*did you mean 'exact-match'"):
        find_suite("exact-mach", tmp_path)


def test_negative_control_per_scorer(tmp_path):
    text = GOOD.replace("    expected: y\n", "    expected: y\n    expect: {regex: fail}\n")
    case = list(load_suite(write(tmp_path, "n.yaml", text)).iter_cases())[1]
    assert case.expects_fail("regex") and not case.expects_fail("equals")


TRICKY_LINES = [
    '{"id": "a", "input": 1, "expected": [1, {"b": null}]}',  # the plain shape
    '   {"id": "a", "input": 1}   ',  # whitespace around the value
    '{"id": 7, "input": 1}',  # an integer id becomes text
    '{"id": "a", "input": NaN}',
    '{"id": "  ", "input": 1}',
    '{"id": true, "input": 1}',
    '{"id": "a"}',
    '{"id": "a", "input": 1, "colour": 2}',
    '{"id": "a", "input": 1, "tags": "x, y", "expect": "fail"}',
    '{"id": "a", "input": 1, "expect": "maybe"}',
    '{"id": "a", "input": 1} trailing',
    '{"id": "a", "input": 1}\u00a0',  # JSON allows no other whitespace after a value
    '\u00a0',
    '\ufeff{"id": "a", "input": 1}',
    '[{"id": "a", "input": 1}]',
    '"a"',
    '{"id": "a", "input": 1',
    '{"id": "a", "input": "\\ud800"}',  # a lone surrogate: Python's JSON takes it, pydantic-core not
    '{"id": "a", "input": "x\ty"}',  # a raw control character in a string
    '{"id": "a", "input": 1e400}',
    '{"id": "a", "input": 1, "input": 2}',  # the last of a repeated key
]


def _reference(line: str) -> tuple[str | None, str | None]:
    """What the full path says of one line (with its newline, as read): (case id, error), from
    json.loads and then the model."""
    from evalloop.suites.casesource import read_case

    try:
        data = json.loads(line + "\n")
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    try:
        return read_case(data, "here").id, None
    except FixtureError as exc:
        return None, exc.what


@pytest.mark.parametrize("line", TRICKY_LINES)
def test_a_jsonl_case_is_checked_the_same_on_the_fast_path(tmp_path, line):
    write(tmp_path, "cases.jsonl", '{"id": "first", "input": 0}\n\n  \n' + line + "\n")
    suite = load_suite(write(tmp_path, "t.yaml", "name: t\ntarget: sut:echo\nscorers: [equals]\ncases: cases.jsonl\n"))
    case_id, error = _reference(line)
    for check in (suite._validate_cases, lambda: [c.id for c in suite.iter_cases()]):
        try:
            got = check()
        except FixtureError as exc:
            assert exc.where.startswith(f"{tmp_path / 'cases.jsonl'}:4"), exc.where
            assert exc.what == error
        else:
            assert error is None, f"accepted: {line!r}"
            assert got in (2, ["first", case_id])


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                     max_leaves=6)
_FIELDS = st.sampled_from(["id", "input", "expected", "tags", "metadata", "expect", "colour"])
_VALUES = _JSON | st.sampled_from(["pass", "fail", "  ", "a, b", {"equals": "fail"}])


@st.composite
def _lines(draw: st.DrawFn) -> str:
    """A JSONL line that is often a valid case and often not: any JSON object of case-like keys,
    written with Python's JSON (NaN, lone surrogates), perhaps cut short or with something after."""
    value = draw(st.dictionaries(_FIELDS, _VALUES, max_size=6) | _JSON)
    line = json.dumps(value, ensure_ascii=draw(st.booleans()))
    cut = draw(st.sampled_from(["", "cut", "after", "space"]))
    if cut == "cut" and len(line) > 1:
        line = line[:draw(st.integers(1, len(line) - 1))]
    return line + {"after": " x", "space": "  "}.get(cut, "")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=_lines())
def test_pydantic_core_reads_any_line_as_the_reference_does(tmp_path, line):
    """The reader's one-call path (pydantic-core) and its slow path together accept what
    ``json.loads`` and the model accept, with the same case, and refuse the rest with the same
    message."""
    from evalloop.suites.casesource import jsonl_cases, read_case

    path = tmp_path / "cases.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    try:
        expected = read_case(json.loads(line), "here").model_dump()
    except (json.JSONDecodeError, FixtureError):
        expected = None
    if not line.strip():
        return
    try:
        got = [case.model_dump() for _, case in jsonl_cases(path)]
    except FixtureError as exc:
        assert expected is None, f"refused {line!r}: {exc.what}"
        assert exc.what == _reference(line)[1]
    else:
        assert expected is not None, f"accepted {line!r}"
        assert json.dumps(got) == json.dumps([expected])  # NaN == NaN as text


def test_a_small_jsonl_file_is_parsed_once_and_read_again_when_it_changes(tmp_path, monkeypatch):
    """The check keeps a small file's parsed lines for the run (one parse, not two); a file changed
    since the check is read again, so the run never runs cases the check did not see."""
    from evalloop.suites import casesource
    from evalloop.suites import suite as suite_module

    lines = [json.dumps({"id": f"c{i}", "input": i, "expected": i}) for i in range(3)]
    write(tmp_path, "cases.jsonl", "\n".join(lines) + "\n")
    suite = load_suite(write(tmp_path, "s.yaml", "name: s\ntarget: sut:echo\nscorers: [equals]\ncases: cases.jsonl\n"))
    assert suite.validate_cases() == 3
    real = casesource.open_jsonl

    def read_again(path):
        raise AssertionError("read again")

    monkeypatch.setattr(casesource, "open_jsonl", read_again)
    assert [c.id for c in suite.iter_cases()] == ["c0", "c1", "c2"]  # from the check's parse
    monkeypatch.setattr(casesource, "open_jsonl", real)
    write(tmp_path, "cases.jsonl", "\n".join(lines[:2] + [json.dumps({"id": "new", "input": 9})]) + "\n")
    assert [c.id for c in suite.iter_cases()] == ["c0", "c1", "new"]  # changed since: read again
    monkeypatch.setattr(suite_module, "KEEP_PARSED_BYTES", 10)  # a larger file streams, as before
    big = load_suite(tmp_path / "s.yaml")
    assert big.validate_cases() == 3 and big._checked is not None and big._checked[2] is None


BOMB = """\
name: bomb
target: sut:echo
scorers: [equals]
cases:
  - id: a
    input:
      a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
    expected: x
"""


def test_a_yaml_alias_bomb_is_refused_with_file_and_line(tmp_path):
    """#40 item 6: a 600-byte alias bomb was accepted, and `run` grew to gigabytes expanding it."""
    path = write(tmp_path, "bomb.yaml", BOMB)
    with pytest.raises(FixtureError) as err:
        load_suite(path)
    line = err.value.one_line()
    assert f"{path}:8" in line and "alias" in line and "\n" not in line


def test_a_yaml_merge_key_is_an_alias_too(tmp_path):
    text = GOOD.replace("  - id: b\n", "  - &base\n    id: b0\n    input: z\n  - <<: *base\n    id: b\n")
    with pytest.raises(FixtureError, match="alias"):
        load_suite(write(tmp_path, "merge.yaml", text))
