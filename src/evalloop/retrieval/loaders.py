"""Published memory benchmarks as scoped retrieval datasets: LoCoMo and LongMemEval.

Neither data set ships with evalloop (their authors license them); these readers turn a
downloaded file into a dataset folder that runs as one suite, scored the way the authors score
retrieval: every query searches only its own conversation (LoCoMo) or its own haystack
(LongMemEval), the evidence the authors annotated is the qrels, the question's category is the
stratum. Questions without usable evidence are skipped and counted by reason.

- **LoCoMo** (``locomo10.json``): a list of samples, each with ``conversation`` (``speaker_a``,
  ``speaker_b``, ``session_N``: turns ``{speaker, dia_id, text}``, ``session_N_date_time``) and
  ``qa`` (``{question, answer, evidence: [dia_id], category}``). One document per turn (a shared
  image's ``blip_caption`` appended as ``[shares …]``), one scope per sample.
- **LongMemEval** (``longmemeval_s.json`` …): a list of questions, each with its own haystack
  (``haystack_session_ids``, ``haystack_sessions``: lists of ``{role, content, has_answer?}``)
  and ``answer_session_ids``. One scope per question; one document per session (the paper's
  session-level recall) or per turn (turns flagged ``has_answer`` are relevant).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalloop.errors import FixtureError
from evalloop.retrieval.dataset import Dataset, check_scopes
from evalloop.retrieval.types import Doc, Query

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""LoCoMo's numeric QA categories, as its paper names them."""
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


class ImportReport(BaseModel):
    """What an import wrote and what it left out."""

    source: str
    format: str
    n_docs: int
    n_queries: int
    n_scopes: int
    skipped: dict[str, int] = Field(default_factory=dict, description="reason -> questions")

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())


class _Turn(BaseModel):
    model_config = ConfigDict(extra="allow")
    speaker: str
    dia_id: str
    text: str


