"""A case runs in place (no thread, no deadline, no context object unless asked) and means the same.

Real runs on real SQLite: the in-place path of the runner must give a target or scorer that asks
for ``ctx`` its case, await what a sync scorer returns when it is a coroutine, grade with async
scorers, count LLM usage recorded inside a sync target, and turn a scorer that raises or returns
something unusable into an errored grade.
"""

from __future__ import annotations

from evalloop import load_settings, run_suite
from evalloop.history import HistoryStore
from support.project import TARGET, make_project

IN_PLACE_TARGET = TARGET + '''
from evalloop.llm import LLMResponse, TokenUsage, record_usage

def with_ctx(input, ctx):
    return f"{ctx.case.id}/{ctx.epoch}/{ctx.suite}"

def billed(input):
    record_usage(LLMResponse(text="x", model="m", usage=TokenUsage(input_tokens=7, output_tokens=3),
                             cost_usd=0.5), retries=1)
    record_usage(LLMResponse(text="x", model="m", cached=True))
    return input
'''

IN_PLACE_SCORERS = '''
import asyncio
from evalloop import Score, scorer

@scorer("sees-ctx")
def sees_ctx(input, output, expected, ctx):
    return 1.0 if ctx is not None and ctx.case.input == input else 0.0

@scorer("async-equal")
async def async_equal(input, output, expected):
    await asyncio.sleep(0)
    return Score(value=float(output == expected), message="async")

@scorer("returns-coroutine")
def returns_coroutine(input, output, expected):
    async def later():
        return {"value": 0.25, "message": "later"}
    return later()

@scorer("returns-junk")
def returns_junk(input, output, expected):
    return object()

@scorer("quotes-a-url")
def quotes_a_url(input, output, expected):
    return Score(value=1.0, message="fetched https://bob:hunter2@example.test/x?token=T0K&page=2")

@scorer("not-finite")
def not_finite(input, output, expected):
    return float("nan")
'''


def _run(tmp_path, target, scorers, cases, epochs=1):
    suite = {"name": "s", "target": target, "scorers": scorers, "cases": cases, "epochs": epochs}
    root = make_project(tmp_path, {"s": suite}, target=IN_PLACE_TARGET, scorers=IN_PLACE_SCORERS)
    settings = load_settings(root)
    report = run_suite("s", settings=settings)
    return report, HistoryStore(settings.database_url)


def test_a_target_and_a_scorer_that_take_ctx_get_their_case(tmp_path):
    cases = [{"id": "a", "input": 1}, {"id": "b", "input": 2}]
    report, store = _run(tmp_path, "sut:with_ctx", ["sees-ctx"], cases, epochs=2)
    run_id = report.executed.run.id
    outputs = sorted(r.output for r in store.case_results(run_id))
    assert outputs == ['"a/0/s"', '"a/1/s"', '"b/0/s"', '"b/1/s"']
    assert report.executed.summaries["sees-ctx"].mean == 1.0


def test_async_scorers_and_awaitables_a_sync_scorer_returns_are_awaited(tmp_path):
    cases = [{"id": "a", "input": "x", "expected": "x"}, {"id": "b", "input": "y", "expected": "z"}]
    report, store = _run(tmp_path, "sut:echo", ["async-equal", "returns-coroutine"], cases)
    assert store.case_scores(report.executed.run.id, "async-equal") == {"a": 1.0, "b": 0.0}
    assert store.case_scores(report.executed.run.id, "returns-coroutine") == {"a": 0.25, "b": 0.25}


def test_usage_recorded_inside_a_sync_target_is_counted_per_case_and_per_run(tmp_path):
    report, store = _run(tmp_path, "sut:billed", ["equals"], [{"id": "a", "input": "x", "expected": "x"},
                                                              {"id": "b", "input": "y", "expected": "y"}])
    run = report.executed.run
    assert (run.llm_calls, run.cache_hits, run.llm_retries) == (2, 2, 2)
    assert (run.input_tokens, run.output_tokens, run.cost_usd) == (14, 6, 1.0)
    rows = store.case_results(run.id)
    assert [(r.input_tokens, r.output_tokens, r.cost_usd) for r in rows] == [(7, 3, 0.5)] * 2


def test_a_scorer_that_returns_junk_or_a_non_finite_value_is_errored_in_one_line(tmp_path):
    report, _ = _run(tmp_path, "sut:echo", ["returns-junk", "not-finite", "equals"],
                     [{"id": "a", "input": "x", "expected": "x"}])
    results = report.executed.results
    assert results["returns-junk"].errored == 1
    assert results["returns-junk"].first_error == ("scorer returns-junk raised ValueError: a scorer must return a "
                                                   "Score, a number or a dict, not object")
    assert results["not-finite"].errored == 1
    assert results["not-finite"].first_error == ("scorer not-finite built an invalid Score: value: "
                                                 "score value must be a finite number, got nan")
    assert results["equals"].mean == 1.0


def test_a_scorer_message_quoting_a_credential_is_stored_redacted(tmp_path):
    report, store = _run(tmp_path, "sut:echo", ["quotes-a-url", "equals"],
                         [{"id": f"c{i}", "input": i, "expected": i} for i in range(3)])
    with store.engine.connect() as conn:
        messages = [r[0] for r in conn.exec_driver_sql("SELECT message FROM case_scores WHERE scorer = 'quotes-a-url'")]
    assert len(messages) == 3
    # cut to scheme, host and port (the rule of evalloop.redact: a path may be a token)
    assert all("hunter2" not in m and "T0K" not in m and "https://***@example.test/***" in m
               for m in messages), messages


def test_outputs_are_stored_as_compact_json_whatever_their_type(tmp_path):
    import json

    inputs = ["plain", "é \"quoted\" \\ \n\t\u2028 \x00", "", 3, 2.5, None, True, [1, "x"], {"k": ["é"]}]
    report, store = _run(tmp_path, "sut:echo", ["equals"],
                         # expected is a copy: one object twice would be written as a YAML alias (refused)
                         [{"id": f"c{i}", "input": v, "expected": json.loads(json.dumps(v))}
                          for i, v in enumerate(inputs)])
    stored = {r.case_id: r.output for r in store.case_results(report.executed.run.id)}
    assert stored == {f"c{i}": json.dumps(v, ensure_ascii=False, separators=(",", ":")) for i, v in enumerate(inputs)}
