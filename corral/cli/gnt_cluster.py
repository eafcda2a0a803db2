"""gnt-cluster: init, destroy, info, verify, modify, version, getmaster, queue,
and the cluster's tags."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from corral import constants as C
from corral import errors
from corral.cli import common
from corral.cli.info import generic_info_lines
from corral.cli.table import format_time
from corral.paths import Paths


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
    )
    if opts.enabled_hypervisors:
        init.enabled_hypervisors = opts.enabled_hypervisors.split(",")
    if opts.enabled_disk_templates:
        init.enabled_disk_templates = opts.enabled_disk_templates.split(",")
    if opts.max_running_jobs:
        init.max_running_jobs = opts.max_running_jobs
    init.beparams = common.parse_kv(opts.backend_parameters or "")
    init.nicparams = common.parse_kv(opts.nic_parameters or "")
    init.hvparams = _hv_options(opts.hypervisor_parameters)
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
        out.setdefault(hv, {}).update(common.parse_kv(params))
    return out


def cmd_destroy(opts: argparse.Namespace) -> int:
    from corral import bootstrap

    if not opts.yes_do_it:
        print(
            "Destroying a cluster is irreversible. If you really want to destroy this"
            " cluster, supply the --yes-do-it option.",
            file=sys.stderr,
        )
        return C.EXIT_FAILURE
    paths = common.cluster_paths()
    common.submit_or_send(opts, {"OP_ID": "OP_CLUSTER_DESTROY"})
    bootstrap.destroy_cluster_files(paths)
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
    paths = common.cluster_paths()
    try:
        print(paths.ssconf_file("master_node").read_text().strip())
    except OSError:
        print(common.get_client().call("QueryConfigValues", ["master_node"])[0])
    return C.EXIT_SUCCESS


def _params_block(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(params.items())}


def cluster_info_items(info: dict[str, Any]) -> list[tuple[str, Any]]:
    """gnt-cluster info's sections, in Ganeti's order."""
    tags = ", ".join(sorted(info["tags"])) or "(none)"
    enabled = info["enabled_hypervisors"]
    return [
        ("Cluster name", info["name"]),
        ("Cluster UUID", info["uuid"]),
        ("Creation time", format_time(info["ctime"])),
        ("Modification time", format_time(info["mtime"])),
        ("Master node", info["master"]),
        ("Architecture (this node)", f"{info['architecture'][0]} ({info['architecture'][1]})"),
        ("Tags", tags),
        ("Default hypervisor", info["default_hypervisor"]),
        ("Enabled hypervisors", ", ".join(enabled)),
        ("Hypervisor parameters", {hv: info["hvparams"].get(hv, {}) for hv in enabled}),
        ("OS-specific hypervisor parameters", info["os_hvp"]),
        ("OS parameters", info["osparams"]),
        ("Hidden OSes", ", ".join(info["hidden_os"])),
        ("Blacklisted OSes", ", ".join(info["blacklisted_os"])),
        (
            "Cluster parameters",
            [
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
                ("lvm reserved volumes", "(none)"),
                ("drbd usermode helper", info["drbd_usermode_helper"]),
                ("file storage path", info["file_storage_dir"]),
                ("shared file storage path", info["shared_file_storage_dir"]),
                ("gluster storage path", info["gluster_storage_dir"]),
                ("maintenance of node health", info["maintain_node_health"]),
                ("uid pool", ", ".join(f"{a}-{b}" for a, b in info["uid_pool"])),
                ("default instance allocator", info["default_iallocator"]),
                ("default instance allocator parameters", info["default_iallocator_params"]),
                ("primary ip version", info["primary_ip_version"]),
                ("preallocation wipe disks", info["prealloc_wipe_disks"]),
                (
                    "OS search path",
                    ", ".join(str(p) for p in common.cluster_paths().os_search_path),
                ),
                ("enabled disk templates", ", ".join(info["enabled_disk_templates"])),
                ("install image", info["install_image"]),
                ("instance communication network", info["instance_communication_network"]),
                ("compression tools", ", ".join(info["compression_tools"])),
                ("enabled user shutdown", info["enabled_user_shutdown"]),
            ],
        ),
        ("Default node parameters", _params_block(info["ndparams"])),
        ("Default instance parameters", info["beparams"]),
        ("Default nic parameters", info["nicparams"]),
        ("Default disk parameters", info["diskparams"]),
        ("Instance policy - limits for instances", info["ipolicy"]),
    ]


def cmd_info(opts: argparse.Namespace) -> int:
    info = common.get_client().call("QueryClusterInfo")
    print("\n".join(generic_info_lines(cluster_info_items(info))))
    return C.EXIT_SUCCESS


def cmd_verify(opts: argparse.Namespace) -> int:
    op = {
        "OP_ID": "OP_CLUSTER_VERIFY",
        "verbose": opts.verbose,
        "error_codes": opts.error_codes,
        "debug_simulate_errors": opts.simulate_errors,
        "ignore_errors": opts.ignore_errors.split(",") if opts.ignore_errors else [],
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
        print(f"{failed} job(s) failed while verifying the cluster.", file=sys.stderr)
    return C.EXIT_FAILURE if failed or bad else C.EXIT_SUCCESS


def cmd_modify(opts: argparse.Namespace) -> int:
    op: dict[str, Any] = {"OP_ID": "OP_CLUSTER_SET_PARAMS"}
    for name in (
        "max_running_jobs",
        "max_tracked_jobs",
        "candidate_pool_size",
        "mac_prefix",
        "master_netdev",
        "master_netmask",
        "file_storage_dir",
    ):
        value = getattr(opts, name)
        if value is not None:
            op[name] = value
    if opts.enabled_hypervisors:
        op["enabled_hypervisors"] = opts.enabled_hypervisors.split(",")
    if opts.enabled_disk_templates:
        op["enabled_disk_templates"] = opts.enabled_disk_templates.split(",")
    if opts.hypervisor_parameters:
        op["hvparams"] = _hv_options(opts.hypervisor_parameters)
    if opts.backend_parameters:
        op["beparams"] = common.parse_kv(opts.backend_parameters)
    if opts.nic_parameters:
        op["nicparams"] = common.parse_kv(opts.nic_parameters)
    if len(op) == 1:
        print("Please give at least one of the parameters.", file=sys.stderr)
        return C.EXIT_FAILURE
    common.submit_or_send(opts, op)
    return C.EXIT_SUCCESS


def cmd_queue(opts: argparse.Namespace) -> int:
    client = common.get_client()
    if opts.action == "drain":
        client.call("SetDrainFlag", True)
    elif opts.action == "undrain":
        client.call("SetDrainFlag", False)
    else:
        drained = client.call("QueryConfigValues", ["drain_flag"])[0]
        print("The drain flag is " + ("set" if drained else "unset"))
    return C.EXIT_SUCCESS


def cmd_list_tags(opts: argparse.Namespace) -> int:
    for tag in sorted(common.get_client().call("QueryTags", C.TAG_CLUSTER, "")):
        print(tag)
    return C.EXIT_SUCCESS


def _tags_from(opts: argparse.Namespace) -> list[str]:
    tags = list(opts.tags)
    if opts.tags_source:
        source = sys.stdin if opts.tags_source == "-" else open(opts.tags_source)  # noqa: SIM115
        with source:
            tags += [line.strip() for line in source if line.strip()]
    return tags


def _change_tags(opts: argparse.Namespace, op_id: str, empty: str) -> int:
    tags = _tags_from(opts)
    if not tags:
        raise errors.OpPrereqError(empty, C.ECODE_INVAL)
    common.submit_or_send(opts, {"OP_ID": op_id, "kind": C.TAG_CLUSTER, "name": "", "tags": tags})
    return C.EXIT_SUCCESS


def cmd_add_tags(opts: argparse.Namespace) -> int:
    return _change_tags(opts, "OP_TAGS_SET", "No tags to be added")


def cmd_remove_tags(opts: argparse.Namespace) -> int:
    return _change_tags(opts, "OP_TAGS_DEL", "No tags to be removed")


def cmd_search_tags(opts: argparse.Namespace) -> int:
    result = common.submit_or_send(opts, {"OP_ID": "OP_TAGS_SEARCH", "pattern": opts.pattern})
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
        "--noded-port", type=int, default=C.DEFAULT_NODED_PORT, help="Port of the node daemons"
    )
    p.add_argument("-m", "--mac-prefix", default=C.DEFAULT_MAC_PREFIX)
    p.add_argument("--master-netdev", default="lo")
    p.add_argument("--enabled-hypervisors")
    p.add_argument("--enabled-disk-templates")
    p.add_argument("--file-storage-dir")
    p.add_argument("--max-running-jobs", type=int)
    p.add_argument("-B", "--backend-parameters", help="Default backend parameters")
    p.add_argument("-N", "--nic-parameters", help="Default NIC parameters")
    p.add_argument(
        "-H",
        "--hypervisor-parameters",
        action="append",
        help="Default hypervisor parameters (hv:k=v,...)",
    )
    p.add_argument("--no-etc-hosts", action="store_true", help="Accepted for compatibility")
    p.add_argument("--no-ssh-init", action="store_true", help="Accepted for compatibility")
    common.add_submit_options(p, dry_run=False)


def _add_tag_commands(sub: Any) -> None:
    common.add_command(sub, "list-tags", cmd_list_tags, "List the tags of the cluster")
    for name, handler, text in (
        ("add-tags", cmd_add_tags, "Add tags to the cluster"),
        ("remove-tags", cmd_remove_tags, "Remove tags from the cluster"),
    ):
        p = common.add_command(sub, name, handler, text)
        p.add_argument("--from", dest="tags_source", help="Read tags from FILE ('-': stdin)")
        p.add_argument("tags", nargs="*", metavar="TAG")
        common.add_submit_options(p)
    p = common.add_command(sub, "search-tags", cmd_search_tags, "Search tags by a regex")
    p.add_argument("pattern", metavar="PATTERN")


def build_parser() -> common.Parser:
    parser, sub = common.make_parser("gnt-cluster", "Manage the cluster")
    _add_init(sub)
    p = common.add_command(sub, "destroy", cmd_destroy, "Destroy the cluster")
    p.add_argument("--yes-do-it", action="store_true", help="Confirm the destruction")
    common.add_command(sub, "version", cmd_version, "Show the versions")
    common.add_command(sub, "getmaster", cmd_getmaster, "Show the master node's name")
    common.add_command(sub, "info", cmd_info, "Show cluster configuration", aliases=["show"])
    p = common.add_command(sub, "verify", cmd_verify, "Verify the cluster")
    p.add_argument("--verbose", "-v", action="store_true")
    p.add_argument("--error-codes", action="store_true", help="Machine-parsable error codes")
    p.add_argument("--debug-simulate-errors", dest="simulate_errors", action="store_true")
    p.add_argument("-I", "--ignore-errors", help="Error codes to report as warnings")
    common.add_submit_options(p)
    p = common.add_command(sub, "modify", cmd_modify, "Change cluster parameters")
    p.add_argument("--max-running-jobs", type=int)
    p.add_argument("--max-tracked-jobs", type=int)
    p.add_argument("-C", "--candidate-pool-size", type=int)
    p.add_argument("-m", "--mac-prefix")
    p.add_argument("--master-netdev")
    p.add_argument("--master-netmask", type=int)
    p.add_argument("--file-storage-dir")
    p.add_argument("--enabled-hypervisors")
    p.add_argument("--enabled-disk-templates")
    p.add_argument("-H", "--hypervisor-parameters", action="append")
    p.add_argument("-B", "--backend-parameters")
    p.add_argument("-N", "--nic-parameters")
    common.add_submit_options(p)
    p = common.add_command(sub, "queue", cmd_queue, "Change or show the job queue drain flag")
    p.add_argument("action", choices=["drain", "undrain", "info"])
    _add_tag_commands(sub)
    return parser


main, cli = common.entry_points(build_parser)


if __name__ == "__main__":
    cli()
