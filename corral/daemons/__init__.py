"""Daemon entry points (corral-noded, corral-masterd) and their shared plumbing."""
