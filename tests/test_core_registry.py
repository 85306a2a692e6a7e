"""The scorer registry: decorator, discovery of built-ins, project files and entry points."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from evalloop import Score, scorer
from evalloop.errors import ScorerError
from evalloop.scoring.registry import Registry, discover


def test_decorator_records_kind_threshold_and_params():
    @scorer("my-scorer", kind="llm_judge", threshold=0.3)
    def graded(input, output, expected, rubric: str, strict: bool = False, ctx=None):
        """Grades by rubric."""
        return Score(value=1.0)

    spec = graded.__evalloop_scorer__
    assert spec.kind.value == "llm_judge" and spec.effective_threshold == 0.3
    assert spec.params == ("rubric", "strict") and spec.required_params == ("rubric",)
    assert spec.wants_ctx and spec.description == "Grades by rubric."
    with pytest.raises(ScorerError, match="no parameter 'rubrik'.*its parameters are: rubric, strict"):
        spec.check_params({"rubrik": "x"}, where="s.yaml")
    with pytest.raises(ScorerError, match="needs parameter 'rubric'"):
        spec.check_params({}, where="s.yaml")


def test_bad_decorations():
    with pytest.raises(ScorerError, match="unknown scorer kind 'vibes'"):
        scorer("x", kind="vibes")
    with pytest.raises(ScorerError, match="first three parameters"):
        scorer("x")(lambda output: 1.0)


def test_builtins_are_discovered_with_kind_defaults():
    registry = discover()
    for name in ("exact-match-noop", "no-placeholder", "required-fields", "equals", "contains",
                 "regex", "json-valid", "keywords"):
        spec = registry.get(name)
        assert spec.kind.value == "heuristic" and spec.effective_threshold == 0.10
        assert spec.source.startswith("builtin")
    with pytest.raises(ScorerError, match="unknown scorer 'equal'.*did you mean 'equals'"):
        registry.get("equal", where="suite.yaml")


def test_project_scorers_are_discovered_and_clashes_name_both(tmp_path):
    (tmp_path / "scorers").mkdir()
    (tmp_path / "scorers" / "a.py").write_text(textwrap.dedent('''
        from evalloop import scorer
        @scorer("shout")
        def shout(input, output, expected):
            return float(str(output).isupper())
    '''))
    registry = discover(tmp_path)
    assert registry.get("shout").source.endswith("a.py")
    (tmp_path / "scorers" / "b.py").write_text(textwrap.dedent('''
        from evalloop import scorer
        @scorer("shout")
        def shout_again(input, output, expected):
            return 1.0
    '''))
    with pytest.raises(ScorerError) as err:
        discover(tmp_path)
    assert "a.py" in str(err.value) and "b.py" in str(err.value)
    (tmp_path / "scorers" / "b.py").write_text(textwrap.dedent('''
        from evalloop import scorer
        @scorer("equals")
        def mine(input, output, expected):
            return 1.0
    '''))
    with pytest.raises(ScorerError, match=r"'equals' is registered twice: by builtin.*b\.py"):
        discover(tmp_path)


def test_broken_project_scorer_file_is_one_line(tmp_path):
    (tmp_path / "scorers").mkdir()
    (tmp_path / "scorers" / "oops.py").write_text("import nothing_here_at_all\n")
    with pytest.raises(ScorerError, match=r"oops\.py: cannot import scorer file: ModuleNotFoundError"):
        discover(tmp_path)


def test_entry_point_scorers_are_discovered(tmp_path, monkeypatch):
    dist = tmp_path / "evalloop_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evalloop-plugin-demo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evalloop.scorers]\ndemo = plugin_demo_scorers\n")
    (tmp_path / "plugin_demo_scorers.py").write_text(textwrap.dedent('''
        from evalloop import scorer
        @scorer("plugin-length", kind="heuristic")
        def plugin_length(input, output, expected):
            """Short outputs pass."""
            return float(len(str(output)) < 10)
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = discover()
    spec = registry.get("plugin-length")
    assert spec.source.startswith("entry point demo")
    assert spec.fn(None, "short", None) == 1.0


def test_a_package_installed_after_a_run_is_discovered_by_the_next(tmp_path, monkeypatch):
    """The entry-point scan is kept between runs of one process, until a sys.path folder changes."""
    import os

    os.utime(tmp_path, (0, 0))  # a site folder last changed long ago
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ScorerError, match="unknown scorer|plugin-late"):
        discover().get("plugin-late")
    assert discover().get("equals")  # scanned again or not, the built-ins stay
    (tmp_path / "plugin_late_scorers.py").write_text(
        "from evalloop import scorer\n\n@scorer('plugin-late')\ndef late(input, output, expected):\n    return 1.0\n")
    dist = tmp_path / "evalloop_plugin_late-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: evalloop-plugin-late\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[evalloop.scorers]\nlate = plugin_late_scorers\n")
    assert discover().get("plugin-late").source.startswith("entry point late")


def test_plain_function_and_module_registration():
    registry = Registry()
    module = types.ModuleType("m")

    @scorer("one")
    def one(input, output, expected):
        return 1.0

    module.one = one
    module.alias = one  # the same function twice is not a clash
    assert registry.add_module(module) == 2
    assert len(registry) == 1
    sys.modules.pop("m", None)
