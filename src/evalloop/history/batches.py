"""The provider batches a run submitted (batch mode), kept so a killed run can be resumed.

A submission is recorded before it goes out (:func:`record_intent`: its requests, under a
``pending:`` token) and given its batch id as soon as the provider answers (:func:`record_batch`).
``evalloop run --resume RUN`` reads the batches back (custom_id -> batch id) and collects instead
of submitting again; a submission still pending (the run was killed between the provider taking
the batch and the history learning its id) is looked up at the provider by the resumer
(:meth:`evalloop.llm.batching.BatchBackend.find`).
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from sqlalchemy import insert, select, update

from evalloop.history.models import RunBatch
from evalloop.history.store import HistoryStore

BATCHES = RunBatch.__table__
PENDING = "pending:"  # the batch id of a submission whose provider id is not known (yet)


def record_intent(store: HistoryStore, run_id: str, provider: str, custom_ids: list[str]) -> str:
    """Keep a submission of ``run_id`` about to go out; its token (for :func:`record_batch`)."""
    token = uuid.uuid4().hex
    record_batch(store, run_id, provider, PENDING + token, custom_ids)
    return token


def record_batch(store: HistoryStore, run_id: str, provider: str, batch_id: str, custom_ids: list[str],
                 token: str | None = None) -> None:
    """Keep one submitted batch of ``run_id`` (the pending submission ``token`` gets its id)."""
    with store.engine.begin() as conn:
        if token is not None:
            done = conn.execute(update(BATCHES).where(BATCHES.c.run_id == run_id,
                                                      BATCHES.c.batch_id == PENDING + token)
                                .values(batch_id=batch_id)).rowcount
            if done:
                return
        row = RunBatch(run_id=run_id, provider=provider, batch_id=batch_id, custom_ids=json.dumps(custom_ids))
        conn.execute(insert(BATCHES), row.model_dump(exclude={"id"}))


def _rows(store: HistoryStore, run_id: str) -> list[tuple[str, str, list[str], datetime]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(BATCHES.c.provider, BATCHES.c.batch_id, BATCHES.c.custom_ids,
                                   BATCHES.c.created_at)
                            .where(BATCHES.c.run_id == run_id).order_by(BATCHES.c.id)).all()
    return [(provider, batch_id, json.loads(ids or "[]"), at) for provider, batch_id, ids, at in rows]


def batch_rows(store: HistoryStore, run_id: str) -> list[tuple[str, str, list[str]]]:
    """The batches of ``run_id`` as (provider, batch id, custom_ids), oldest first."""
    return [(p, b, ids) for p, b, ids, _ in _rows(store, run_id) if not b.startswith(PENDING)]


def pending_rows(store: HistoryStore, run_id: str) -> list[tuple[str, list[str], datetime]]:
    """The submissions of ``run_id`` whose batch id never reached the history, as (provider,
    custom_ids, when it was about to go out)."""
    return [(p, ids, at) for p, b, ids, at in _rows(store, run_id) if b.startswith(PENDING)]


def known_batch_ids(store: HistoryStore, provider: str) -> set[str]:
    """Every batch id of ``provider`` some run recorded (a lookup skips them: they are not lost)."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(BATCHES.c.batch_id).where(BATCHES.c.provider == provider).distinct()).all()
    return {b for (b,) in rows if not b.startswith(PENDING)}


def batches_of(store: HistoryStore, run_id: str) -> dict[str, str]:
    """The requests ``run_id`` sent in batches: custom_id -> batch id."""
    known: dict[str, str] = {}
    for _, batch_id, ids in batch_rows(store, run_id):
        known.update(dict.fromkeys(ids, batch_id))
    return known
