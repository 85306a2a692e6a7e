"""Published memory benchmarks as scoped retrieval datasets: LoCoMo and LongMemEval.

Neither data set ships with evalloop (their authors license them); these readers turn a
downloaded file into a dataset folder that runs as one suite, scored the way the authors score
retrieval: every query searches only its own conversation (LoCoMo) or its own haystack
(LongMemEval), the evidence the authors annotated is the qrels, the question's category is the
stratum. Questions without usable evidence are skipped and counted by reason.

- **LoCoMo** (``locomo10.json``): a list of samples, each with ``conversation`` (``speaker_a``,
  ``speaker_b``, ``session_N``: turns ``{speaker, dia_id, text}``, ``session_N_date_time``) and
  ``qa`` (``{question, answer, evidence: [dia_id], category}``). One document per turn (a shared
  image's ``blip_caption`` appended as ``[shares …]``, the session's date in front unless
  ``dates=False``), one scope per sample. Evidence ids are normalised (``D30:05`` is ``D30:5``).
  Adversarial questions (category 5) have no answer in the conversation: they stay out of the
  retrieval suite and are scored as abstention in the QA suite (:mod:`evalloop.retrieval.answers`).

Category numbers: the file follows LoCoMo's code (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop, 5 adversarial); the mem0 paper and the tables copied from it name the same numbers
1 single-hop, 2 temporal, 3 multi-hop, 4 open-domain. A stratum carries both names.
- **LongMemEval** (``longmemeval_s.json`` …): a list of questions, each with its own haystack
  (``haystack_session_ids``, ``haystack_sessions``: lists of ``{role, content, has_answer?}``)
  and ``answer_session_ids``. One scope per question; one document per session (the paper's
  session-level recall) or per turn (turns flagged ``has_answer`` are relevant).
"""

from __future__ import annotations

