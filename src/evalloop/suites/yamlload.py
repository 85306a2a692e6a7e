"""Loading a YAML suite file in one pass over libyaml's events: the data, the line of each case,
and aliases refused before anything expands.

``yaml.load`` composes a node tree in C and then constructs every value through PyYAML's Python
constructor, node by node: a 10k-case suite takes about 0.6 s, five times what libyaml's events
alone take. A suite file is plain data — mappings, lists and untagged scalars — so the values are
built here straight from the events, each scalar resolved by PyYAML's own resolver and built by
its own constructor for that tag. Anything beyond plain data (an explicit tag, a ``<<`` merge, a
mapping or list used as a key, a second document, a tag this module does not build) is left to
``yaml.load`` with the same safe loader, so the result is always what ``yaml.load`` gives; the
same pass still finds the cases' lines and refuses aliases.

An alias (``*name``, a ``<<:`` merge of one) is refused: nine nested aliases in a few hundred
bytes expand to billions of values wherever a case is copied or serialised.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from evalloop.errors import FixtureError
from evalloop.suites.yamlhead import YAML_LOADER

__all__ = ["load_yaml"]

_T = "tag:yaml.org,2002:"
_STR = _T + "str"
#: the tags of plain data this module builds (any other goes to yaml.load)
_BUILT = frozenset(_T + name for name in ("str", "int", "float", "bool", "null", "timestamp"))
_RESOLVER = Resolver()
#: the first characters of the plain scalars an implicit tag may match (any other is a string)
_FIRST = frozenset(Resolver.yaml_implicit_resolvers)
_CONSTRUCTOR = SafeConstructor()
_KEY = object()  # a mapping waiting for its next key
_LIST = object()  # a list (its items have no key)


class _NotPlain(Exception):
    """The document is more than plain data: yaml.load builds it."""


def _scalar(ev: yaml.ScalarEvent) -> Any:
    """A scalar's value, resolved and built as PyYAML's safe loader would."""
    tag = ev.tag
    if tag is not None and tag != "!":
        raise _NotPlain
    if not ev.implicit[0]:  # quoted (or ``!``): a string
        return ev.value
    tag = _RESOLVER.resolve(ScalarNode, ev.value, ev.implicit)
    if tag == _STR:
        return ev.value
    if tag not in _BUILT:
        raise _NotPlain
    node = ScalarNode(tag, ev.value, None, None, ev.style)  # resolved: its constructor cannot fail
    return SafeConstructor.yaml_constructors[tag](_CONSTRUCTOR, node)


def _alias(ev: yaml.AliasEvent, path: Path) -> FixtureError:
    line = ev.start_mark.line + 1 if ev.start_mark is not None else None
    return FixtureError(f"YAML alias '*{ev.anchor}' is not allowed in a suite file",
                        where=f"{path}:{line}" if line else str(path),
                        hint="write the value out in full (anchors and aliases can expand "
                             "a small file into gigabytes)")


def load_yaml(text: str, path: Path) -> tuple[Any, list[int]]:
    """The YAML document in ``text`` (as ``yaml.load`` with the safe loader gives it) and the
    1-based line of each item of its root ``cases:`` list (empty when the root is not a mapping).
    Raises ``yaml.YAMLError`` for a syntax error and :class:`FixtureError` for an alias."""
    lines: list[int] = []
    stack: list[Any] = []  # the open mappings and lists
    keys: list[Any] = []  # per open container: a mapping's pending key (_KEY: none yet; _LIST: a list)
    root_key: str | None = None  # the root mapping's key being read, as written
    in_cases = False  # inside the root mapping's cases list
    building, root, documents = True, None, 0
    for ev in yaml.parse(text, Loader=YAML_LOADER):
        if isinstance(ev, yaml.ScalarEvent | yaml.CollectionStartEvent):  # most events: tested first
            assert ev.start_mark is not None  # the parser marks every event it makes
            if in_cases and len(stack) == 2:
                lines.append(ev.start_mark.line + 1)
            if len(stack) == 1:  # a key or a value of the root mapping
                if keys[0] is _KEY:
                    root_key = ev.value if isinstance(ev, yaml.ScalarEvent) else None
                else:
                    in_cases = root_key == "cases" and isinstance(ev, yaml.SequenceStartEvent)
            if isinstance(ev, yaml.ScalarEvent):
                value = None
                if building:
                    written = ev.value
                    if ev.tag is None and ev.implicit[0] and written and written[0] not in _FIRST:
                        value = written  # plain, and no implicit tag starts so: a string (as resolve says)
                    else:
                        try:
                            value = _scalar(ev)
                        except _NotPlain:
                            building = False
            else:
                if ev.tag is not None or (stack and keys[-1] is _KEY):  # tagged, or a complex key
                    building = False
                mapping = isinstance(ev, yaml.MappingStartEvent)
                stack.append({} if mapping else [])
                keys.append(_KEY if mapping else _LIST)
                continue
        elif isinstance(ev, yaml.CollectionEndEvent):
            value = stack.pop()
            keys.pop()
            if len(stack) == 1:
                in_cases = False
        elif isinstance(ev, yaml.AliasEvent):
            raise _alias(ev, path)
        elif isinstance(ev, yaml.DocumentStartEvent):
            documents += 1
            building = building and documents == 1
            continue
        else:
            continue
        if not stack:
            root = value
            continue
        pending = keys[-1]
        if pending is _LIST:
            if building:
                stack[-1].append(value)
        elif pending is _KEY:
            keys[-1] = value
        else:
            if building:
                stack[-1][pending] = value
            keys[-1] = _KEY
    if not building:
        root = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - a safe loader
    return root, lines
