"""Prometheus's text format 0.0.4 as corral.metrics.registry renders it: escaping,
cumulative buckets ending in +Inf, _sum and _count, value formatting."""

from __future__ import annotations

import math
import re

import pytest

from corral.metrics.registry import (
    Counter,
    Gauge,
    Histogram,
    escape_help,
    escape_label,
    format_value,
    render,
)

# One sample line: name, optional labels, value (the format's grammar, simplified).
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]\w*="(\\.|[^"\\])*",?)*\})? \S+$')


def test_label_values_escape_backslash_quote_and_newline() -> None:
    assert escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    gauge = Gauge("g", "help", ("name",))
    gauge.set(1, 'we"ird\\na\nme')
    assert gauge.render()[-1] == 'g{name="we\\"ird\\\\na\\nme"} 1'


def test_help_escapes_backslash_and_newline_but_not_quotes() -> None:
    assert escape_help('a\\b\n"c"') == 'a\\\\b\\n"c"'
    assert Gauge("g", "two\nlines").render()[0] == "# HELP g two\\nlines"


def test_values_are_formatted_as_the_format_wants() -> None:
    assert format_value(3.0) == "3"
    assert format_value(0.25) == "0.25"
    assert format_value(math.inf) == "+Inf"
    assert format_value(-math.inf) == "-Inf"
    assert format_value(math.nan) == "NaN"


def test_a_histogram_renders_cumulative_buckets_with_inf_sum_and_count() -> None:
    hist = Histogram("h_seconds", "a histogram", ("op",), (0.1, 1, 10))
    for value in (0.05, 0.1, 0.5, 5, 50, 500):
        hist.observe(value, "x")
    lines = hist.render()
    assert lines[:2] == ["# HELP h_seconds a histogram", "# TYPE h_seconds histogram"]
    assert lines[2:] == [
        'h_seconds_bucket{op="x",le="0.1"} 2',  # a value on a bound counts in its bucket
        'h_seconds_bucket{op="x",le="1"} 3',
        'h_seconds_bucket{op="x",le="10"} 4',
        'h_seconds_bucket{op="x",le="+Inf"} 6',
        'h_seconds_sum{op="x"} 555.65',
        'h_seconds_count{op="x"} 6',
    ]


def test_a_histogram_needs_finite_bounds() -> None:
    with pytest.raises(ValueError):
        Histogram("h", "h", (), ())
    with pytest.raises(ValueError):
        Histogram("h", "h", (), (1, math.inf))


def test_a_counter_cannot_go_down() -> None:
    counter = Counter("c_total", "c", ("node",))
    counter.inc(2, "n1")
    with pytest.raises(ValueError):
        counter.inc(-1, "n1")
    assert counter.render() == [
        "# HELP c_total c",
        "# TYPE c_total counter",
        'c_total{node="n1"} 2',
    ]


def test_a_whole_text_is_valid_lines_ending_in_a_newline() -> None:
    gauge = Gauge("g", "gauge")
    gauge.set(7)
    hist = Histogram("h", "hist", ("a", "b"), (1,))
    hist.observe(0.5, 'q"', "z")
    text = render([gauge, hist])
    assert text.endswith("\n")
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body[0] == "g 7"
    assert all(SAMPLE.match(line) for line in body), body
    # Every metric has its HELP and TYPE before its samples.
    assert text.splitlines()[:2] == ["# HELP g gauge", "# TYPE g gauge"]
