"""gnt-cluster: init, destroy, info, verify, modify, rename, version,
getmaster, master-ping, queue, watcher, show-ispecs-cmd, renew-crypto (see
renew_crypto), command and copyfile (see cluster_remote), epo (see
cluster_epo) and the cluster's tags, with Ganeti 3.0.2's output."""

from __future__ import annotations

import argparse
import socket
import sys
import time

from corral import constants as C
from corral import errors, uidpool
from corral import paths as P
from corral.cli import (
    cluster_disks,
    cluster_epo,
    cluster_failover,
    cluster_mip,
    cluster_remote,
    common,
    optvalues,
    renew_crypto,
    tags,
)
from corral.cli import ipolicy as cli_ipolicy
from corral.cli.cluster_opts import add_modify_options, check_types, cmd_modify, ident_key_vals
from corral.cli.generic_info import format_generic_info
from corral.cli.info import format_grouped_params
from corral.cli.optvalues import boolean, split_key_val
from corral.cli.table import format_time
from corral.nicesort import nice_sort
from corral.paths import ES_SEARCH_PATH, Paths, os_search_names
from corral.storage_names import canonical_template

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from typing import Any


def cmd_init(opts: argparse.Namespace) -> int:
    from corral import bootstrap

    paths = Paths.from_env()
    init = bootstrap.InitOptions(
        cluster_name=opts.cluster_name,
        node_name=opts.node_name or socket.getfqdn(),
        node_ip=opts.node_ip,
        master_ip=opts.master_ip,
        secondary_ip=opts.secondary_ip,
        noded_port=opts.noded_port,
        mac_prefix=opts.mac_prefix,
        master_netdev=opts.master_netdev,
        file_storage_dir=opts.file_storage_dir,
        shared_file_storage_dir=opts.shared_file_storage_dir,
    )
    try:
        init.primary_ip_version = int(opts.primary_ip_version)
    except ValueError as err:
        print(f"Invalid primary ip version value: {err}", file=sys.stderr)
        return C.EXIT_FAILURE
    if opts.enabled_hypervisors:
        init.enabled_hypervisors = opts.enabled_hypervisors.split(",")
    if opts.enabled_disk_templates:
        init.enabled_disk_templates = [
            canonical_template(name) for name in opts.enabled_disk_templates.split(",")
        ]
    if opts.max_running_jobs:
        init.max_running_jobs = opts.max_running_jobs
    if opts.candidate_pool_size is not None:
        init.candidate_pool_size = opts.candidate_pool_size
    if opts.uid_pool is not None:
        init.uid_pool = uidpool.parse(opts.uid_pool)
    if opts.enabled_user_shutdown is not None:
        init.enabled_user_shutdown = opts.enabled_user_shutdown
    if opts.master_netmask is not None:
        init.master_netmask = opts.master_netmask
    if opts.use_external_mip_script is not None:
        init.use_external_mip_script = opts.use_external_mip_script
    if opts.install_image:
        init.install_image = opts.install_image
    init.beparams = split_key_val("-B", opts.backend_parameters or "")
    init.nicparams = split_key_val("-N", opts.nic_parameters or "")
    init.hvparams = _hv_options(opts.hypervisor_parameters)
    init.diskparams = ident_key_vals("-D", opts.diskparams)
    check_types({"hvparams": init.hvparams, "beparams": init.beparams,
                 "nicparams": init.nicparams})  # fmt: skip
    init.ipolicy = cli_ipolicy.create_ipolicy(opts, init=True)
    try:
        bootstrap.init_cluster(paths, init)
    except errors.CommandError as err:
        print(f"Failure: cluster initialisation failed: {err.message}", file=sys.stderr)
        return C.EXIT_FAILURE
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_POST_INIT"})
    return C.EXIT_SUCCESS


def _hv_options(values: list[str] | None) -> dict[str, dict[str, Any]]:
    """``-H hv:k=v,...`` options, possibly repeated."""
    out: dict[str, dict[str, Any]] = {}
    for item in values or []:
        hv, _, params = item.partition(":")
        out.setdefault(hv, {}).update(split_key_val("-H", params))
    return out


