"""Counters, gauges and histograms, rendered in Prometheus's text format 0.0.4.

The format is small enough to write by hand (no client library): a ``# HELP``
and a ``# TYPE`` line per metric, then one line per labelled value.  Label
values escape ``\\``, ``"`` and newlines; help texts ``\\`` and newlines.  A
histogram's buckets are rendered cumulative, ending with ``le="+Inf"``, then
its ``_sum`` and ``_count``.

Updating a value is a dict operation: the places where events happen
(a job's state changes, a commit ends, a node answers) call these directly,
and a scrape only walks the values, never what they count.
"""

from __future__ import annotations

import bisect
import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: from a fraction of a millisecond (a commit, a node query) to
# minutes (a job).
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
DURATION_BUCKETS = (0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)

Labels = tuple[str, ...]


def escape_label(value: str) -> str:
    """A label value as the format quotes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """A help text as the format writes it."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers without a fraction, infinities as ``+Inf``/``-Inf``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _label_text(names: Sequence[str], values: Sequence[str]) -> str:
    if not names:
        return ""
    pairs = ",".join(f'{n}="{escape_label(v)}"' for n, v in zip(names, values, strict=True))
    return "{" + pairs + "}"


class Metric(ABC):
    """A named metric with label names; subclasses hold the values."""

    kind = "untyped"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labels = tuple(labels)

    def header(self) -> list[str]:
        """The ``# HELP`` and ``# TYPE`` lines."""
        return [f"# HELP {self.name} {escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    @abstractmethod
    def render(self) -> list[str]:
        """The metric's lines (header included)."""


class Gauge(Metric):
    """A value per label set, set or moved up and down."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labels)
        self.values: dict[Labels, float] = {}

    def set(self, value: float, *labels: str) -> None:
        """Set the value of the label set ``labels``."""
        self.values[labels] = value

    def inc(self, amount: float = 1, *labels: str) -> None:
        """Add ``amount`` to the value of the label set ``labels``."""
        self.values[labels] = self.values.get(labels, 0) + amount

    def get(self, *labels: str) -> float:
        """The value of the label set ``labels`` (0 if never set)."""
        return self.values.get(labels, 0)

    def render(self) -> list[str]:
        lines = self.header()
        for labels, value in sorted(self.values.items()):
            lines.append(f"{self.name}{_label_text(self.labels, labels)} {format_value(value)}")
        return lines


class Counter(Gauge):
    """A value per label set that only goes up (since the process started)."""

    kind = "counter"

    def inc(self, amount: float = 1, *labels: str) -> None:
        """Add ``amount`` (never negative) to the value of ``labels``."""
        if amount < 0:
            raise ValueError(f"A counter cannot go down ({self.name}: {amount})")
        super().inc(amount, *labels)


class _Series:
    """One label set's observations: per bucket (not cumulative), sum and count."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self, size: int) -> None:
        self.buckets = [0] * size  # the last one: above every bound (+Inf)
        self.sum = 0.0
        self.count = 0


class Histogram(Metric):
    """Observations per label set, counted in buckets of upper bounds ``bounds``."""

    kind = "histogram"

    def __init__(
        self, name: str, help_text: str, labels: Sequence[str] = (), bounds: Iterable[float] = ()
    ) -> None:
        super().__init__(name, help_text, labels)
        self.bounds = tuple(sorted(bounds))
        if not self.bounds or any(math.isinf(b) or math.isnan(b) for b in self.bounds):
            raise ValueError(f"{name}: a histogram needs finite bucket bounds")
        self.series: dict[Labels, _Series] = {}

    def observe(self, value: float, *labels: str) -> None:
        """Count one observation of ``value`` for the label set ``labels``."""
        series = self.series.get(labels)
        if series is None:
            series = self.series[labels] = _Series(len(self.bounds) + 1)
        # bisect_left: a value equal to a bound falls in that bound's bucket (le).
        series.buckets[bisect.bisect_left(self.bounds, value)] += 1
        series.sum += value
        series.count += 1

    def render(self) -> list[str]:
        lines = self.header()
        names = (*self.labels, "le")
        bounds = [format_value(b) for b in self.bounds] + ["+Inf"]
        for labels, series in sorted(self.series.items()):
            total = 0
            for bound, count in zip(bounds, series.buckets, strict=True):
                total += count
                lines.append(f"{self.name}_bucket{_label_text(names, (*labels, bound))} {total}")
            text = _label_text(self.labels, labels)
            lines.append(f"{self.name}_sum{text} {format_value(series.sum)}")
            lines.append(f"{self.name}_count{text} {series.count}")
        return lines


def render(metrics: Iterable[Metric]) -> str:
    """The exposition text of ``metrics``, in order."""
    lines = [line for metric in metrics for line in metric.render()]
    return "\n".join(lines) + "\n"
