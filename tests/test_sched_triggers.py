"""Schedule triggers: cron across DST changes, intervals, crontab weekdays, and bad input."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from evalloop.errors import ConfigError
from evalloop.scheduling.triggers import (
    WallClockCronTrigger,
    crontab_days,
    describe,
    make_trigger,
    parse_every,
)


def fires(trigger, start: datetime, n: int) -> list[datetime]:
    out, previous, now = [], None, start
    for _ in range(n):
        nxt = trigger.get_next_fire_time(previous, now)
        out.append(nxt)
        previous = now = nxt
    return out


@pytest.mark.parametrize("zone, change_day, expect_local", [
    ("Europe/Berlin", "2025-03-30", "03:30"),      # spring forward: 02:30 does not exist
    ("Europe/Berlin", "2025-10-26", "02:30"),      # fall back: 02:30 happens twice
    ("America/New_York", "2025-03-09", "03:30"),
    ("America/New_York", "2025-11-02", "02:30"),
    ("Australia/Lord_Howe", "2025-04-06", "02:30"),  # half-hour DST shift, fall back
])
def test_nightly_0230_neither_skips_nor_doubles_across_dst(zone, change_day, expect_local):
    tz = ZoneInfo(zone)
    trigger = make_trigger(cron="30 2 * * *", tz=zone)
    day = datetime.fromisoformat(change_day).replace(tzinfo=tz)
    seq = fires(trigger, day - timedelta(days=4), 9)
    local = [f.astimezone(UTC).astimezone(tz) for f in seq]
    dates = [t.date() for t in local]
    # exactly one fire per calendar day, nine consecutive days
    assert dates == [(day - timedelta(days=4) + timedelta(days=i)).date() for i in range(9)]
    on_change = local[4]
    assert on_change.strftime("%H:%M") == expect_local
    assert on_change.fold == 0
    gaps = [(b - a).total_seconds() / 3600 for a, b in zip(seq, seq[1:], strict=False)]
    assert all(22.9 <= g <= 25.1 for g in gaps), gaps


def test_plain_cron_trigger_doubles_on_fall_back_so_the_wrapper_is_needed():
    from apscheduler.triggers.cron import CronTrigger

    tz = ZoneInfo("Europe/Berlin")
    plain = CronTrigger(hour=2, minute=30, timezone=tz)
    seq = fires(plain, datetime(2025, 10, 25, tzinfo=tz), 3)
    assert [f.astimezone(tz).date().day for f in seq] == [25, 26, 26]


def test_trigger_survives_pickling_with_expression_and_zone():
    trigger = make_trigger(cron="0 3 * * 1-5", tz="Europe/Berlin")
    again = pickle.loads(pickle.dumps(trigger))
    assert isinstance(again, WallClockCronTrigger)
    assert describe(again) == "cron 0 3 * * 1-5 Europe/Berlin"
    start = datetime(2025, 6, 6, 12, tzinfo=ZoneInfo("Europe/Berlin"))  # a Friday
    nxt = again.get_next_fire_time(None, start)
    assert nxt.astimezone(ZoneInfo("Europe/Berlin")).strftime("%a %H:%M") == "Mon 03:00"


@pytest.mark.parametrize("field, expected", [
    ("0", "sun"), ("7", "sun"), ("1-5", "mon,tue,wed,thu,fri"), ("*/2", "sun,tue,thu,sat"),
    ("5-0", "sun,fri,sat"), ("mon,3", "mon,wed"), ("sat", "sat"), ("*", "*"),
    ("0-7", "sun,mon,tue,wed,thu,fri,sat"), ("1-7", "sun,mon,tue,wed,thu,fri,sat"),
    ("5-7", "sun,fri,sat"), ("6-7,3", "sun,wed,sat"),
])
def test_crontab_weekday_numbers(field, expected):
    assert crontab_days(field) == expected


@pytest.mark.parametrize("text, seconds", [
    ("45s", 45), ("30m", 1800), ("6h", 21600), ("1d", 86400), ("1h30m", 5400), ("0.5s", 0.5),
    ("2w", 1209600),
])
def test_every(text, seconds):
    assert parse_every(text).total_seconds() == seconds
    assert make_trigger(every=text, tz="UTC").interval.total_seconds() == seconds


@pytest.mark.parametrize("kwargs, message", [
    ({"every": "6 hours"}, "is not an interval"),
    ({"every": "0s"}, "longer than zero"),
    ({"cron": "0 3 * *"}, "needs 5 fields"),
    ({"cron": "61 3 * * *"}, "higher than the maximum"),
    ({"cron": "0 3 * * *", "every": "1h"}, "exactly one"),
    ({}, "exactly one"),
    ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
])
def test_bad_schedules_are_one_line_errors(kwargs, message):
    with pytest.raises(ConfigError) as info:
        make_trigger(**kwargs)
    assert message in info.value.one_line() and "\n" not in info.value.one_line()


def test_cron_0_to_7_fires_every_day():
    trigger = make_trigger(cron="0 3 * * 0-7", tz="UTC")
    got = fires(trigger, datetime(2026, 3, 2, tzinfo=UTC), 7)  # Monday
    assert [d.day for d in got] == [2, 3, 4, 5, 6, 7, 8]


def test_day_of_month_or_day_of_week_as_crontab_does():
    # crontab: "at 09:00 on the 1st of the month AND on every Monday" fires on either
    trigger = make_trigger(cron="0 9 1 * 1", tz="UTC")
    got = fires(trigger, datetime(2026, 2, 25, tzinfo=UTC), 8)
    assert [d.strftime("%m-%d %a %H:%M") for d in got] == [
        "03-01 Sun 09:00", "03-02 Mon 09:00", "03-09 Mon 09:00", "03-16 Mon 09:00",
        "03-23 Mon 09:00", "03-30 Mon 09:00", "04-01 Wed 09:00", "04-06 Mon 09:00"]
    again = pickle.loads(pickle.dumps(trigger))  # survives the job store
    assert describe(again) == "cron 0 9 1 * 1 UTC"
    assert fires(again, datetime(2026, 2, 25, tzinfo=UTC), 8) == got


def test_a_star_in_either_day_field_keeps_the_and_rule():
    # */2 starts with '*', so crontab (and evalloop) require both: odd days that are Mondays
    trigger = make_trigger(cron="0 9 */2 * 1", tz="UTC")
    got = fires(trigger, datetime(2026, 3, 1, tzinfo=UTC), 3)
    assert [d.strftime("%m-%d %a") for d in got] == ["03-09 Mon", "03-23 Mon", "04-13 Mon"]


@pytest.mark.parametrize("change_day, expect", [
    ("2026-03-29", ["03-22 02:30", "03-29 03:30", "04-05 02:30"]),   # spring forward, a Sunday 29th
    ("2026-10-25", ["10-18 02:30", "10-25 02:30", "11-01 02:30"]),   # fall back, a Sunday 25th
])
def test_or_rule_keeps_the_wall_clock_across_dst(change_day, expect):
    tz = ZoneInfo("Europe/Berlin")
    day = datetime.fromisoformat(change_day).replace(tzinfo=tz)
    trigger = make_trigger(cron=f"30 2 {day.day} * 0", tz="Europe/Berlin")
    got = fires(trigger, day - timedelta(days=8), 3)
    assert [d.astimezone(tz).strftime("%m-%d %H:%M") for d in got] == expect
    assert len({d.astimezone(UTC) for d in got}) == 3  # the repeated 02:30 is not a second fire


def test_backwards_weekday_range_is_an_error():
    with pytest.raises(ConfigError, match="runs backwards"):
        make_trigger(cron="0 3 * * 5-2", tz="UTC")
