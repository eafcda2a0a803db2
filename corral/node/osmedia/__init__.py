"""What noded does with design-os's media: OS images written onto disk 0
(:mod:`.image`) and personalization packages unpacked over the installed
filesystem (:mod:`.package`), both fetched over http(s) (:mod:`.fetch`).

Everything here blocks (file and network I/O): the handlers run it in a
worker thread, never on noded's event loop.
"""
