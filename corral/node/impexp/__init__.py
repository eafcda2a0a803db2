"""The node's import/export engine: one disk stream between two nodeds.

An *import* listens on a TCP port and writes what one authenticated exporter
sends into a destination (a disk, the OS import script, a file of an export,
nothing); an *export* reads a source (a disk, the OS export script, a file of
an export, zeros) and sends it.  The stream is TLS 1.3 with certificates
checked on both ends (:mod:`.channel`), framed as :mod:`.wire` describes, and
moved by blocking sockets in threads of its own (:mod:`.engine`): the TLS
library releases the GIL while it encrypts, decrypts and does the I/O, so the
engine adds little CPU to the TLS work.
"""
