"""Retrieval datasets: loading, validating and writing corpus/queries/qrels JSONL files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalloop.errors import FixtureError
from evalloop.retrieval.types import Doc, Qrels, Query
from evalloop.suites.jsonlines import iter_jsonl

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FILE = "qrels.jsonl"


class QrelsLine(BaseModel):
    """One ``qrels.jsonl`` line: binary ``relevant_ids`` and/or graded ``relevance``."""

    model_config = ConfigDict(extra="allow")

    query_id: str | int
    relevant_ids: list[str | int] = Field(default_factory=list)
    relevance: dict[str, int] = Field(default_factory=dict)


class Dataset(BaseModel):
    """A validated retrieval dataset: every qrels id resolves, every query is judged."""

    corpus: list[Doc]
    queries: list[Query]
    qrels: Qrels
    name: str = "dataset"

    def doc_map(self) -> dict[str, Doc]:
        """Documents by their string id."""
        return {d.key: d for d in self.corpus}

    @property
    def scoped(self) -> bool:
        """Whether documents and queries carry a ``scope`` (one corpus per scope)."""
        return any(d.scope is not None for d in self.corpus)

    def scopes(self) -> dict[str | None, list[Doc]]:
        """Documents per scope, in corpus order (one ``None`` key when the dataset is unscoped)."""
        out: dict[str | None, list[Doc]] = {}
        for d in self.corpus:
            out.setdefault(d.scope, []).append(d)
        return out

    def strata(self) -> dict[str, str]:
        """``query_id -> stratum``."""
        return {q.query_id: q.stratum for q in self.queries}

    def subset(self, strata: set[str] | None = None, query_ids: set[str] | None = None) -> Dataset:
        """A copy restricted to some strata and/or query ids (the corpus is shared)."""
        qs = [
            q
            for q in self.queries
            if (strata is None or q.stratum in strata) and (query_ids is None or q.query_id in query_ids)
        ]
        keep = {q.query_id for q in qs}
        qrels = {qid: rel for qid, rel in self.qrels.items() if qid in keep}
        return Dataset(corpus=self.corpus, queries=qs, qrels=qrels, name=self.name)


def check_scopes(docs: list[Doc], queries: list[Query], qrels: Qrels, where: str) -> None:
    """A scoped dataset: every document and query has a scope, and every judged document of a
    query lies in the query's scope (so no query is judged against a corpus it cannot see)."""
    doc_scope = {d.key: d.scope for d in docs}
    if all(s is None for s in doc_scope.values()) and all(q.scope is None for q in queries):
        return
    unscoped = next((d for d in docs if d.scope is None), None)
    if unscoped is not None:
        raise FixtureError(f"doc {unscoped.id!r} has no 'scope' but others do", where=where,
                           hint="give every document a scope, or none")
    scopes = set(doc_scope.values())
    for q in queries:
        if q.scope not in scopes:
            what = "has no 'scope'" if q.scope is None else f"has scope {q.scope!r}, which no document has"
            raise FixtureError(f"query {q.query_id!r} {what}", where=where,
                               hint="a query searches only the documents of its scope")
        outside = [d for d, g in qrels.get(q.query_id, {}).items() if g > 0 and doc_scope[d] != q.scope]
        if outside:
            raise FixtureError(f"query {q.query_id!r} (scope {q.scope!r}) judges doc {outside[0]!r} "
                               f"of scope {doc_scope[outside[0]]!r}", where=where,
                               hint="a query can only find documents of its own scope")


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line, raising FixtureError on bad JSON."""
    if not path.is_file():
        raise FixtureError(
            "file not found",
            where=str(path),
            hint=f"a retrieval dataset needs {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_FILE}",
        )
    for lineno, obj in iter_jsonl(path):
        if not isinstance(obj, dict):
            raise FixtureError(
                "expected a JSON object",
                where=f"{path}:{lineno}",
                hint="each line must be one JSON object",
            )
        yield lineno, obj


def _parse(model: type[BaseModel], obj: dict[str, Any], where: str) -> Any:
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        from evalloop import validation

        err = validation.first(exc)
        raise FixtureError(
            f"field '{validation.location(err) or 'line'}': {validation.message(err, model)}",
            where=where,
            hint=f"see the {model.__name__} schema",
        ) from None


def read_corpus(path: Path) -> list[Doc]:
    """The documents of a ``corpus.jsonl``: each validated, ids unique, at least one."""
    docs: list[Doc] = []
    doc_ids: dict[str, int] = {}
    for lineno, obj in _jsonl(path):
        doc = _parse(Doc, obj, f"{path}:{lineno}")
        if doc.key in doc_ids:
            raise FixtureError(
                f"duplicate doc id {doc.id!r} (first on line {doc_ids[doc.key]})",
                where=f"{path}:{lineno}",
                hint="doc ids must be unique",
            )
        doc_ids[doc.key] = lineno
        docs.append(doc)
    if not docs:
        raise FixtureError("corpus is empty", where=str(path), hint="add one document per line")
    return docs


def _file(given: str | Path | None, base: Path | None, default: str) -> Path:
    """An explicit path, or the file's default name in the dataset directory."""
    if given:
        return Path(given)
    if base is None:
        raise FixtureError("no dataset given", hint="pass a directory or corpus=, queries= and qrels= paths")
    return base / default


