"""Node RPC, shared by master and node.

- :mod:`.declare`, :mod:`.wire` and the ``calls_*`` modules: every node call
  declared once as a typed signature (:mod:`.calls` has them by name);
- :mod:`.client`: the master's client (typed requests in, typed payloads or
  :class:`~corral.rpc.result.NodeCallError` out) over a :mod:`.transport`;
- :mod:`.https`: the production transport (aiohttp, mutual TLS; import it
  explicitly).

Wire protocol: ``POST https://<node>:<port>/<call>`` with a JSON list of
arguments; the reply is HTTP 200 with ``[success, payload]``, where payload is
the error message when success is false.  Unknown calls get HTTP 404,
malformed arguments HTTP 400.  A call that changes its node carries its
master's fence token (header ``X-Corral-Fence-Token``); a node that has seen
a newer one answers HTTP 409 (:mod:`.fencing`).
"""
