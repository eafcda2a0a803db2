"""Logical units: one class per opcode, grouped by object in modules."""
