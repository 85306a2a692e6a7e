"""The one-pass YAML loader of suite files (evalloop.suites.yamlload) gives exactly what
``yaml.load`` with the safe loader gives, for plain data and for what it leaves to yaml.load."""

from __future__ import annotations

import copy
import datetime as dt
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evalloop.errors import FixtureError
from evalloop.suites.yamlhead import YAML_LOADER
from evalloop.suites.yamlload import load_yaml

HERE = Path("suite.yaml")

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False), st.text(max_size=12),
                    st.sampled_from(["yes", "No", "~", "null", "1e3", "0x1F", "0o17", "1_000", ".inf", "-.Inf",
                                     ".nan", "2024-01-02", "2024-01-02 03:04:05", "12:30:00", "<<", "=", "'", "",
                                     "- a", "a: b", "#x", "1:20"]))
data = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.text(max_size=6), st.integers(), st.booleans()),
                                                 inner, max_size=4)), max_leaves=25)


def _same(text: str) -> None:
    expected = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    got, _ = load_yaml(text, HERE)
    assert repr(got) == repr(expected)  # repr: nan == nan, 1 vs True vs 1.0 told apart


@settings(max_examples=300, deadline=None)
@given(data, st.sampled_from([None, False, True]))
def test_plain_data_loads_as_yaml_load_gives_it(value, flow):
    doc = {"name": "s", "cases": [value], "x": copy.deepcopy(value)}  # a copy: no alias written
    _same(yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True))


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1, 2.5, true, null, ~, 2024-01-02, '2024-01-02', \"x\"]\n",
    "a: 2001-12-14t21:59:43.10-05:00\nb: 0x1f\nc: 0b101\nd: +12\ne: 1_000\nf: .NaN\n",
    "merge:\n  <<: {a: 1}\n  b: 2\n",  # a merge key (no alias): yaml.load's merge
    "a: !!str 12\nb: !!binary aGVsbG8=\nc: !!set {x, y}\n",  # explicit tags
    "? [1, 2]\n: pair\n",  # a list as a key: yaml.load refuses it, and so does this
    "'<<': quoted\n'=': eq\n",  # quoted: plain keys
    "= : x\n",
    "", "# only a comment\n", "just a string\n", "- 1\n- two\n",
    "a: &anchor 1\nb: 2\n",  # an anchor nobody refers to
    "null: 1\n~: 2\ntrue: 3\n3: 4\n",
    "a: 1\na: 2\n",  # the last of a repeated key
])
def test_edge_cases_load_as_yaml_load_gives_them(text):
    try:
        expected: object = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        with pytest.raises(type(exc)):
            load_yaml(text, HERE)
        return
    got, _ = load_yaml(text, HERE)
    assert repr(got) == repr(expected)


def test_a_second_document_and_a_syntax_error_are_yaml_loads_errors():
    with pytest.raises(yaml.YAMLError, match="single document"):
        load_yaml("a: 1\n---\nb: 2\n", HERE)
    with pytest.raises(yaml.YAMLError) as caught:
        load_yaml("a: 1\nb: [1, 2\nc: 3\n", HERE)
    assert caught.value.problem_mark is not None  # type: ignore[attr-defined]


def test_the_lines_of_the_cases_and_an_alias_refused_where_it_is():
    text = ("name: s\nscorers: [x]\ncases:\n- id: a\n  input: 1\n-   id: b\n    input: {k: [1, 2]}\n"
            "- {id: c, input: 3}\nafter: 1\n")
    data, lines = load_yaml(text, HERE)
    assert [c["id"] for c in data["cases"]] == ["a", "b", "c"] and lines == [4, 6, 8]
    tagged = text.replace("input: 1", "input: !!str 1")  # left to yaml.load: the lines still found
    data, lines = load_yaml(tagged, HERE)
    assert data["cases"][0]["input"] == "1" and lines == [4, 6, 8]
    with pytest.raises(FixtureError, match=r"alias '\*x'") as caught:
        load_yaml("a: &x [1]\ncases:\n- id: a\n  input: *x\n", HERE)
    assert caught.value.where == "suite.yaml:4"


def test_a_timestamp_is_what_yaml_load_makes():
    got, _ = load_yaml("a: 2024-01-02\nb: 2024-01-02 03:04:05\n", HERE)
    assert got == {"a": dt.date(2024, 1, 2), "b": dt.datetime(2024, 1, 2, 3, 4, 5)}
