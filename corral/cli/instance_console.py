"""gnt-instance console: Ganeti 3.0.2's ConnectToInstanceConsole.

The console is what the instance query's ``console`` field says.  A serial
console (kind ``ssh``) is attached through the node daemon's relay
(:mod:`corral.cli.console_client`) instead of Ganeti's ssh to the node;
``--show-cmd`` prints the ssh command Ganeti would run.
"""

from __future__ import annotations

import argparse
import re
import sys

from corral import constants as C
from corral import errors
from corral import paths as P
from corral.cli import common

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any

# Ganeti's utils.ShellQuote: what needs no quotes.
_SHELL_UNQUOTED = re.compile(r"^[-.,=:/_+@A-Za-z0-9]+$")


def shell_quote(value: str) -> str:
    """POSIX shell quoting, as Ganeti's utils.ShellQuote."""
    if _SHELL_UNQUOTED.match(value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"


def shell_quote_args(args: list[str]) -> str:
    return " ".join(shell_quote(arg) for arg in args)


def ssh_command(root: str, cluster_name: str, console: dict[str, Any]) -> list[str]:
    """The command Ganeti's SshRunner.BuildCmd makes for an ``ssh`` console
    (batch, not quiet, a tty, the cluster's host key alias)."""
    command = console.get("command") or []
    remote = command if isinstance(command, str) else shell_quote_args(list(command))
    known_hosts = P.below(root, f"{P.DATA_DIR}/known_hosts")
    argv = [
        "ssh",
        "-oEscapeChar=none",
        "-oHashKnownHosts=no",
        f"-oGlobalKnownHostsFile={known_hosts}",
        "-oUserKnownHostsFile=/dev/null",
        "-oCheckHostIp=no",
        "-oConnectTimeout=10",
        f"-oHostKeyAlias={cluster_name}",
    ]
    if console.get("port"):
        argv.append(f"-oPort={console['port']}")
    # The cluster's address family, as Ganeti's ssconf primary_ip_family.
    ipv6 = ":" in (common.read_ssconf(root, "master_ip") or "")
    argv += ["-oBatchMode=yes", "-oStrictHostKeyChecking=yes", "-6" if ipv6 else "-4"]
    return [*argv, "-t", "-t", f"{console.get('user')}@{console.get('host')}", remote]


def _lookup(name: str, show_command: bool) -> tuple[str, dict[str, Any], str, int]:
    """The cluster's name, the console, and the address and noded port of its node."""
    client = common.get_client()
    try:
        cluster_name, noded_port = client.call("QueryConfigValues", ["cluster_name", "noded_port"])
        rows = client.call("QueryInstances", [name], ["console", "oper_state"], False)
        if not rows:
            raise errors.OpPrereqError(f"Instance '{name}' does not exist", C.ECODE_NOENT)
        console, running = rows[0]
        if not console:
            if running:
                raise errors.OpExecError(f"Console information for instance {name} is unavailable")
            raise errors.OpExecError(f"Instance {name} is not running, can't get console")
        address = ""
        if console.get("kind") == C.CONS_SSH and not show_command:
            nodes = client.call("QueryNodes", [console.get("host")], ["pip"], False)
            address = nodes[0][0] if nodes else ""
    finally:
        client.close()
    return cluster_name, console, address, noded_port


def _attach(root: str, console: dict[str, Any], address: str, port: int) -> None:
    from corral.cli import console_client

    name = console.get("instance")
    try:
        sock, pending = console_client.connect(root, address, port, str(name))
        console_client.attach(sock, pending)
    except console_client.RelayError as err:
        print(f"Console of instance {name}: {err}", file=sys.stderr)
        raise errors.OpExecError(
            f"Connection to console of instance {name} failed, please check cluster configuration"
        ) from None


def cmd_console(opts: argparse.Namespace) -> int:
    (name,) = opts.instance
    root = common.cluster_root()
    cluster_name, console, address, noded_port = _lookup(name, opts.show_cmd)
    kind = console.get("kind")
    if kind == C.CONS_MESSAGE:
        print(console.get("message"))
    elif kind == C.CONS_VNC:
        host, port = console.get("host"), console.get("port")
        print(
            f"Instance {console.get('instance')} has VNC listening on {host}:{port}"
            f" (display {console.get('display')}), URL <vnc://{host}:{port}/>"
        )
    elif kind == C.CONS_SPICE:
        print(
            f"Instance {console.get('instance')} has SPICE listening on"
            f" {console.get('host')}:{console.get('port')}"
        )
    elif kind == C.CONS_SSH:
        if opts.show_cmd:
            print(shell_quote_args(ssh_command(root, cluster_name, console)))
        else:
            sys.stdout.flush()
            _attach(root, console, address, noded_port)
    else:
        raise errors.GenericError(f"Unknown console type '{kind}'")
    return C.EXIT_SUCCESS


def add_command(sub: Any) -> None:
    """Register ``console`` on gnt-instance's subparsers."""
    p = common.add_command(sub, "console", cmd_console, "Opens a console on the specified instance")
    common.add_args(p, "instance", "INSTANCE", 1, 1)
    p.add_argument(
        "--show-cmd",
        dest="show_cmd",
        action="store_true",
        help="Show command instead of executing it",
    )
    common.add_priority_option(p)
