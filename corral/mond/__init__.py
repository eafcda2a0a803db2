"""Ganeti's monitoring daemon (mond), served by corral-noded on TCP 1815.

:mod:`corral.mond.collectors` reads the node's data (Ganeti's collectors
``cpu-avg-load`` and ``diskstats``, their reports in Ganeti's JSON form);
:mod:`corral.mond.server` serves Ganeti's paths, and ``/metrics``: on the
master node masterd's metrics (asked over luxi, :mod:`corral.mond.master`).
"""
