"""Metrics in Prometheus's text exposition format (0.0.4).

:mod:`corral.metrics.registry` holds the metric kinds and their rendering;
:mod:`corral.metrics.jobs` the job queue's counts and durations, kept by the
queue's list index; :mod:`corral.metrics.master` everything masterd
exposes, rendered for the ``CorralMetrics`` luxi call.  It imports no
other part of masterd (the job queue imports it): what it reads of the
config manager and the RPC client is declared as protocols.
"""
