"""Certificate checks for ``gnt-cluster verify``, worded as Ganeti's.

Both the master (its own certificate files) and every node (its server and
client certificates) judge a certificate file the same way: readable,
signed by the cluster CA, valid now and not expiring within Ganeti's
warning and error periods (``SSL_CERT_EXPIRATION_WARN``/``_ERROR`` days).
A finding is ``(level, message)``, level ``"ERROR"`` or ``"WARNING"``.
"""

from __future__ import annotations

import time
from pathlib import Path

from corral import constants as C

ERROR = "ERROR"
WARNING = "WARNING"
# The clock difference tolerated between nodes (Ganeti's NODE_MAX_CLOCK_SKEW).
NODE_MAX_CLOCK_SKEW = 150.0
_DAY = 24 * 3600


def format_time(stamp: float) -> str:
    """A time as Ganeti's messages show it (``utils.FormatTime``)."""
    return time.strftime("%F %T", time.localtime(stamp))


def validity_problem(
    not_before: float, not_after: float, now: float | None = None
) -> tuple[str, str] | None:
    """Expired, not yet valid or expiring soon, as Ganeti's VerifyX509Certificate."""
    # Ganeti allows for clock skew in the certificate's favour.
    now = (time.time() if now is None else now) + NODE_MAX_CLOCK_SKEW
    if not_after < now:
        span = f"{format_time(not_before)} to {format_time(not_after)}"
        return ERROR, f"Certificate is expired (valid from {span})"
    if not_before > now:
        return WARNING, f"Certificate not yet valid (valid from {format_time(not_before)})"
    remaining = int((not_after - now) / _DAY)
    msg = f"Certificate expires in about {remaining} days"
    if remaining <= C.CERT_EXPIRY_ERROR_DAYS:
        return ERROR, msg
    if remaining <= C.CERT_EXPIRY_WARN_DAYS:
        return WARNING, msg
    return None


def check_file(path: Path, shown: str, ca: Path | None) -> list[tuple[str, str]]:
    """The findings about the certificate file ``path`` (named ``shown`` in
    messages); with ``ca``, it must also be signed by that CA."""
    from corral.crypto.certs import cert_info, verify_signed_by

    try:
        data = path.read_bytes()
        info = cert_info(data)
    except (OSError, ValueError) as err:
        return [(ERROR, f"Failed to load X509 certificate {shown}: {err}")]
    out = []
    problem = validity_problem(info["not_before"], info["not_after"])
    if problem is not None:
        out.append((problem[0], f"While verifying {shown}: {problem[1]}"))
    if ca is not None:
        try:
            signed = verify_signed_by(data, ca.read_bytes())
        except (OSError, ValueError) as err:
            return [*out, (ERROR, f"Cannot check {shown} against the cluster CA: {err}")]
        if not signed:
            out.append((ERROR, f"Certificate {shown} is not signed by the cluster CA"))
    return out
