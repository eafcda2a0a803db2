"""Disk storage on a node, one module per disk template."""
