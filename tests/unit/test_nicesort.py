"""Ganeti's two nice orders: its Python NiceSort (eight groups count, the rest
is text) and its Haskell niceSort (luxid's answers: every group counts)."""

from __future__ import annotations

from corral.nicesort import luxid_key, nice_key, nice_sort


def test_digits_compare_as_numbers() -> None:
    names = ["inst10", "inst9", "inst1", "inst", "9", "a"]
    assert nice_sort(names) == ["9", "a", "inst", "inst1", "inst9", "inst10"]
    assert sorted(names, key=luxid_key) == nice_sort(names)


def test_groups_after_the_eighth() -> None:
    # Ten groups: Python compares "e9" and "e10" as text, Haskell as numbers.
    names = ["a1b1c1d1e9", "a1b1c1d1e10"]
    assert sorted(names, key=nice_key) == ["a1b1c1d1e10", "a1b1c1d1e9"]
    assert sorted(names, key=luxid_key) == ["a1b1c1d1e9", "a1b1c1d1e10"]


def test_luxid_digits_are_ascii() -> None:
    # Haskell's isDigit knows 0-9 only: another script's digits are text.
    assert luxid_key("a\u0663") == ((1, "a\u0663"),)
