"""Corral's tools beside the gnt-* commands (Ganeti's /usr/lib/ganeti/tools)."""
