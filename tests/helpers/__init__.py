"""Reusable helpers for tests (temp node roots, running daemons)."""
