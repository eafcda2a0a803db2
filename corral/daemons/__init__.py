"""Daemon entry points: corral-masterd, corral-noded, corral-rapi (their
plumbing: corral.process)."""
