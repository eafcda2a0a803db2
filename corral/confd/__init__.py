"""Ganeti's confd: the configuration's read-only answers over signed UDP.

:mod:`~corral.confd.protocol` is the wire (Ganeti 3.0.2's, byte for byte),
:mod:`~corral.confd.answers` answers a request from a loaded ``config.data``,
:mod:`~corral.confd.server` is the UDP endpoint inside corral-noded and
:mod:`~corral.confd.client` a small client for the gnt-* commands.
"""
