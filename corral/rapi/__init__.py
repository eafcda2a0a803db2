"""Corral's Remote API daemon (corral-rapi): Ganeti's RAPI v2 over HTTPS."""
