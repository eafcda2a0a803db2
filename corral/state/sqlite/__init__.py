"""SQLite backends of the state ports (a cluster whose master has no candidates)."""
