"""How numbers look in every report: means, percentages, and missing values as a dash."""

from __future__ import annotations


def pct(value: float | None, signed: bool = False) -> str:
    """A share as a percentage with one decimal (``—`` when missing)."""
    if value is None:
        return "—"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def num(value: float | None) -> str:
    """A score with three decimals (``—`` when missing)."""
    return "—" if value is None else f"{value:.3f}"
