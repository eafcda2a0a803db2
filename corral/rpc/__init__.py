"""Node RPC: the call table (:mod:`.calls`, stdlib only) and the asyncio client
(:mod:`.client`, which needs aiohttp; import it explicitly).

Wire protocol: ``POST https://<node>:<port>/<call>`` with a JSON list of
arguments; the reply is HTTP 200 with ``[success, payload]``, where payload is
the error message when success is false.  Unknown calls get HTTP 404.
"""
