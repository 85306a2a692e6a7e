"""Reference memory operations — decide, merge, assess_quality — the first system under test.

Each operation has two engines. ``llm`` asks the run's LLM client (Claude by default) with the
prompt in ``prompts/<operation>.md`` and a forced-tool schema. ``local`` needs no network: the
shipped static embedder (lexical overlap when it is unavailable) and rules. The engine comes
from the target's ``engine`` parameter, else from the run (``evalloop run --engine``). When the
learning loop is on, the suite's open failure memories are appended to the prompt, fenced as
untrusted data; the local engine, which reads no prompt, uses them as corrections instead: a case
whose input matches a remembered failing case gets that case's expected answer, and ``decide``
reads the corrections as a rule for every other case (:func:`lesson_cut`): it refits the one
similarity cut a broken ``decide`` loses, from the structured corrections, never from the lesson's
text — so what it gains from a lesson is a check of the loop's mechanics, not evidence that a
model learns from the text (``evalloop learn check`` labels it so). The prompt and
lessons are the same for every case, so they are the system prompt marked for prompt caching,
and the case's memories are the message. The base prompt is hashed into the fingerprint; the
injected memories go under its ``injected`` key, so they never change the base fingerprint.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, JsonValue

from evalloop.errors import ConfigError
from evalloop.learning.feedback import case_key
from evalloop.untrusted import fence

if TYPE_CHECKING:
    from evalloop.memory.records import MemoryRecord

PROMPTS = Path(__file__).parent / "prompts"
SIMILAR_AT = 0.55          # cosine above which the local engine calls two memories the same subject
LEXICAL_SIMILAR_AT = 0.5   # Jaccard threshold when no embedder is available
_TOKEN = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


class Decision(BaseModel):
    """What to do with an incoming memory given an existing one."""

    action: str = Field(description="NOOP, UPDATE or CREATE", pattern="^(NOOP|UPDATE|CREATE)$")
    reason: str = Field(description="One short sentence; 'identical content' for NOOP")


class Merged(BaseModel):
    """The merged memory."""

    content: str = Field(description="The merged memory text")


class QualityAssessment(BaseModel):
    """A memory's usefulness."""

    score: int = Field(ge=0, le=100, description="0 useless … 100 excellent")
    issues: list[str] = Field(default_factory=list)


@functools.cache
def prompt_text(operation: str) -> str:
    return (PROMPTS / f"{operation}.md").read_text(encoding="utf-8")


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def system_prompt(operation: str, services: Any = None) -> str:
    """The operation's prompt, with the suite's fenced failure patterns when learning provides them."""
    base = prompt_text(operation)
    extra = getattr(services, "extras", {}).get("failure_patterns") if services else None
    return f"{base.rstrip()}\n\n{extra}" if extra else base


def correction(input: Any, ctx: Any) -> Any:
    """The expected answer of a remembered failing case with this very input (None if none).

    The local engine's use of failure memories: it reads the structured cases the memory keeps
    in metadata. It is memory of specific mistakes, not generalisation."""
    records = getattr(getattr(ctx, "services", None), "extras", {}).get("failure_memories") or []
    key = case_key(input)
    for case in _corrections(records):
        if case.get("key") == key:
            return case.get("expected")
    return None


def _corrections(records: Iterable[MemoryRecord]) -> Iterator[dict[str, JsonValue]]:
    """The corrections the injected failure memories keep (an incident's metadata, read through
    its model)."""
    from evalloop.learning.incident_records import meta

    for record in records:
        m = meta(record)
        yield from m.corrections if m is not None else []


def lesson_cut(ctx: Any, cut: float, measure: str) -> float:
    """Lessons as a rule, for cases no correction names: the UPDATE cut the remembered corrections
    imply. Each corrected case's pair similarity says where the cut must lie — at or below an
    UPDATE's, above a CREATE's; the cut moves (only as far as they say: to the lowest UPDATE,
    above the highest CREATE, or midway when both bound it) and stays when they contradict each
    other. This is what lets the local engine generalise to cases it never saw."""
    extras = getattr(getattr(ctx, "services", None), "extras", None) or {}
    records = extras.get("failure_memories") or []
    if not records:
        return cut
    key = (tuple(getattr(r, "id", "") for r in records), cut, measure)
    cached = extras.get("lesson_cut")
    if cached and cached[0] == key:
        return cached[1]
    ups: list[float] = []
    creates: list[float] = []
    for case in _corrections(records):
        inp, exp = case.get("input"), case.get("expected")
        if not isinstance(inp, dict) or not isinstance(exp, dict) or "existing" not in inp:
            continue
        existing, incoming = _content(inp.get("existing")), _content(inp.get("incoming"))
        if _normalised(existing) == _normalised(incoming):
            continue  # a duplicate is NOOP whatever the cut
        sim, used = similarity(existing, incoming)
        if used == measure:
            (ups if exp.get("action") == "UPDATE" else creates if exp.get("action") == "CREATE" else []).append(sim)
    lo, hi = (max(creates) if creates else None), (min(ups) if ups else None)
    learned = cut
    if lo is not None and hi is not None and lo >= hi:
        learned = cut  # the lessons contradict each other: no rule
    elif hi is not None and cut > hi:
        learned = (lo + hi) / 2 if lo is not None else hi
    elif lo is not None and cut <= lo:
        learned = (lo + hi) / 2 if hi is not None else lo + 1e-6
    extras["lesson_cut"] = (key, learned)
    return learned