def cmd_destroy(opts: argparse.Namespace) -> int:
    from corral import bootstrap

    if not opts.yes_do_it:
        print(
            "Destroying a cluster is irreversible. If you really want destroy this"
            " cluster, supply the --yes-do-it option.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    common.cluster_root()  # refuses a root without a cluster
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_DESTROY"})
    bootstrap.destroy_cluster_files(Paths.from_env())
    return C.EXIT_SUCCESS


def cmd_version(opts: argparse.Namespace) -> int:
    info = common.get_client().call("QueryClusterInfo")
    print(f"Software version: {info['software_version']}")
    print(f"Internode protocol: {info['protocol_version']}")
    print(f"Configuration format: {info['config_version']}")
    print(f"OS api version: {info['os_api_version']}")
    print(f"Export interface: {info['export_version']}")
    print(f"VCS version: {info['vcs_version']}")
    return C.EXIT_SUCCESS


def cmd_getmaster(opts: argparse.Namespace) -> int:
    # Any node answers from its ssconf files; only without them is a cluster needed.
    master = common.read_ssconf(P.root_from_env(), "master_node")
    if master is None:
        master = common.get_client().call("QueryConfigValues", ["master_node"])[0]
    print(master)
    return C.EXIT_SUCCESS


def cmd_rename(opts: argparse.Namespace) -> int:
    """OP_CLUSTER_RENAME, after a question unless ``-f`` (Ganeti's words)."""
    client = common.get_client()
    (cluster_name,) = client.call("QueryConfigValues", ["cluster_name"])
    new_name = opts.args[0]
    if not opts.force and not common.confirm(
        f"This will rename the cluster from '{cluster_name}' to '{new_name}'. If you are"
        " connected over the network to the cluster name, the operation is very dangerous"
        " as the IP address will be removed from the node and the change may not go"
        " through. Continue?"
    ):
        return C.EXIT_FAILURE
    result = common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_RENAME", "name": new_name}, client)
    if result:
        print(f"Cluster renamed from '{cluster_name}' to '{result}'")
    return C.EXIT_SUCCESS


def cmd_redist_conf(opts: argparse.Namespace) -> int:
    """OP_CLUSTER_REDIST_CONF; ``--yes-do-it`` submits it even to a drained queue."""
    op = {"OP_ID": "OP_CLUSTER_REDIST_CONF"}
    if opts.yes_do_it:
        client = common.get_client()
        job_id = client.call("SubmitJobToDrainedQueue", [{**common.common_op_fields(opts), **op}])
        common.poll_job(client, job_id)
    else:
        common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_master_ping(opts: argparse.Namespace) -> int:
    """Exit code 0 when the master daemon answers, 1 otherwise."""
    try:
        common.get_client().call("QueryClusterInfo")
    except Exception:  # as Ganeti: any failure means "not alive"
        return C.EXIT_FAILURE
    return C.EXIT_SUCCESS


def _data_collectors(info: dict[str, Any]) -> dict[str, Any]:
    intervals = info["data_collector_interval"]
    return {
        name: {"active": active, "interval": f"{intervals[name] / 1e6:.3f}s"}
        for name, active in info["enabled_data_collectors"].items()
    }


def _cluster_parameters(info: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("candidate pool size", info["candidate_pool_size"]),
        ("maximal number of jobs running simultaneously", info["max_running_jobs"]),
        (
            "maximal number of jobs simultaneously tracked by the scheduler",
            info["max_tracked_jobs"],
        ),
        ("mac prefix", info["mac_prefix"]),
        ("master netdev", info["master_netdev"]),
        ("master netmask", info["master_netmask"]),
        ("use external master IP address setup script", info["use_external_mip_script"]),
        ("lvm volume group", info["volume_group_name"]),
        ("lvm reserved volumes", ", ".join(info["reserved_lvs"]) or "(none)"),
        ("drbd usermode helper", info["drbd_usermode_helper"]),
        ("file storage path", info["file_storage_dir"]),
        ("shared file storage path", info["shared_file_storage_dir"]),
        ("gluster storage path", info["gluster_storage_dir"]),
        ("maintenance of node health", info["maintain_node_health"]),
        ("uid pool", uidpool.format_pool(info["uid_pool"])),
        ("default instance allocator", info["default_iallocator"]),
        ("default instance allocator parameters", info["default_iallocator_params"]),
        ("primary ip version", info["primary_ip_version"]),
        ("preallocation wipe disks", info["prealloc_wipe_disks"]),
        # Production paths, as Ganeti shows its compiled-in ones.
        ("OS search path", ", ".join(os_search_names())),
        ("ExtStorage Providers search path", ", ".join(ES_SEARCH_PATH)),
        ("enabled disk templates", ", ".join(info["enabled_disk_templates"])),
        ("install image", info["install_image"]),
        ("instance communication network", info["instance_communication_network"]),
        ("zeroing image", info["zeroing_image"]),
        ("compression tools", info["compression_tools"]),
        ("enabled user shutdown", info["enabled_user_shutdown"]),
        ("modify ssh setup", info["modify_ssh_setup"]),
        ("ssh_key_type", info["ssh_key_type"]),
        ("ssh_key_bits", info["ssh_key_bits"]),
    ]


def cluster_info_items(info: dict[str, Any]) -> list[tuple[str, Any]]:
    """gnt-cluster info's sections, in Ganeti's order and structure."""
    enabled = info["enabled_hypervisors"]
    hvparams = {hv: params for hv, params in info["hvparams"].items() if hv in enabled}
    return [
        ("Cluster name", info["name"]),
        ("Cluster UUID", info["uuid"]),
        ("Creation time", format_time(info["ctime"])),
        ("Modification time", format_time(info["mtime"])),
        ("Master node", info["master"]),
        ("Architecture (this node)", f"{info['architecture'][0]} ({info['architecture'][1]})"),
        ("Tags", ", ".join(nice_sort(info["tags"])) or "(none)"),
        ("Default hypervisor", info["default_hypervisor"]),
        ("Enabled hypervisors", ", ".join(enabled)),
        ("Hypervisor parameters", format_grouped_params(hvparams)),
        ("OS-specific hypervisor parameters", format_grouped_params(info["os_hvp"])),
        ("OS parameters", format_grouped_params(info["osparams"])),
        ("Hidden OSes", ", ".join(info["hidden_os"])),
        ("Blacklisted OSes", ", ".join(info["blacklisted_os"])),
        ("Cluster parameters", _cluster_parameters(info)),
        ("Default node parameters", format_grouped_params(info["ndparams"])),
        ("Default instance parameters", format_grouped_params(info["beparams"])),
        ("Default nic parameters", format_grouped_params(info["nicparams"])),
        ("Default disk parameters", format_grouped_params(info["diskparams"])),
        (
            "Instance policy - limits for instances",
            cli_ipolicy.format_policy_info(info["ipolicy"], None, True),
        ),
        ("Data collectors", _data_collectors(info)),
    ]


def cmd_info(opts: argparse.Namespace) -> int:
    info = common.get_client().call("QueryClusterInfo")
    print(format_generic_info(cluster_info_items(info)))
    return C.EXIT_SUCCESS


def cmd_show_ispecs_cmd(opts: argparse.Namespace) -> int:
    """The ``gnt-cluster init`` command line that re-creates the policy's specs."""
    info = common.get_client().call("QueryClusterInfo")
    print(f"gnt-cluster init{cli_ipolicy.ipolicy_command(info['ipolicy'], False)} {info['name']}")
    return C.EXIT_SUCCESS


def cmd_verify(opts: argparse.Namespace) -> int:
    op = {
        "OP_ID": "OP_CLUSTER_VERIFY",
        "verbose": opts.verbose,
        "error_codes": opts.error_codes,
        "debug_simulate_errors": opts.simulate_errors,
        "ignore_errors": [code for arg in opts.ignore_errors for code in arg.split(",") if code],
        "skip_checks": ["nplusone_mem"] if opts.skip_nplusone_mem else [],
        "group_name": opts.nodegroup,
        "verify_clutter": opts.verify_clutter,
    }
    client = common.get_client()
    result = common.submit_or_send(opts, op, client)
    jobs = [job_id for ok, job_id in result["jobs"] if ok]
    print(f"Submitted jobs {', '.join(map(str, jobs))}", flush=True)
    failed = 0
    bad = False
    for job_id in jobs:
        print(f"Waiting for job {job_id} ...", flush=True)
        try:
            results = common.poll_job(client, job_id)
        except errors.GenericError as err:
            print(f"Job {job_id} has failed: {err.message}", file=sys.stderr)
            failed += 1
            continue
        bad = bad or not all(results)
    if failed:
        print(f"{failed} job(s) failed while verifying the cluster.")
    return C.EXIT_FAILURE if failed or bad else C.EXIT_SUCCESS


def _invalid(command: str) -> errors.OpPrereqError:
    return errors.OpPrereqError(f"Command '{command}' is not valid.", C.ECODE_INVAL)


def cmd_queue(opts: argparse.Namespace) -> int:
    """``queue drain|undrain|info``."""
    client = common.get_client()
    action = opts.args[0]
    if action in ("drain", "undrain"):
        client.call("SetDrainFlag", action == "drain")
    elif action == "info":
        drained = client.call("QueryConfigValues", ["drain_flag"])[0]
        print("The drain flag is " + ("set" if drained else "unset"))
    else:
        raise _invalid(action)
    return C.EXIT_SUCCESS


def _show_watcher_pause(until: float | None) -> None:
    if until is None or until < time.time():
        print("The watcher is not paused.")
    else:
        print(f"The watcher is paused until {time.ctime(until)}.")


def cmd_watcher(opts: argparse.Namespace) -> int:
    """``watcher pause DURATION|continue|info``."""
    client = common.get_client()
    action = opts.args[0]
    if action == "continue":
        client.call("SetWatcherPause", None)
        print("The watcher is no longer paused.")
    elif action == "pause":
        if len(opts.args) < 2:
            raise errors.OpPrereqError("Missing pause duration", C.ECODE_INVAL)
        duration = optvalues.parse_timespec(opts.args[1])
        _show_watcher_pause(client.call("SetWatcherPause", time.time() + duration))
    elif action == "info":
        _show_watcher_pause(client.call("QueryConfigValues", ["watcher_pause"])[0])
    else:
        raise _invalid(action)
    return C.EXIT_SUCCESS


def cmd_search_tags(opts: argparse.Namespace) -> int:
    result = common.submit_or_send(opts, {"OP_ID": "OP_TAGS_SEARCH", "pattern": opts.args[0]})
    if not result:
        return C.EXIT_FAILURE
    for path, tag in sorted(result):
        print(f"{path} {tag}")
    return C.EXIT_SUCCESS


def _add_init(sub: Any) -> None:
    p = common.add_command(sub, "init", cmd_init, "Initialises a new cluster")
    p.add_argument("cluster_name", metavar="CLUSTER_NAME")
    p.add_argument("--node-name", help="This node's name (default: the host's FQDN)")
    p.add_argument("--node-ip", help="This node's address (default: its name resolved)")
    p.add_argument(
        "--master-ip",
        help="The cluster's master address (default: the cluster"
        " name resolved, else the node's address)",
    )
    p.add_argument("-s", "--secondary-ip", help="This node's secondary address")
    p.add_argument(
        "--primary-ip-version", default="4", help="The IP version of the primary addresses (4|6)"
    )
    p.add_argument(
        "--noded-port", type=int, default=C.DEFAULT_NODED_PORT, help="Port of the node daemons"
    )
    p.add_argument("-m", "--mac-prefix", default=C.DEFAULT_MAC_PREFIX)
    p.add_argument("--master-netdev", default="lo")
    p.add_argument("--master-netmask", type=int, help="The netmask of the master IP (CIDR bits)")
    p.add_argument(
        "--use-external-mip-script",
        type=boolean,
        help="Whether to bring the master IP up and down with the site's script (yes|no)",
    )
    p.add_argument("--enabled-hypervisors")
    p.add_argument("--enabled-disk-templates")
    p.add_argument("--file-storage-dir")
    p.add_argument("--shared-file-storage-dir")
    p.add_argument("--max-running-jobs", type=int)
    p.add_argument("-C", "--candidate-pool-size", type=int, help="Set the candidate pool size")
    p.add_argument("--install-image", help="The disk image helper VMs boot (a path or a URL)")
    p.add_argument("-B", "--backend-parameters", help="Default backend parameters")
    p.add_argument("-N", "--nic-parameters", help="Default NIC parameters")
    p.add_argument(
        "-H",
        "--hypervisor-parameters",
        action="append",
        help="Default hypervisor parameters (hv:k=v,...)",
    )
    p.add_argument(
        "-D",
        "--disk-parameters",
        dest="diskparams",
        action="append",
        help="Disk template parameters (template:k=v,...); Ganeti's defaults only",
    )
    p.add_argument("--uid-pool", help="User-id ranges for security_model=pool (1000-2000,3000)")
    p.add_argument(
        "--user-shutdown",
        dest="enabled_user_shutdown",
        type=boolean,
        help="Whether a shutdown from inside an instance shows as USER_down (yes|no)",
    )
    p.add_argument("--no-etc-hosts", action="store_true", help="Accepted for compatibility")
    p.add_argument("--no-ssh-init", action="store_true", help="Accepted for compatibility")
    cli_ipolicy.add_options(p, init=True)
    common.add_submit_options(p, dry_run=False)


def _add_tag_commands(sub: Any) -> None:
    tags.add_tag_commands(sub, C.TAG_CLUSTER, "", "cluster")
    p = common.add_command(
        sub,
        "search-tags",
        cmd_search_tags,
        "Searches the tags on all objects on the cluster for a given pattern (regex)",
    )
    common.add_args(p, "args", "PATTERN", 1, 1)
    common.add_priority_option(p)


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-cluster", "Manage the cluster")
    _add_init(sub)
    p = common.add_command(sub, "destroy", cmd_destroy, "Destroy the cluster")
    p.add_argument("--yes-do-it", action="store_true", help="Confirm the destruction")
    common.add_args(p, "args", "", 0, 0)
    for name, handler, text in (
        ("version", cmd_version, "Shows the cluster version"),
        ("getmaster", cmd_getmaster, "Shows the cluster master"),
        ("master-ping", cmd_master_ping, "Checks if the master is alive"),
        ("show-ispecs-cmd", cmd_show_ispecs_cmd, "Show the command line to re-create the cluster"),
    ):
        common.add_args(common.add_command(sub, name, handler, text), "args", "", 0, 0)
    p = common.add_command(sub, "info", cmd_info, "Show cluster configuration", aliases=["show"])
    # Ganeti shows roman numerals only with python3-roman installed; not here.
    p.add_argument("--roman", action="store_true", help="Accepted for compatibility")
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(sub, "verify", cmd_verify, "Verify the cluster")
    p.add_argument("--verbose", "-v", action="store_true")
    p.add_argument("--error-codes", action="store_true", help="Machine-parsable error codes")
    p.add_argument("--debug-simulate-errors", dest="simulate_errors", action="store_true")
    p.add_argument(
        "-I", "--ignore-errors", action="append", default=[], help="Error code to be ignored"
    )
    p.add_argument("--no-nplus1-mem", dest="skip_nplusone_mem", action="store_true",
                   help="Skip N+1 memory redundancy tests")  # fmt: skip
    p.add_argument("-g", "--node-group", dest="nodegroup", help="Node group (name or uuid)")
    clutter = "Verify that Ganeti did not clutter up the 'authorized_keys' file"
    p.add_argument("--verify-ssh-clutter", dest="verify_clutter", action="store_true", help=clutter)
    common.add_submit_options(p)
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(sub, "modify", cmd_modify, "Change cluster parameters")
    add_modify_options(p)
    common.add_args(p, "args", "", 0, 0)
    p = common.add_command(sub, "queue", cmd_queue, "Change queue properties")
    common.add_args(p, "args", "drain|undrain|info", 1, 1)
    p = common.add_command(sub, "watcher", cmd_watcher, "Change watcher properties")
    common.add_args(p, "args", "{pause <timespec>|continue|info}", 1, 2)
    _add_tag_commands(sub)
    renew_crypto.add_command(sub)
    cluster_disks.add_commands(sub)
    cluster_remote.add_commands(sub)
    p = common.add_command(sub, "rename", cmd_rename, "Renames the cluster")
    common.add_force(p)
    p.add_argument(
        "--dry-run", action="store_true", help="Only check the parameters, do not execute"
    )
    common.add_args(p, "args", "<new-name>", 1, 1)
    cluster_epo.add_command(sub)
    cluster_failover.add_command(sub)
    cluster_mip.add_commands(sub)
    p = common.add_command(
        sub, "redist-conf", cmd_redist_conf, "Push the cluster files to all nodes"
    )
    p.add_argument("--yes-do-it", action="store_true", help="Also when the queue is drained")
    common.add_submit_options(p)
    common.add_args(p, "args", "", 0, 0)
    common.add_not_built(
        sub,
        "gnt-cluster",
        [
            "upgrade",
        ],
    )
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
