"""How numbers look in every report: means, percentages, durations, and missing values as a dash;
and a long list of case names cut to its first few."""

from __future__ import annotations

from collections.abc import Sequence


def pct(value: float | None, signed: bool = False) -> str:
    """A share as a percentage with one decimal (``—`` when missing); a value that rounds to
    zero is ``0.0%``, never ``-0.0%`` or ``+0.0%``."""
    if value is None:
        return "—"
    if abs(value) < 0.0005:
        return "0.0%"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def some(names: Sequence[str], limit: int) -> str:
    """At most ``limit`` names, comma-separated, and how many more there are: ``a, b (+3 more)``."""
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" (+{more} more)" if more > 0 else "")


def num(value: float | None) -> str:
    """A score with three decimals (``—`` when missing)."""
    return "—" if value is None else f"{value:.3f}"


def ms(value: float | None) -> str:
    """A duration given in milliseconds, as precise as its size needs: ``1.25 s``, ``340 ms``,
    ``4.2 ms``, ``350 µs`` (under a millisecond a duration is never a bare ``0 ms``)."""
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value / 1000:.2f} s"
    if value >= 10:
        return f"{value:.0f} ms"
    if value >= 1:
        return f"{value:.1f} ms"
    return "0 ms" if value == 0 else f"{max(value * 1000, 1):.0f} µs"
