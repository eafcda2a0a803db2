"""The job queue: jobs of opcodes, stored in SQLite, run by priority."""
