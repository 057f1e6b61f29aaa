"""Pure helpers of the benchmarks (core): percentiles, ratios, targets and text tables.

Figures on this shared 2-core machine drift by tens of percent between minutes, so every benchmark
reports ratios of two things measured in the same run; these helpers keep that arithmetic (and the
``None`` of a side that could not run) in one tested place.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mqha.table_text import pipe_table


def percentile(values: Iterable[float], q: float) -> float | None:
    """The nearest-rank ``q`` quantile (0..1) of ``values``; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = math.ceil(q * len(ordered) - 1e-9)  # nearest rank; the epsilon absorbs float error
    return ordered[min(len(ordered), max(1, rank)) - 1]


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are there (a round without a success has no latency)."""
    present = sorted(v for v in values if v is not None)
    return statistics.median(present) if present else None


def summarize(seconds: Sequence[float]) -> dict[str, Any]:
    """n, p50, p99 and max of latencies given in seconds, reported in milliseconds."""
    p50, p99 = percentile(seconds, 0.5), percentile(seconds, 0.99)
    return {
        "n": len(seconds),
        "p50_ms": None if p50 is None else p50 * 1000,
        "p99_ms": None if p99 is None else p99 * 1000,
        "max_ms": max(seconds) * 1000 if seconds else None,
    }


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """ours / theirs, or None when either side is missing or theirs is zero."""
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def fmt(value: Any, spec: str = ".1f", suffix: str = "") -> str:
    """One table cell: ``-`` for a missing value, else ``value`` formatted with ``spec``."""
    if value is None:
        return "-"
    if isinstance(value, str | bool | int):
        return str(value)
    return f"{value:{spec}}{suffix}"


@dataclass(frozen=True)
class Target:
    """One target of the issue: ``measured`` against ``limit`` (``at_least`` or at most)."""

    name: str
    measured: float | None
    limit: float
    at_least: bool
    unit: str = ""

    @property
    def met(self) -> bool | None:
        if self.measured is None:
            return None
        return self.measured >= self.limit if self.at_least else self.measured <= self.limit

    @property
    def verdict(self) -> str:
        """``met``, ``not measured`` or ``missed by N%`` (relative to the limit)."""
        if self.met is None or self.measured is None:
            return "not measured"
        if self.met:
            return "met"
        return f"missed by {abs(self.measured - self.limit) / self.limit:.0%}"

    def row(self) -> tuple[str, str, str, str]:
        sign = ">=" if self.at_least else "<="
        measured = fmt(self.measured, ".2f", self.unit)
        return (self.name, f"{sign} {self.limit:g}{self.unit}", measured, self.verdict)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "limit": self.limit,
            "at_least": self.at_least,
            "measured": self.measured,
            "met": self.met,
            "verdict": self.verdict,
        }


def format_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table (also valid Markdown): title line, header, separator, rows."""
    lines = pipe_table([str(c) for c in header], [[fmt(c) for c in row] for row in rows])
    return "\n".join([title, "", *lines])


def targets_table(title: str, targets: Sequence[Target]) -> str:
    """The targets of one benchmark side by side with what was measured."""
    return format_table(title, ("target", "limit", "measured", "verdict"), [t.row() for t in targets])


@dataclass
class Outcome:
    """What one benchmark hands back: its printed tables, its targets and its JSON figures."""

    name: str
    tables: list[str]
    targets: list[Target]
    data: dict[str, Any]

    def text(self) -> str:
        parts = [*self.tables]
        if self.targets:
            parts.append(targets_table(f"{self.name}: targets", self.targets))
        return "\n\n".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {**self.data, "targets": [t.as_json() for t in self.targets]}


def side_rows(
    figures: Mapping[str, Mapping[str, Any]], sides: Sequence[str], extra: Mapping[str, Any]
) -> list[tuple[Any, ...]]:
    """One table row per side of an on/off comparison: msgs/s, p50, p99, errors and ``extra[side]``."""
    return [
        (
            side,
            fmt(figures[side]["ops_per_s"], ".0f"),
            fmt(figures[side]["p50_ms"], ".2f"),
            fmt(figures[side]["p99_ms"], ".2f"),
            figures[side]["errors"],
            extra[side],
        )
        for side in sides
    ]
