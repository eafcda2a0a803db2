"""Cryptographic material of a cluster: the cluster CA, node and client certificates,
the cluster domain secret, and the TLS contexts built from them.

The package itself imports nothing so that light users of a submodule (the CLI)
do not pay for ``cryptography``; import :mod:`corral.crypto.certs` explicitly.
"""