def _content(memory: Any) -> str:
    if isinstance(memory, dict):
        return str(memory.get("content", ""))
    return str(memory or "")


def _tokens(text: str) -> set[str]:
    return set(_TOKEN.findall(text.casefold()))


def lexical_similarity(a: str, b: str) -> float:
    """Jaccard overlap of word tokens (the fallback when no embedder is available)."""
    ta, tb = _tokens(a), _tokens(b)
    return len(ta & tb) / len(ta | tb) if ta and tb else 0.0


@functools.cache
def _embedder() -> Any:
    try:
        from evalloop.memory.embedders import default_embedder

        return default_embedder()
    except Exception:  # noqa: BLE001 - the local engine degrades to lexical overlap
        return None


def similarity(a: str, b: str) -> tuple[float, str]:
    """Cosine of the default embedder (or Jaccard overlap), and which measure it was."""
    embedder = _embedder()
    if embedder is None:
        return lexical_similarity(a, b), "lexical"
    vectors = embedder.embed([a, b])
    return float(vectors[0] @ vectors[1]), "cosine"


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def _engine(engine: str | None, ctx: Any) -> str:
    chosen = engine or (ctx.services.engine if ctx is not None else "local")
    if chosen not in ("local", "llm"):
        raise ConfigError(f"unknown engine '{chosen}'", hint="use engine: local or llm")
    return chosen


def _client(ctx: Any) -> Any:
    client = ctx.services.llm if ctx is not None else None
    if client is None:
        raise ConfigError("the llm engine needs an LLM client", where="memory operation",
                          hint="set ANTHROPIC_API_KEY (or EVALLOOP_LLM_BASE_URL) or use --engine local")
    return client


# -- decide ---------------------------------------------------------------------------------
def decide_local(existing: str, incoming: str, similar_at: float | None = None, ctx: Any = None) -> Decision:
    """Exact duplicate → NOOP; same subject (embedding cosine) → UPDATE; otherwise CREATE. With
    lessons (``ctx`` carrying failure memories) the cut is the one they imply (:func:`lesson_cut`)."""
    if existing == incoming:
        return Decision(action="NOOP", reason="identical content")
    if _normalised(existing) == _normalised(incoming):
        return Decision(action="NOOP", reason="identical content apart from case and spacing")
    sim, measure = similarity(existing, incoming)
    cut = similar_at if similar_at is not None else SIMILAR_AT if measure == "cosine" else LEXICAL_SIMILAR_AT
    if ctx is not None:
        cut = lesson_cut(ctx, cut, measure)
    if sim >= cut:
        return Decision(action="UPDATE", reason=f"same subject ({measure} {sim:.2f})")
    return Decision(action="CREATE", reason=f"different subject ({measure} {sim:.2f})")


async def decide(input: dict[str, Any], engine: str | None = None, model: str | None = None,
                 ctx: Any = None, similar_at: float | None = None, lesson_rule: bool = True) -> dict[str, str]:
    """Decide what to do with ``input['incoming']`` given ``input['existing']`` (``similar_at``:
    the local engine's cosine cut for UPDATE; ``lesson_rule=False``: the local engine recalls
    corrected cases only, and derives no cut from them)."""
    existing, incoming = _content(input.get("existing")), _content(input.get("incoming"))
    if _engine(engine, ctx) == "local":
        fixed = correction(input, ctx)
        if isinstance(fixed, dict) and fixed.get("action") in ("NOOP", "UPDATE", "CREATE"):
            reason = "identical content" if fixed["action"] == "NOOP" else "corrected by a past failure memory"
            return Decision(action=fixed["action"], reason=str(fixed.get("reason") or reason)).model_dump()
        return decide_local(existing, incoming, similar_at, ctx if lesson_rule else None).model_dump()
    from evalloop.llm.structured import structured

    prompt = f"{fence('EXISTING MEMORY', existing)}\n\n{fence('INCOMING MEMORY', incoming)}"
    result = await structured(_client(ctx), Decision, prompt=prompt, system=system_prompt("decide", ctx.services),
                              model=model, max_tokens=256, cache_prefix=True)
    return result.model_dump()