class _LocomoQA(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    answer: Any = None
    evidence: list[str] = Field(default_factory=list)
    category: int | str | None = None


class _LocomoSample(BaseModel):
    model_config = ConfigDict(extra="allow")
    sample_id: str | None = None
    conversation: dict[str, Any]
    qa: list[_LocomoQA] = Field(default_factory=list)


class _LongMemEvalItem(BaseModel):
    model_config = ConfigDict(extra="allow")
    question_id: str
    question_type: str = "all"
    question: str
    answer: Any = None
    haystack_session_ids: list[str]
    haystack_sessions: list[list[dict[str, Any]]]
    answer_session_ids: list[str] = Field(default_factory=list)


def _read_list(path: Path, what: str) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FixtureError(f"cannot read {what} file: {exc.strerror}", where=str(path)) from None
    except json.JSONDecodeError as exc:
        raise FixtureError(f"invalid JSON ({exc.msg})", where=f"{path}:{exc.lineno}",
                           hint=f"pass the {what} JSON file as published") from None
    if not isinstance(data, list):
        raise FixtureError(f"expected a JSON list of {what} items", where=str(path),
                           hint=f"pass the {what} JSON file as published")
    return data


def _parse(model: type[BaseModel], obj: Any, where: str, what: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        from evalloop import validation

        err = validation.first(exc)
        raise FixtureError(f"field '{validation.location(err) or 'item'}': {validation.message(err, model)}",
                           where=where,
                           hint=f"this does not look like the published {what} format") from None


def _answer(value: Any) -> str | None:
    return None if value is None else str(value)


def load_locomo(path: str | Path) -> tuple[Dataset, ImportReport]:
    """A scoped dataset from LoCoMo's ``locomo10.json``: turns as documents, one scope per sample."""
    path = Path(path)
    docs: list[Doc] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter()
    for n, raw in enumerate(_read_list(path, "LoCoMo")):
        sample = _parse(_LocomoSample, raw, f"{path} (sample #{n + 1})", "LoCoMo")
        scope = sample.sample_id or f"conv-{n + 1}"
        conv = sample.conversation
        turns: dict[str, str] = {}
        sessions = sorted((int(m.group(1)), key) for key in conv if (m := _SESSION.match(key)))
        for number, key in sessions:
            when = conv.get(f"{key}_date_time")
            for i, item in enumerate(conv[key] or []):
                turn = _parse(_Turn, item, f"{path} (sample {scope}, {key}[{i}])", "LoCoMo")
                doc_id = f"{scope}:{turn.dia_id}"
                if turn.dia_id in turns:
                    raise FixtureError(f"dia_id {turn.dia_id!r} appears twice in sample {scope!r}",
                                       where=str(path), hint="dialogue ids must be unique per sample")
                turns[turn.dia_id] = doc_id
                caption = (turn.model_extra or {}).get("blip_caption")  # a shared image, as text
                text = f"{turn.text} [shares {caption}]" if caption else turn.text
                docs.append(Doc(id=doc_id, content=f"{turn.speaker}: {text}", scope=scope,
                                session=number, date_time=when, speaker=turn.speaker))
        for i, qa in enumerate(sample.qa):
            evidence = [e for ev in qa.evidence for e in _EVIDENCE_SPLIT.split(str(ev)) if e]
            found = [turns[e] for e in evidence if e in turns]
            if not evidence:
                skipped["no evidence"] += 1
                continue
            if not found:
                skipped["evidence not in the conversation"] += 1
                continue
            cat = qa.category
            stratum = (LOCOMO_CATEGORIES.get(cat, f"category-{cat}") if isinstance(cat, int)
                       else str(cat or "all"))
            qid = f"{scope}:q{i + 1}"
            answer = _answer(qa.answer if qa.answer is not None else (qa.model_extra or {}).get(
                "adversarial_answer"))
            queries.append(Query(query_id=qid, text=qa.question, stratum=stratum, scope=scope,
                                 relevant_ids=list(dict.fromkeys(found)), answer=answer))
            qrels[qid] = dict.fromkeys(found, 1)
    return _finish(path, "locomo", docs, queries, qrels, skipped)


def load_longmemeval(path: str | Path, granularity: Literal["session", "turn"] = "session",
                     ) -> tuple[Dataset, ImportReport]:
    """A scoped dataset from a LongMemEval file: one scope per question's haystack."""
    if granularity not in ("session", "turn"):
        raise FixtureError(f"granularity must be 'session' or 'turn', not {granularity!r}")
    path = Path(path)
    docs: list[Doc] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter()
    for n, raw in enumerate(_read_list(path, "LongMemEval")):
        item = _parse(_LongMemEvalItem, raw, f"{path} (item #{n + 1})", "LongMemEval")
        scope = item.question_id
        if len(item.haystack_session_ids) != len(item.haystack_sessions):
            raise FixtureError(f"question {scope!r}: {len(item.haystack_session_ids)} session ids "
                               f"for {len(item.haystack_sessions)} sessions", where=str(path),
                               hint="haystack_session_ids and haystack_sessions must align")
        if scope.endswith("_abs"):
            skipped["abstention question (no evidence by design)"] += 1
            continue
        answers = set(item.answer_session_ids)
        relevant: list[str] = []
        haystack: list[Doc] = []
        dates = list((item.model_extra or {}).get("haystack_dates") or [])
        for n_s, (sid, session) in enumerate(zip(item.haystack_session_ids, item.haystack_sessions, strict=True)):
            when = dates[n_s] if n_s < len(dates) else None
            if granularity == "session":
                doc_id = f"{scope}:{sid}"
                text = "\n".join(f"{t.get('role', '?')}: {t.get('content', '')}" for t in session)
                haystack.append(Doc(id=doc_id, content=text, scope=scope, session=sid, date_time=when))
                if sid in answers:
                    relevant.append(doc_id)
                continue
            for j, turn in enumerate(session):
                doc_id = f"{scope}:{sid}:{j}"
                haystack.append(Doc(id=doc_id, content=f"{turn.get('role', '?')}: {turn.get('content', '')}",
                                    scope=scope, session=sid, date_time=when))
                if turn.get("has_answer"):
                    relevant.append(doc_id)
        if not relevant:
            skipped["no evidence in the haystack"] += 1
            continue
        docs.extend(haystack)  # a skipped question's haystack is not indexed
        queries.append(Query(query_id=scope, text=item.question, stratum=item.question_type,
                             scope=scope, relevant_ids=relevant, answer=_answer(item.answer)))
        qrels[scope] = dict.fromkeys(relevant, 1)
    return _finish(path, f"longmemeval ({granularity})", docs, queries, qrels, skipped)


def _finish(path: Path, fmt: str, docs: list[Doc], queries: list[Query],
            qrels: dict[str, dict[str, int]], skipped: Counter[str]) -> tuple[Dataset, ImportReport]:
    seen: set[str] = set()
    for doc in docs:
        if doc.key in seen:
            raise FixtureError(f"duplicate document id {doc.key!r}", where=str(path),
                               hint="scope ids (sample_id / question_id) must be unique")
        seen.add(doc.key)
    if not queries:
        raise FixtureError("no question has usable evidence", where=str(path),
                           hint="check the file is the published format with its evidence fields")
    check_scopes(docs, queries, qrels, str(path))
    report = ImportReport(source=str(path), format=fmt, n_docs=len(docs), n_queries=len(queries),
                          n_scopes=len({d.scope for d in docs}), skipped=dict(skipped))
    return Dataset(corpus=docs, queries=queries, qrels=qrels, name=path.stem), report
