"""Benchmarks for the "Must show" figures of the cluster core (see bench/README.md)."""
