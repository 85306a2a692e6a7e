"""Schedule triggers: ``--cron`` and ``--every`` parsed into APScheduler triggers with explicit zones.

A cron schedule follows the wall clock of its time zone: each wall-clock time fires once, so
a nightly 02:30 job runs once on the day the clocks go forward (at 03:30, the instant 02:30
would have been) and once, not twice, on the day they go back. ``--every`` is elapsed time and
ignores the clock. Cron day-of-week numbers follow crontab (0 and 7 are Sunday), and so does
the day rule: when both day of month and day of week are restricted (neither starts with
``*``), a day matching either one fires, as crontab does (APScheduler alone needs both).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from evalloop.errors import ConfigError

_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_EVERY = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


def local_zone_name() -> str:
    import tzlocal

    return tzlocal.get_localzone_name() or "UTC"


def resolve_timezone(name: str | None) -> ZoneInfo:
    """A zone by IANA name; None means the machine's local zone."""
    key = name or local_zone_name()
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone '{key}'",
                          hint="use an IANA name such as Europe/Berlin, America/New_York or UTC") from None


def parse_every(text: str) -> timedelta:
    """'6h', '30m', '1h30m', '45s', '1d', '2w' → a positive timedelta."""
    compact = text.strip().lower().replace(" ", "")
    parts = _EVERY.findall(compact)
    if not compact or "".join(n + u for n, u in parts) != compact:
        raise ConfigError(f"--every '{text}' is not an interval",
                          hint="use a number and a unit: 45s, 30m, 6h, 1d, 1w (or 1h30m)")
    delta = timedelta(**_sum_units(parts))
    if delta.total_seconds() <= 0:
        raise ConfigError(f"--every '{text}' must be longer than zero", hint="e.g. --every 6h")
    return delta


