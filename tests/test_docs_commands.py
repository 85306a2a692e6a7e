"""The documentation cannot drift from the command line: every ``evalloop`` command in a shell
block (```bash, ```sh, ```console) of README.md and docs/*.md runs, in order, in one scratch
project made by ``evalloop init`` with two runs of its example suite (embedded defaults, no
key, no network).

A command passes when it exits 0 or 1 (1 is a verdict: a regression, a damaged store) without a
traceback; exit 2 (usage, an unknown option, bad input) or anything else fails. In a block, ``cd``
changes the directory for the commands after it (each file starts in the project), ``NAME=value``
before a command sets its environment, and redirections and pipes are left out. ``RUN``,
``RUN_A`` and ``RUN_B`` stand for the newest run, the one before it, and the newest.

A block that needs what a test cannot have (an API key, a server, a file of yours) is marked on
the line before it with ``<!-- docs-test: skip REASON -->``: its commands then run with ``--help``
appended, so their command and option names must still parse.

The commands run in-process (the console script's own ``main``), one project for all of them,
to keep the time to seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from evalloop import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s+(?P<reason>.+?)\s*-->")
PLACEHOLDERS = {"RUN", "RUN_A", "RUN_B"}
REDIRECTS = {">", ">>", "<", "2>", "2>>", "&>"}


@dataclass
class Command:
    where: str                      # file:line
    argv: list[str]                 # after "evalloop"
    env: dict[str, str] = field(default_factory=dict)
    cd: str | None = None           # a `cd` before it in its block, relative to the directory then
    skip: str | None = None         # the reason, for a marked block


def blocks(path: Path) -> list[tuple[int, str, list[str], str | None]]:
    """The shell blocks of a Markdown file: (first line number, language, lines, skip reason)."""
    found, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i, fence.group(2)
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        if lang in SHELLS:
            before = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            reason = SKIP.search(before)
            found.append((start + 2, lang, lines[start + 1:j], reason.group("reason") if reason else None))
        i = j + 1
    return found


def commands(path: Path) -> list[Command]:
    """The evalloop commands of a file's shell blocks, with the `cd`s and environments around them."""
    out: list[Command] = []
    rel = path.relative_to(ROOT)
    for first, lang, lines, skip in blocks(path):
        joined: list[tuple[int, str]] = []
        for n, line in enumerate(lines, first):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
            elif lang == "console":
                if line.startswith("$ "):
                    joined.append((n, line[2:]))
            else:
                joined.append((n, line))
        pending_cd: list[str] = []
        for n, line in joined:
            for segment in _segments(shlex.split(line, comments=True)):
                env = {}
                while segment and re.match(r"^[A-Z_][A-Z0-9_]*=", segment[0]):
                    key, _, value = segment.pop(0).partition("=")
                    env[key] = value
                if not segment:
                    continue
                if segment[0] == "cd":
                    pending_cd.append(segment[1] if len(segment) > 1 else ".")
                elif segment[0] == "evalloop":
                    out.append(Command(f"{rel}:{n}", segment[1:], env, "/".join(pending_cd) or None, skip))
                    pending_cd = []
    return out


def _segments(tokens: list[str]) -> list[list[str]]:
    """Simple commands of a line: split at && || ; |, redirections and their targets dropped."""
    segments: list[list[str]] = [[]]
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif token in ("&&", "||", ";", "|"):
            segments.append([])
        elif token in REDIRECTS:
            skip_next = True
        elif re.match(r"^\d?>>?&?\d*$", token) or re.match(r"^\d?>>?\S+$", token):
            continue  # 2>&1, >file
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def invoke(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Run ``evalloop ARGV`` in-process as the console script does: exit code, stdout, stderr."""
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.update({"NO_COLOR": "1", "COLUMNS": "120", **(env or {})})
    os.environ.pop("EVALLOOP_PROJECT", None)
    sys.argv = ["evalloop", *argv]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
    return code, out.getvalue(), err.getvalue()


def _run_ids(cwd: Path) -> list[str]:
    code, out, err = invoke(["history", "--json", "--limit", "2"], cwd)
    assert code == 0, err
    return [r["id"] for r in json.loads(out)]


def _substitute(argv: list[str], cwd: Path) -> list[str]:
    if not PLACEHOLDERS & set(argv):
        return argv
    ids = _run_ids(cwd)
    assert len(ids) == 2, "a command with RUN_A/RUN_B needs two runs before it in the docs"
    values = {"RUN": ids[0], "RUN_B": ids[0], "RUN_A": ids[1]}
    return [values.get(a, a) for a in argv]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = tmp_path_factory.mktemp("docs")
    code, _, err = invoke(["init", "my-app"], base)
    assert code == 0, err
    for _ in range(2):  # a history to show, compare and report on, whichever page runs first
        code, _, err = invoke(["run", "--suite", "greeting"], base / "my-app")
        assert code == 0, err
    return base / "my-app"


def test_the_docs_show_commands_and_mark_few_skips():
    every = [c for page in PAGES for c in commands(page)]
    assert len(every) >= 40, len(every)
    skipped = [c for c in every if c.skip]
    assert len(skipped) <= 10, [c.where for c in skipped]
    readme = commands(ROOT / "README.md")
    assert readme[0].argv == ["run", "--all"]  # the first command, as CI runs it
    assert any(c.argv[:1] == ["init"] for c in readme)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_shown_runs(project, page):
    failures = []
    cwd = project
    for command in commands(page):
        if command.cd:
            cwd = (cwd / command.cd).resolve()
        argv = [*command.argv, "--help"] if command.skip else _substitute(command.argv, cwd)
        code, out, err = invoke(argv, cwd, command.env if not command.skip else None)
        allowed = {0} if command.skip else {0, 1}
        if code not in allowed or "Traceback" in err:
            failures.append(f"{command.where}: evalloop {shlex.join(argv)} exited {code}: "
                            f"{(err or out).strip()[-600:]}")
    assert not failures, "\n".join(failures)


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing


def test_the_documentation_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


#: dotted names in the docs that are not Python objects: a file, an entry-point group, logger names
NOT_PYTHON = {"evalloop.toml", "evalloop.scorers", "evalloop.scheduler", "evalloop.sinks", "evalloop.locks"}


def _resolve(dotted: str) -> object:
    import importlib

    module_part, _, attr_part = dotted.partition(":")
    parts = module_part.split(".")
    for i in range(len(parts), 0, -1):  # the longest importable prefix, then attributes
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError:
            continue
        for name in [*parts[i:], *([attr_part] if attr_part else [])]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


#: the block after this marker names paths of the past on purpose (a table of what moved where)
OLD_NAMES = re.compile(r"<!--\s*docs-test:\s*old names in the next block\s*-->\n+.*?(?:\n\s*\n|$)", re.S)


def test_python_names_and_files_the_docs_name_exist():
    text = OLD_NAMES.sub("", "\n".join(page.read_text(encoding="utf-8") for page in PAGES))
    names = set(re.findall(r"`(evalloop(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?)", text)) - NOT_PYTHON
    missing = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name}: {exc}")
    files = set(re.findall(r"`((?:bench|tests|tools)/[\w/.-]+\.py)", text))
    missing += [f"{f}: no such file" for f in sorted(files) if not (ROOT / f).is_file()]
    assert not missing, "\n".join(missing)
