"""The provider batches a run submitted (batch mode), kept so a killed run can be resumed.

A batch is recorded as soon as the provider gave it an id, before any polling: ``evalloop run
--resume RUN`` reads them back (custom_id -> batch id) and collects instead of submitting again.
"""

from __future__ import annotations

import json

from sqlalchemy import insert, select

from evalloop.history.models import RunBatch
from evalloop.history.store import HistoryStore

BATCHES = RunBatch.__table__


def record_batch(store: HistoryStore, run_id: str, provider: str, batch_id: str, custom_ids: list[str]) -> None:
    """Keep one submitted batch of ``run_id``."""
    row = RunBatch(run_id=run_id, provider=provider, batch_id=batch_id, custom_ids=json.dumps(custom_ids))
    with store.engine.begin() as conn:
        conn.execute(insert(BATCHES), row.model_dump(exclude={"id"}))


def batch_rows(store: HistoryStore, run_id: str) -> list[tuple[str, str, list[str]]]:
    """The batches of ``run_id`` as (provider, batch id, custom_ids), oldest first."""
    with store.engine.connect() as conn:
        rows = conn.execute(select(BATCHES.c.provider, BATCHES.c.batch_id, BATCHES.c.custom_ids)
                            .where(BATCHES.c.run_id == run_id).order_by(BATCHES.c.id)).all()
    return [(provider, batch_id, json.loads(ids or "[]")) for provider, batch_id, ids in rows]


def batches_of(store: HistoryStore, run_id: str) -> dict[str, str]:
    """The requests ``run_id`` sent in batches: custom_id -> batch id."""
    known: dict[str, str] = {}
    for _, batch_id, ids in batch_rows(store, run_id):
        known.update(dict.fromkeys(ids, batch_id))
    return known
