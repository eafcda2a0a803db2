"""The plumbing of Corral's daemons: pid files, starting and stopping them,
dropping privileges, rate-limited logging (their entry points: corral.daemons)."""
