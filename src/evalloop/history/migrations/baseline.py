"""The tables as evalloop f3594c2 made them: the first revision (``0001``) of the migrations.

Frozen here, never edited: a migration states the schema of its own time, not the models'.
(f3594c2's DDL for both dialects is also kept in ``tests/data/schema_f3594c2.json``.)
"""

from __future__ import annotations

from typing import TypeVar

import sqlalchemy as sa

T = TypeVar("T")


def tables() -> sa.MetaData:
    """A new ``MetaData`` holding the f3594c2 tables (history, locks, fire claims, ledger)."""
    meta = sa.MetaData()
    text, flt, integer, boolean = sa.String(), sa.Float(), sa.Integer(), sa.Boolean()
    when = sa.DateTime(timezone=True)

    def required(name: str, kind: sa.types.TypeEngine[T], *, primary_key: bool = False,
                 index: bool = False) -> sa.Column[T]:
        return sa.Column(name, kind, nullable=False, primary_key=primary_key, index=index)

    def optional(name: str, kind: sa.types.TypeEngine[T]) -> sa.Column[T]:
        return sa.Column(name, kind, nullable=True)

    sa.Table("runs", meta, required("id", text, primary_key=True), required("suite", text, index=True),
             required("status", text, index=True), required("valid", boolean), optional("invalid_reason", text),
             required("partial", boolean), required("started_at", when, index=True), optional("ended_at", when),
             optional("code_version", text), required("fingerprint", text), required("fingerprint_hash", text),
             optional("base_fingerprint", text), required("n_cases", integer), required("epochs", integer),
             required("case_errors", integer), optional("target_failures", integer),
             optional("infra_failures", integer), required("cost_usd", flt), required("input_tokens", integer),
             required("output_tokens", integer), required("llm_calls", integer), required("cache_hits", integer),
             required("llm_retries", integer), required("notes", text), required("origin", text))

    def run_id() -> tuple[sa.Column[str], sa.ForeignKeyConstraint]:
        return required("run_id", text), sa.ForeignKeyConstraint(["run_id"], ["runs.id"])

    sa.Table("calibrations", meta, required("id", integer, primary_key=True), required("suite", text, index=True),
             required("scorer", text), required("kind", text), required("created_at", when),
             required("repeats", integer), required("n_cases", integer), required("mean", flt),
             required("noise_sd", flt), required("false_alarm_rate", flt), optional("suggested_threshold", flt),
             optional("minimal_detectable_drop", flt), required("per_case_variance", text))
    sa.Table("scorer_summaries", meta, required("id", integer, primary_key=True), *run_id(),
             required("scorer", text, index=True), required("kind", text), optional("mean", flt),
             required("n", integer), required("errored", integer), required("skipped", boolean),
             required("threshold", flt), optional("verdict", text), optional("baseline", flt),
             optional("drop", flt), optional("p_value", flt), optional("mdd", flt), optional("eligible", boolean),
             required("details", text), sa.Index("ix_scorer_summaries_run_id", "run_id"))
    sa.Table("case_results", meta, required("id", integer, primary_key=True), *run_id(),
             required("case_id", text), required("epoch", integer), optional("tags", text), optional("output", text),
             optional("error", text), optional("failure", text), required("latency_ms", flt),
             required("cost_usd", flt), required("input_tokens", integer), required("output_tokens", integer),
             sa.Index("ix_case_results_run_case", "run_id", "case_id", "epoch"))
    sa.Table("case_scores", meta, required("id", integer, primary_key=True), *run_id(),
             required("case_id", text), required("epoch", integer), required("scorer", text),
             required("value", flt), required("errored", boolean), required("skipped", boolean),
             required("message", text), optional("meta", text),
             sa.Index("ix_case_scores_run_scorer", "run_id", "scorer", "case_id"))
    sa.Table("score_vectors", meta, required("id", integer, primary_key=True), *run_id(),
             required("scorer", text), required("digest", text), required("n", integer),
             required("data", sa.LargeBinary()), sa.Index("ix_score_vectors_run_scorer", "run_id", "scorer"))
    sa.Table("evalloop_locks", meta, required("name", sa.String(191), primary_key=True),
             required("owner", sa.String(191)), required("acquired_at", flt), required("expires_at", flt),
             optional("refreshed_at", flt), optional("beat_seconds", flt))
    sa.Table("evalloop_fire_claims", meta, required("job_id", sa.String(191), primary_key=True),
             required("fire_time", sa.String(40), primary_key=True), required("owner", sa.String(191)),
             required("claimed_at", flt))
    sa.Table("evalloop_schedule_runs", meta, required("id", integer, primary_key=True),
             required("job_id", sa.String(191), index=True), required("fire_id", sa.String(40)),
             required("suite", sa.String(191)), required("owner", sa.String(191)), required("status", sa.String(20)),
             optional("verdict", sa.String(40)), optional("run_id", sa.String(64)),
             optional("detail", sa.String(1000)), required("started_at", flt), optional("ended_at", flt))
    return meta

