"""Settings in one place (issue #43): every ``EVALLOOP_*`` variable evalloop reads is declared in
:class:`evalloop.environ.Environment` and read through it (a command's through its settings,
``settings.env``), never from ``os.environ`` in the module; docs/configuration.md lists every one;
the precedence of a setting is defaults < the project file < the environment < a CLI option."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import evalloop
from evalloop.config import load_settings
from evalloop.environ import PREFIX, Environment, environment, variable
from evalloop.errors import ConfigError

SRC = Path(evalloop.__file__).parent
DOCS = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
HOME = SRC / "environ.py"
KINDS = {"str": "text", "Path": "directory", "int": "integer", "float": "number", "bool": "1/0, true/false"}


def docs_table() -> str:
    """The table of docs/configuration.md's "Environment variables", as the model gives it."""
    rows = ["| variable | type | meaning | set by |", "|---|---|---|---|"]
    for name, field in Environment.model_fields.items():
        extra = field.json_schema_extra
        assert isinstance(extra, dict), name
        if "overrides" in extra:
            meaning, setter = f"overrides the setting `{extra['overrides']}`: {extra['meaning']}", "you"
            kind = "as the setting"
        else:
            meaning, setter = str(extra["meaning"]), str(extra["set_by"])
            (base,) = [t for t in getattr(field.annotation, "__args__", ()) if t is not type(None)]
            kind = KINDS[base.__name__]
        rows.append(f"| `{variable(name)}` | {kind} | {meaning} | {setter} |")
    return "\n".join(rows)


def test_the_docs_list_every_variable():
    assert docs_table() in DOCS.read_text(), "docs/configuration.md's table should read:\n" + docs_table()


def _reads_of_the_environment(path: Path) -> list[str]:
    """``os.environ.get("EVALLOOP_…")``, ``os.environ["EVALLOOP_…"]``, ``"EVALLOOP_…" in
    os.environ``, ``os.getenv("EVALLOOP_…")`` in a module (the name spelt out or a constant)."""
    tree = ast.parse(path.read_text())
    constants = {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.Constant)
                 and isinstance(n.value.value, str)}

    def named(node: ast.AST) -> str | None:
        value = node.value if isinstance(node, ast.Constant) else constants.get(getattr(node, "id", ""))
        return value if isinstance(value, str) and value.startswith(PREFIX) else None

    def is_environ(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "environ"

    def reads(node: ast.AST) -> bool:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            getter = (node.func.attr == "get" and is_environ(node.func.value)) or node.func.attr == "getenv"
            return getter and named(node.args[0]) is not None
        if isinstance(node, ast.Subscript):
            return is_environ(node.value) and named(node.slice) is not None
        if isinstance(node, ast.Compare):
            return named(node.left) is not None and any(is_environ(c) for c in node.comparators)
        return False

    return [f"{path.name}:{getattr(node, 'lineno', 0)}" for node in ast.walk(tree) if reads(node)]


def test_no_module_reads_an_evalloop_variable_from_os_environ():
    reads = [r for path in sorted(SRC.rglob("*.py")) if path != HOME for r in _reads_of_the_environment(path)]
    assert reads == []


def test_every_variable_the_package_names_is_declared():
    named = set()
    for path in SRC.rglob("*.py"):
        named |= set(re.findall(r"\bEVALLOOP_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    declared = {variable(name) for name in Environment.model_fields}
    assert sorted(named - declared) == []


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in Environment.model_fields:
        monkeypatch.delenv(variable(name), raising=False)
    (tmp_path / "proj").mkdir()
    return tmp_path / "proj"


def test_precedence_defaults_file_environment_cli(project, monkeypatch):
    assert load_settings(project).window == 5  # the default
    (project / "pyproject.toml").write_text("[tool.evalloop]\nwindow = 6\n")
    assert load_settings(project).window == 6  # pyproject.toml's table
    (project / "evalloop.toml").write_text("window = 7\nconcurrency = 3\n[verdict]\nalpha = 0.01\n")
    assert load_settings(project).window == 7  # evalloop.toml wins over pyproject.toml
    monkeypatch.setenv("EVALLOOP_WINDOW", "8")
    monkeypatch.setenv("EVALLOOP_VERDICT_RULE", "paired")
    settings = load_settings(project)
    assert (settings.window, settings.concurrency) == (8, 3)  # the environment over the file, key by key
    assert (settings.verdict.rule, settings.verdict.alpha) == ("paired", 0.01)  # merged into [verdict]
    assert load_settings(project, window=9, concurrency=None).window == 9  # a CLI option over all
    assert load_settings(project, concurrency=None).concurrency == 3  # an option not given: no override


def test_a_bad_variable_is_one_line_naming_it(project, monkeypatch):
    monkeypatch.setenv("EVALLOOP_LLM_TIMEOUT", "soon")
    with pytest.raises(ConfigError) as caught:
        load_settings(project)
    line = caught.value.one_line()
    assert "EVALLOOP_LLM_TIMEOUT='soon'" in line and "docs/configuration.md" in line and "\n" not in line
    monkeypatch.setenv("EVALLOOP_LLM_TIMEOUT", "")  # empty: unset
    assert load_settings(project).env.llm_timeout is None
    monkeypatch.setenv("EVALLOOP_WINDOW", "many")  # a setting's variable: reported as that setting
    with pytest.raises(ConfigError, match="setting 'window'"):
        load_settings(project)


def test_a_run_reads_the_environment_its_settings_were_loaded_with(project, monkeypatch):
    """Passed down: the LLM client of a run comes from ``settings.env``, not from whatever the
    process environment says by the time the run starts."""
    from evalloop.llm.openai_client import OpenAICompatClient
    from evalloop.run.services import build_services

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("EVALLOOP_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("EVALLOOP_LLM_MODEL", "m")
    monkeypatch.setenv("EVALLOOP_LLM_TIMEOUT", "7")
    settings = load_settings(project)
    for name in ("EVALLOOP_LLM_BASE_URL", "EVALLOOP_LLM_MODEL", "EVALLOOP_LLM_TIMEOUT"):
        monkeypatch.delenv(name)
    services, _ = build_services(settings, cache="off")
    assert isinstance(services.llm, OpenAICompatClient) and services.llm.model == "m"
    assert environment().llm_base_url is None


def test_the_environment_is_read_again_when_a_variable_changes(monkeypatch):
    monkeypatch.setenv("EVALLOOP_FAULT", "a")
    assert environment().fault == "a"
    monkeypatch.setenv("EVALLOOP_FAULT", "b")
    assert environment().fault == "b"