import hashlib
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
"""LoCoMo's numeric QA categories as LoCoMo's own evaluation code treats them."""
MEM0_CATEGORIES = {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain", 5: "adversarial"}
"""The same numbers as the mem0 paper (and the tables that copy it) name them."""
ADVERSARIAL = 5
ABSTENTION = "abstention"
"""The stratum of LongMemEval's abstention (``_abs``) questions, whatever their question type."""
_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")
_DIA_ID = re.compile(r"^D\s*(\d+)\s*:\s*(\d+)$", re.IGNORECASE)


def category_label(category: int | str | None) -> str:
    """A LoCoMo category as a stratum naming both schemes: ``1 multi-hop / mem0 single-hop``."""
    if isinstance(category, int) and category in LOCOMO_CATEGORIES:
        ours, theirs = LOCOMO_CATEGORIES[category], MEM0_CATEGORIES[category]
        return f"{category} {ours}" if ours == theirs else f"{category} {ours} / mem0 {theirs}"
    return f"category-{category}" if isinstance(category, int) else str(category or "all")


def dia_id(raw: object) -> str:
    """A dialogue id in one spelling: ``D30:05`` and ``d30: 5`` are ``D30:5``; others unchanged."""
    text = str(raw).strip()
    m = _DIA_ID.match(text)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else text


def file_sha256(path: Path) -> str:
    """The hex SHA-256 of a file, so a suite records exactly which published file it came from."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ImportReport(BaseModel):
    """What an import wrote and what it left out."""

    source: str
    format: str
    sha256: str = Field(default="", description="of the source file, as read")
    n_docs: int
    n_queries: int
    n_scopes: int
    dates: bool = Field(default=True, description="session dates written into the indexed text")
    skipped: dict[str, int] = Field(default_factory=dict, description="reason -> questions")
    dropped_evidence: dict[str, int] = Field(
        default_factory=dict, description="reason -> evidence ids left out of questions that were kept")
    n_qa: int = Field(default=0, description="questions in the QA suite (adversarial ones included)")
    qa_skipped: dict[str, int] = Field(default_factory=dict, description="reason -> QA questions")

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> str:
        """Every skip and every dropped evidence id, counted, for the import's one-line report."""
        skipped = ", ".join(f"{n} {why}" for why, n in self.skipped.items()) or "none"
        text = f"skipped: {skipped}"
        if self.qa_skipped:
            text += "; left out of the QA suite: " + ", ".join(
                f"{n} {why}" for why, n in self.qa_skipped.items())
        if self.dropped_evidence:
            text += "; evidence ids dropped: " + ", ".join(
                f"{n} {why}" for why, n in self.dropped_evidence.items())
        return text


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


class QAItem(BaseModel):
    """One benchmark question as the QA suite asks it (every question with an answer, and the
    adversarial ones, whose trap answer the system must not give)."""

    id: str
    question: str
    answer: str | None = None
    category: int | str | None = None
    stratum: str = "all"
    scope: str
    evidence: list[str] = Field(default_factory=list, description="document ids")
    adversarial: bool = False
    unmatched: int = Field(default=0, description="evidence ids the conversation does not have")
    date: str | None = Field(default=None, description="when the question is asked, if the file says")


class Imported(BaseModel):
    """A published benchmark file read once: documents, questions, and what was left out."""

    docs: list[Doc]
    questions: list[QAItem]
    skipped: dict[str, int] = Field(default_factory=dict)
    dropped_evidence: dict[str, int] = Field(default_factory=dict)


def _doc_text(speaker: str, text: str, when: str | None, dates: bool) -> str:
    return f"[{when}] {speaker}: {text}" if dates and when else f"{speaker}: {text}"


def read_locomo(path: str | Path, *, dates: bool = True) -> Imported:
    """Every turn and question of LoCoMo's ``locomo10.json`` (see the module docstring)."""
    path = Path(path)
    docs: list[Doc] = []
    questions: list[QAItem] = []
    skipped: Counter[str] = Counter()
    dropped: Counter[str] = Counter()
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
                dia = dia_id(turn.dia_id)
                doc_id = f"{scope}:{dia}"
                if dia in turns:
                    raise FixtureError(f"dia_id {turn.dia_id!r} appears twice in sample {scope!r}",
                                       where=str(path), hint="dialogue ids must be unique per sample")
                turns[dia] = doc_id
                caption = (turn.model_extra or {}).get("blip_caption")  # a shared image, as text
                text = f"{turn.text} [shares {caption}]" if caption else turn.text
                docs.append(Doc(id=doc_id, content=_doc_text(turn.speaker, text, when, dates),
                                scope=scope, session=number, date_time=when, speaker=turn.speaker))
        for i, qa in enumerate(sample.qa):
            evidence = [dia_id(e) for ev in qa.evidence for e in _EVIDENCE_SPLIT.split(str(ev)) if e]
            found = list(dict.fromkeys(turns[e] for e in evidence if e in turns))
            missing = sum(1 for e in evidence if e not in turns)
            cat = qa.category
            adversarial = cat == ADVERSARIAL or (qa.answer is None and "adversarial_answer" in (qa.model_extra or {}))
            answer = _answer(qa.answer if qa.answer is not None else (qa.model_extra or {}).get(
                "adversarial_answer"))
            if found and missing:
                dropped["not in the conversation"] += missing
            questions.append(QAItem(id=f"{scope}:q{i + 1}", question=qa.question, answer=answer,
                                    category=cat, stratum=category_label(cat), scope=scope,
                                    evidence=found, adversarial=adversarial, unmatched=missing))
    return Imported(docs=docs, questions=questions, skipped=dict(skipped),
                    dropped_evidence=dict(dropped))


def load_locomo(path: str | Path, *, dates: bool = True) -> tuple[Dataset, ImportReport]:
    """A scoped retrieval dataset from LoCoMo's ``locomo10.json``: turns as documents, one scope
    per sample, the annotated evidence as qrels; adversarial questions and questions without
    usable evidence are left out and counted."""
    path = Path(path)
    return locomo_retrieval(read_locomo(path, dates=dates), path, dates=dates)


def locomo_retrieval(data: Imported, path: Path, *, dates: bool = True) -> tuple[Dataset, ImportReport]:
    """The retrieval dataset of a read LoCoMo file (see :func:`load_locomo`)."""
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter(data.skipped)
    for item in data.questions:
        if item.adversarial:
            skipped["adversarial (category 5: scored as abstention in the QA suite)"] += 1
            continue
        if not item.evidence:
            skipped["evidence not in the conversation" if item.unmatched else "no evidence"] += 1
            continue
        queries.append(Query(query_id=item.id, text=item.question, stratum=item.stratum,
                             scope=item.scope, relevant_ids=list[str | int](item.evidence), answer=item.answer,
                             category=item.category))
        qrels[item.id] = dict.fromkeys(item.evidence, 1)
    dataset, report = _finish(path, "locomo", data.docs, queries, qrels, skipped)
    report.dates, report.dropped_evidence = dates, dict(data.dropped_evidence)
    return dataset, report


def read_longmemeval(path: str | Path, granularity: Literal["session", "turn"] = "session", *,
                     dates: bool = True) -> Imported:
    """Every haystack and question of a LongMemEval file; abstention questions (``_abs``) are
    the adversarial ones: asked in the QA suite, graded by abstention."""
    if granularity not in ("session", "turn"):
        raise FixtureError(f"granularity must be 'session' or 'turn', not {granularity!r}")
    path = Path(path)
    docs: list[Doc] = []
    questions: list[QAItem] = []
    for n, raw in enumerate(_read_list(path, "LongMemEval")):
        item = _parse(_LongMemEvalItem, raw, f"{path} (item #{n + 1})", "LongMemEval")
        scope = item.question_id
        if len(item.haystack_session_ids) != len(item.haystack_sessions):
            raise FixtureError(f"question {scope!r}: {len(item.haystack_session_ids)} session ids "
                               f"for {len(item.haystack_sessions)} sessions", where=str(path),
                               hint="haystack_session_ids and haystack_sessions must align")
        answers = set(item.answer_session_ids)
        relevant: list[str] = []
        extra = item.model_extra or {}
        dates_of = list(extra.get("haystack_dates") or [])
        for n_s, (sid, session) in enumerate(zip(item.haystack_session_ids, item.haystack_sessions, strict=True)):
            when = dates_of[n_s] if n_s < len(dates_of) else None
            if granularity == "session":
                doc_id = f"{scope}:{sid}"
                text = "\n".join(f"{t.get('role', '?')}: {t.get('content', '')}" for t in session)
                text = f"[{when}]\n{text}" if dates and when else text
                docs.append(Doc(id=doc_id, content=text, scope=scope, session=sid, date_time=when))
                if sid in answers:
                    relevant.append(doc_id)
                continue
            for j, turn in enumerate(session):
                doc_id = f"{scope}:{sid}:{j}"
                text = _doc_text(str(turn.get("role", "?")), str(turn.get("content", "")), when, dates)
                docs.append(Doc(id=doc_id, content=text, scope=scope, session=sid, date_time=when))
                if turn.get("has_answer"):
                    relevant.append(doc_id)
        asked = extra.get("question_date")
        abstain = scope.endswith("_abs")  # LongMemEval's abstention questions: one group of their own
        questions.append(QAItem(id=scope, question=item.question, answer=_answer(item.answer),
                                category=item.question_type, stratum=ABSTENTION if abstain else item.question_type,
                                scope=scope, evidence=relevant, adversarial=abstain,
                                date=None if asked is None else str(asked)))
    return Imported(docs=docs, questions=questions)


def load_longmemeval(path: str | Path, granularity: Literal["session", "turn"] = "session", *,
                     dates: bool = True) -> tuple[Dataset, ImportReport]:
    """A scoped retrieval dataset from a LongMemEval file: one scope per question's haystack."""
    path = Path(path)
    return longmemeval_retrieval(read_longmemeval(path, granularity, dates=dates), path, granularity,
                                 dates=dates)


def longmemeval_retrieval(data: Imported, path: Path, granularity: str = "session", *,
                          dates: bool = True) -> tuple[Dataset, ImportReport]:
    """The retrieval dataset of a read LongMemEval file; a skipped question's haystack is not indexed."""
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    skipped: Counter[str] = Counter()
    for item in data.questions:
        if item.adversarial:
            skipped["abstention question (no evidence by design)"] += 1
        elif not item.evidence:
            skipped["no evidence in the haystack"] += 1
        else:
            queries.append(Query(query_id=item.id, text=item.question, stratum=item.stratum,
                                 scope=item.scope, relevant_ids=list[str | int](item.evidence), answer=item.answer))
            qrels[item.id] = dict.fromkeys(item.evidence, 1)
    kept = {q.scope for q in queries}
    docs = [d for d in data.docs if d.scope in kept]
    dataset, report = _finish(path, f"longmemeval ({granularity})", docs, queries, qrels, skipped)
    report.dates = dates
    return dataset, report


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
    report = ImportReport(source=str(path), format=fmt, sha256=file_sha256(path), n_docs=len(docs),
                          n_queries=len(queries), n_scopes=len({d.scope for d in docs}),
                          skipped=dict(skipped))
    return Dataset(corpus=docs, queries=queries, qrels=qrels, name=path.stem), report
