"""Corral: a cluster virtual-machine manager with Ganeti's outside interfaces."""

__version__ = "0.1.0"