# -- merge ----------------------------------------------------------------------------------
def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def merge_local(original: str, incoming: str) -> str:
    """Incoming sentences, then original sentences that no incoming sentence already covers."""
    kept = _sentences(incoming)
    for sentence in _sentences(original):
        covered = any(similarity(sentence, other)[0] >= 0.8 for other in kept)
        if not covered:
            kept.append(sentence)
    return " ".join(s if s[-1] in ".!?;" else s + "." for s in kept)


async def merge(input: dict[str, Any], engine: str | None = None, model: str | None = None,
                ctx: Any = None) -> dict[str, str]:
    """Merge ``input['incoming']`` into ``input['original']``; returns ``{"content": ...}``."""
    original, incoming = _content(input.get("original")), _content(input.get("incoming"))
    if _engine(engine, ctx) == "local":
        return {"content": merge_local(original, incoming)}
    from evalloop.llm.structured import structured

    prompt = f"{fence('ORIGINAL MEMORY', original)}\n\n{fence('INCOMING MEMORY', incoming)}"
    result = await structured(_client(ctx), Merged, prompt=prompt, system=system_prompt("merge", ctx.services),
                              model=model, max_tokens=512, cache_prefix=True)
    return result.model_dump()


# -- assess_quality -------------------------------------------------------------------------
_VAGUE = re.compile(r"\b(stuff|things?|something|somehow|various|etc|misc|some issues?|"
                    r"discussed|talked about|looked into|it|this|that)\b", re.I)
_SPECIFIC = re.compile(r"\d|[A-Z][a-z]+[A-Z]|[a-z]+[._/-][a-z0-9]+|`|\b[A-Z]{2,}\b")


def assess_local(memory: str) -> QualityAssessment:
    """Rules for specificity, substance and vagueness; 0–100."""
    words = memory.split()
    issues: list[str] = []
    score = 50
    specifics = len(_SPECIFIC.findall(memory))
    vague = len(_VAGUE.findall(memory))
    score += min(30, 10 * specifics)
    score -= min(40, 10 * vague)
    if len(words) < 4:
        score -= 30
        issues.append("too short to stand alone")
    elif len(words) > 80:
        score -= 10
        issues.append("long; may bury the fact")
    if specifics == 0:
        score -= 15
        issues.append("no concrete names, numbers or identifiers")
    if vague >= 2:
        issues.append("vague wording")
    if re.search(r"\b(should|must|use|prefer|avoid|always|never|set|run|is|are|needs?)\b", memory, re.I):
        score += 10
    else:
        issues.append("not actionable")
    return QualityAssessment(score=max(0, min(100, score)), issues=issues)


async def assess_quality(input: Any, engine: str | None = None, model: str | None = None,
                         ctx: Any = None) -> dict[str, Any]:
    """Rate a memory's usefulness: ``{"score": 0..1, "issues": [...]}``."""
    memory = _content(input.get("memory") if isinstance(input, dict) else input)
    if _engine(engine, ctx) == "local":
        result = assess_local(memory)
    else:
        from evalloop.llm.structured import structured

        result = await structured(_client(ctx), QualityAssessment, prompt=fence("MEMORY", memory),
                                  system=system_prompt("quality", ctx.services), model=model, cache_prefix=True,
                                  max_tokens=384)
    return {"score": result.score / 100, "issues": result.issues}


def _describe(operation: str):
    def fingerprint(params: dict[str, Any], services: Any = None) -> dict[str, Any]:
        engine = params.get("engine") or getattr(services, "engine", "local")
        info: dict[str, Any] = {"operation": operation, "engine": engine,
                                "prompt_sha": prompt_hash(prompt_text(operation))}
        extras = getattr(services, "extras", None) or {}
        if extras.get("failure_patterns"):  # volatile: left out of the base fingerprint
            info["injected"] = {"memories": list(extras.get("failure_memory_ids") or []),
                                "sha": prompt_hash(extras["failure_patterns"])}
        if params.get("similar_at") is not None:
            info["similar_at"] = params["similar_at"]
        if params.get("lesson_rule") is False:
            info["lesson_rule"] = False
        if engine == "llm":
            info["model"] = params.get("model") or getattr(getattr(services, "llm", None), "model", None)
        else:
            embedder = _embedder()
            info["embedder"] = getattr(embedder, "name", "lexical")
        return info

    return fingerprint


# a target's fingerprint hook is an attribute of its function (read by getattr in run.targets);
# mypy does not let a function carry one (attr-defined)
decide.fingerprint = _describe("decide")  # type: ignore[attr-defined]
merge.fingerprint = _describe("merge")  # type: ignore[attr-defined]
assess_quality.fingerprint = _describe("quality")  # type: ignore[attr-defined]