def _sum_units(parts: list[tuple[str, str]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for number, unit in parts:
        out[_UNITS[unit]] = out.get(_UNITS[unit], 0.0) + float(number)
    return out


def crontab_days(field: str) -> str:
    """A crontab day-of-week field (0/7 = Sunday) as APScheduler day names."""
    if field == "*" or not re.search(r"\d", field):
        return field
    days: set[int] = set()
    for item in field.split(","):
        body, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if step < 1:
            raise ValueError(f"step {step} in '{item}' must be at least 1")
        if body == "*":
            lo, hi = 0, 6
        elif "-" in body:
            lo_text, hi_text = body.split("-", 1)
            lo, hi = _day_number(lo_text), _day_number(hi_text)
            if hi == 0 and lo > 0:  # fri-sun: Sunday as the end of a range is 7
                hi = 7
            if hi < lo:
                raise ValueError(f"day-of-week range '{body}' runs backwards")
        else:
            lo = hi = _day_number(body)
            if step_text:
                hi = 6
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return ",".join(_DAYS[d] for d in sorted(days))


def _day_number(text: str) -> int:
    """0-7 for a number (7 kept, so that 0-7 and 1-7 are whole weeks), 0-6 for a name."""
    text = text.strip().lower()
    if text.isdigit():
        value = int(text)
        if value > 7:
            raise ValueError(f"day of week {value} is not in 0-7")
        return value
    if text[:3] in _DAYS:
        return _DAYS.index(text[:3])
    raise ValueError(f"'{text}' is not a day of week")


class WallClockCronTrigger(CronTrigger):
    """A cron trigger whose wall-clock times fire once each, across DST changes."""

    expression: str = ""

    @classmethod
    def from_expression(cls, expression: str, timezone: ZoneInfo) -> WallClockCronTrigger:
        fields = expression.split()
        if len(fields) != 5:
            raise ConfigError(f"--cron '{expression}' needs 5 fields, got {len(fields)}",
                              hint="minute hour day month day-of-week, e.g. \"0 3 * * *\"")
        minute, hour, day, month, dow = fields
        try:
            trigger = cls(minute=minute, hour=hour, day=day, month=month,
                          day_of_week=crontab_days(dow), timezone=timezone)
        except ValueError as exc:
            raise ConfigError(f"--cron '{expression}': {exc}",
                              hint="minute hour day month day-of-week, e.g. \"0 3 * * *\"") from None
        trigger.expression = expression
        return trigger

    @classmethod
    def crontab(cls, expression: str, timezone: ZoneInfo) -> BaseTrigger:
        """The trigger crontab would use: day of month OR day of week when both are restricted."""
        fields = expression.split()
        if len(fields) == 5 and not fields[2].startswith("*") and not fields[4].startswith("*"):
            minute, hour, day, month, dow = fields
            by_day = cls.from_expression(f"{minute} {hour} {day} {month} *", timezone)
            by_weekday = cls.from_expression(f"{minute} {hour} * {month} {dow}", timezone)
            return CrontabOrTrigger([by_day, by_weekday], expression=expression, timezone=timezone)
        return cls.from_expression(expression, timezone)

    def get_next_fire_time(self, previous_fire_time: datetime | None, now: datetime) -> datetime | None:
        nxt = super().get_next_fire_time(previous_fire_time, now)
        while nxt is not None and _repeated_wall_time(_local(nxt, self.timezone)):
            nxt = super().get_next_fire_time(nxt, nxt)
        return None if nxt is None else _local(nxt, self.timezone)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "expression": self.expression}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.expression = state.get("expression", "")


class CrontabOrTrigger(OrTrigger):
    """Crontab's rule for a restricted day of month and day of week: either one matching fires.

    APScheduler's own cron trigger needs both to match; this one takes the earlier fire of two
    wall-clock cron triggers (one per field), so DST handling stays that of each.
    """

    def __init__(self, triggers: list[BaseTrigger], *, expression: str = "",
                 timezone: ZoneInfo | None = None) -> None:
        super().__init__(triggers)
        self.expression = expression
        self.timezone = timezone

    def __getstate__(self) -> dict[str, Any]:
        zone = getattr(self.timezone, "key", None)
        return {**super().__getstate__(), "expression": self.expression, "zone": zone}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.expression = state.get("expression", "")
        self.timezone = ZoneInfo(state["zone"]) if state.get("zone") else None

    def __str__(self) -> str:
        return f"cron[{self.expression}]"


def _local(at: datetime, zone: Any) -> datetime:
    """The instant as a real wall-clock time of the zone (a nonexistent 02:30 becomes 03:30)."""
    return at.astimezone(UTC).astimezone(zone)


def _repeated_wall_time(local: datetime) -> bool:
    """True for the second occurrence of a wall-clock time in the hour the clocks go back."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def make_trigger(*, cron: str | None = None, every: str | None = None,
                 tz: str | None = None) -> BaseTrigger:
    """The trigger for exactly one of ``cron`` or ``every``, in an explicit time zone."""
    if (cron is None) == (every is None):
        raise ConfigError("give exactly one of --cron or --every",
                          hint='e.g. --cron "0 3 * * *" or --every 6h')
    zone = resolve_timezone(tz)
    if cron is not None:
        return WallClockCronTrigger.crontab(cron, zone)
    assert every is not None
    return IntervalTrigger(seconds=parse_every(every).total_seconds(), timezone=zone)


def describe(trigger: BaseTrigger) -> str:
    """One short line: 'cron 0 3 * * * Europe/Berlin' or 'every 6:00:00 UTC'."""
    zone = getattr(getattr(trigger, "timezone", None), "key", None) or str(getattr(trigger, "timezone", ""))
    if isinstance(trigger, WallClockCronTrigger | CrontabOrTrigger) and trigger.expression:
        return f"cron {trigger.expression} {zone}"
    if isinstance(trigger, IntervalTrigger):
        return f"every {trigger.interval} {zone}"
    return f"{trigger} {zone}"