def load_dataset(
    source: str | Path | None = None,
    *,
    corpus: str | Path | None = None,
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
    name: str | None = None,
) -> Dataset:
    """Load and validate a dataset from a directory or from three explicit JSONL paths."""
    base = Path(source) if source is not None else None
    c_path = _file(corpus, base, CORPUS_FILE)
    q_path = _file(queries, base, QUERIES_FILE)
    r_path = _file(qrels, base, QRELS_FILE)

    docs = read_corpus(c_path)
    doc_ids = {d.key for d in docs}

    qs: list[Query] = []
    q_lines: dict[str, int] = {}
    for lineno, obj in _jsonl(q_path):
        if not isinstance(obj.get("stratum"), str) or not obj["stratum"].strip():
            raise FixtureError(
                f"query {obj.get('query_id', '?')!r} has no 'stratum'",
                where=f"{q_path}:{lineno}",
                hint="give every query a stratum (e.g. exact, paraphrase, multihop); per-stratum "
                     "means are built from it",
            )
        q = _parse(Query, obj, f"{q_path}:{lineno}")
        if q.query_id in q_lines:
            raise FixtureError(
                f"duplicate query_id {q.query_id!r} (first on line {q_lines[q.query_id]})",
                where=f"{q_path}:{lineno}",
                hint="query ids must be unique",
            )
        q_lines[q.query_id] = lineno
        qs.append(q)

    judged: Qrels = {}
    r_lines: dict[str, int] = {}
    for lineno, obj in _jsonl(r_path):
        where = f"{r_path}:{lineno}"
        line = _parse(QrelsLine, obj, where)
        qid = str(line.query_id)
        if qid not in q_lines:
            raise FixtureError(
                f"query_id {qid!r} is not in {q_path.name}",
                where=where,
                hint="add the query or remove this judgment",
            )
        if qid in r_lines:
            raise FixtureError(
                f"duplicate judgments for {qid!r} (first on line {r_lines[qid]})",
                where=where,
                hint="give each query one qrels line",
            )
        r_lines[qid] = lineno
        grades = {str(d): 1 for d in line.relevant_ids}
        grades.update({str(d): int(g) for d, g in line.relevance.items()})
        missing = [d for d in grades if d not in doc_ids]
        if missing:
            raise FixtureError(
                f"doc id {missing[0]!r} for query {qid!r} is not in {c_path.name}",
                where=where,
                hint="fix the id or re-export the corpus",
            )
        if not any(g > 0 for g in grades.values()):
            raise FixtureError(
                f"query {qid!r} has no relevant documents",
                where=where,
                hint="judge at least one document relevant (grade >= 1)",
            )
        judged[qid] = grades

    for q in qs:
        if q.query_id not in judged:
            raise FixtureError(
                f"query {q.query_id!r} has no line in {r_path.name}",
                where=f"{q_path}:{q_lines[q.query_id]}",
                hint="add its relevance judgments",
            )
    check_scopes(docs, qs, judged, str(q_path))
    return Dataset(corpus=docs, queries=qs, qrels=judged, name=name or (base.name if base else "dataset"))


def write_dataset(dataset: Dataset, directory: str | Path) -> Path:
    """Write ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.jsonl`` into ``directory``."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    def dump(path: Path, rows: list[dict[str, Any]]) -> None:
        with path.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    dump(out / CORPUS_FILE, [_unscoped(d.model_dump(mode="json")) for d in dataset.corpus])
    dump(out / QUERIES_FILE, [_unscoped(q.model_dump(mode="json")) for q in dataset.queries])
    rows = []
    for q in dataset.queries:
        grades = dataset.qrels.get(q.query_id, {})
        row: dict[str, Any] = {
            "query_id": q.query_id,
            "relevant_ids": [_native(d) for d, g in grades.items() if g > 0],
        }
        if any(g not in (0, 1) for g in grades.values()) or 0 in grades.values():
            row["relevance"] = dict(grades)
        rows.append(row)
    dump(out / QRELS_FILE, rows)
    return out


def _unscoped(row: dict[str, Any]) -> dict[str, Any]:
    """Leave ``scope`` out of rows that have none (unscoped files stay as they were)."""
    if row.get("scope") is None:
        row.pop("scope", None)
    return row


def _native(doc_id: str) -> str | int:
    """Write numeric ids back as ints, as the 001 schema does."""
    return int(doc_id) if doc_id.isdigit() and str(int(doc_id)) == doc_id else doc_id
