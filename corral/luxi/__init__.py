"""Luxi: the local JSON protocol between the gnt-* commands and masterd."""
