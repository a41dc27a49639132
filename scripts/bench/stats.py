"""Percentiles, medians over repetitions, and the results table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (`p` in 0..100) of a non-empty sample."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    clean = [v for v in values if not math.isnan(v)]
    return statistics.median(clean) if clean else math.nan


def summary(values: Sequence[float], ps: Sequence[float] = (50, 95, 99)) -> dict[str, float]:
    out = {f"p{int(p)}": percentile(values, p) for p in ps}
    out["n"] = len(values)
    return out


@dataclass
class Figure:
    """One row of the results: a value per repetition, reported as their median."""

    key: str
    label: str
    unit: str
    reps: list[float] = field(default_factory=list)
    target: str = ""
    reached: bool | None = None
    note: str = ""
    higher_is_better: bool = True

    @property
    def value(self) -> float:
        return median(self.reps)

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "unit": self.unit,
            "median": _num(self.value),
            "reps": [_num(v) for v in self.reps],
            "target": self.target or None,
            "reached": self.reached,
            "note": self.note or None,
        }


def _num(v: float) -> float | None:
    return None if math.isnan(v) else round(v, 4)


def fmt(v: float, unit: str = "") -> str:
    if math.isnan(v):
        return "—"
    if unit in ("×",):
        return f"{v:.2f}×"
    if unit in ("calls", "clients"):
        return f"{v:,.0f} {unit}"
    if abs(v) >= 100:
        text = f"{v:,.0f}"
    elif abs(v) >= 10:
        text = f"{v:.1f}"
    else:
        text = f"{v:.2f}"
    return f"{text} {unit}".rstrip() if unit != "×" else text


def table(figures: Sequence[Figure]) -> str:
    """A Markdown table: figure, median, the repetitions, target and whether it is reached."""
    head = ["figure", "median", "repetitions", "target", "reached"]
    rows = []
    for f in figures:
        reps = ", ".join(fmt(v) for v in f.reps) if len(f.reps) > 1 else ""
        reached = {True: "yes", False: "no", None: ""}[f.reached]
        label = f.label + (f" ({f.note})" if f.note else "")
        rows.append([label, fmt(f.value, f.unit), reps, f.target, reached])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(head), sep, *(line(r) for r in rows)])
