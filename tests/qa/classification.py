"""Why each failing test of Ganeti's QA suite fails against Corral (one line each).

Keys are test names as the driver reports them: the exact name first
(``qa_node.TestNodeList #2``), then without its count, then without the disk
template (``qa_instance.TestInstanceAddFile``).  A test that did not run
because another failed is classified by :mod:`tests.qa.report` as blocked.
For a deviation (b): the command, what Ganeti does and what Corral does, and
where Ganeti does it (paths in Ganeti 3.0.2's source).
"""

from __future__ import annotations

import re

CATEGORIES = {
    "a": "Corral lacks the feature",
    "b": "Corral deviates from Ganeti",
    "c": "needs what this machine lacks",
    "d": "needs master failover, OS images or instance communication",
    "e": "a defect of the suite: it fails against Ganeti 3.0.2 too",
}
_SSCONF = (
    "b",
    "`cat /var/lib/ganeti/ssconf_instance_list` (qa_instance_utils.CheckSsconfInstanceList):"
    " Ganeti writes ssconf_instance_list (src/Ganeti/WConfd/Ssconf.hs, lib/ssconf.py"
    " SS_INSTANCE_LIST), Corral has no such file; the instance is created but the test fails",
)
_ORDER = (
    "b",
    "`gnt-<object> list -o name NAME...` must answer in the requested order and, without"
    " names, NiceSorted (src/Ganeti/Query/Query.hs genericQuery, 229-232); Corral answers in"
    " its own order when names are given",
)
_RAPI_PEM_LEFT = (
    "b",
    "`gnt-cluster verify` fails: 'File /var/lib/ganeti/rapi.pem should not exist on"
    " node2' once qa_node.TestNodeModify took node2 out of the candidates; Ganeti's verify"
    " expects rapi.pem on every node (lib/cmdlib/common.py ComputeAncillaryFiles:"
    " ALL_CERT_FILES in files_all; only config.data is candidate-only)",
)
TABLE: dict[str, tuple[str, str]] = {
    "qa_instance.TestRecreateDisks[diskless]": (
        "e",
        "qa_instance.GetInstanceInfo on an instance without disks (see"
        " TestInstanceRenameAndBack[diskless])",
    ),
    "qa_instance.TestInstanceRenameAndBack[diskless]": (
        "e",
        "qa_instance.GetInstanceInfo iterates the 'Disks' of `gnt-instance info`, which"
        " for an instance without disks is an empty line ('Disks:', YAML null) in Ganeti's"
        " output too (lib/cli.py _SerializeGenericInfo); TypeError",
    ),
    "qa_env.TestGanetiCommands": (
        "a",
        "no gnt-storage; Corral's daemons are corral-noded (confd inside; ganeti-confd"
        " says so), corral-rapi and corral-masterd, not ganeti-noded, ganeti-rapi,"
        " ganeti-luxid, ganeti-wconfd",
    ),
    "qa_instance.TestInstanceModify": (
        "d",
        "`gnt-instance modify --os-parameters os-image=URL`: OS images (design-os)",
    ),
    "qa_instance.TestInstanceModifyDisks": (
        "e",
        "`gnt-instance modify --disk remove` of a running instance without --hotplug:"
        " Ganeti refuses it too (lib/cmdlib/instance_set_params.py 270-273); the test is"
        " off in Ganeti's qa-sample.json",
    ),
    "qa_instance.TestInstanceDeviceNames": (
        "e",
        "`gnt-instance modify --disk=test_device:remove` of a running instance without"
        " --hotplug: Ganeti refuses it too (lib/cmdlib/instance_set_params.py 270-273)",
    ),
    "qa_instance.TestInstanceModifyPrimaryAndBack": (
        "a",
        "`gnt-instance modify --new-primary` (a file instance's primary node) is not built",
    ),
    "qa_instance.TestRecreateDisks[file]": (
        "a",
        "follows from TestInstanceModifyPrimaryAndBack[file] (--new-primary): the disk"
        " files it copied to node2 are left there, and creating a file disk over an"
        " existing file fails in Ganeti too (lib/storage/filestorage.py 74, O_EXCL)",
    ),
    "qa_instance.TestRecreateDisks[sharedfile]": (
        "e",
        "qa_instance._DestroyInstanceDisks removes the instance's directory in the"
        " *file* storage directory for sharedfile instances too, so the sharedfile disks"
        " stay and recreating them fails, as in Ganeti (lib/storage/filestorage.py 74)",
    ),
    "qa_node.TestNodeList": _ORDER,
    "qa_group.TestGroupList": _ORDER,
    "qa_instance.TestInstanceList": (
        "b",
        "`gnt-instance list -o hv/<param>,...`: Ganeti knows the hv/ field of every"
        " hypervisor's parameter (lib/query.py 2092-2096, over"
        " constants.HVS_PARAMETER_TYPES); Corral knows those of its hypervisors only"
        " ('Queried for unknown fields hv/bootloader_args, ...', exit 1)",
    ),
    "qa_instance.TestInstanceListFields": (
        "b",
        "`gnt-instance list-fields <every field>`: the hv/ fields of hypervisors Corral"
        " lacks are unknown to it (lib/query.py 2092-2096)",
    ),
    "qa_job.TestJobCancellation": (
        "b",
        "`gnt-job cancel` of a second `gnt-debug delay`: Ganeti's LUTestDelay locks the"
        " master node (lib/cmdlib/test.py 126-127), so the job waits and can be"
        " cancelled; Corral's delay takes no lock and already runs ('Job no longer waiting')",
    ),
    "qa_cluster.TestClusterRenewCrypto": (
        "b",
        "by design: its SSH key part (_TestSSHKeyChanges: `--new-ssh-keys --ssh-key-type=dsa`,"
        " then a login with /root/.ssh/id_dsa) needs a cluster that manages its nodes' SSH keys"
        " (modify_ssh_setup); Corral's nodes join over noded's TLS without SSH, and Ganeti"
        " 3.0.2 without modify_ssh_setup leaves the keys alone in the same way (lib/cmdlib/"
        "cluster/__init__.py 216-222); every certificate, key and secret renewal before it"
        " passes",
    ),
    "qa_cluster.TestClusterVerify": ("a", "`gnt-cluster verify-disks` is not built"),
    "qa_cluster.TestClusterVerify #2": _RAPI_PEM_LEFT,
    "qa_cluster.TestClusterVerify #3": _RAPI_PEM_LEFT,
    "qa_cluster.TestClusterVerify #4": _RAPI_PEM_LEFT,
    "qa_cluster.TestClusterModifyBe": (
        "b",
        "`gnt-cluster modify -B auto_balance=1` must fail: Ganeti takes only true/false"
        " for a boolean (lib/utils/__init__.py ForceDictType, VTYPE_BOOL); Corral accepts 1",
    ),
    "qa_cluster.TestClusterModifyDiskTemplates": _SSCONF,
    "qa_cluster.TestClusterModifyFileStorageDir": (
        "b",
        "`gnt-cluster modify --file-storage-dir=/boot/` is accepted by Ganeti (only"
        " `gnt-cluster verify` then fails: lib/cmdlib/cluster/verify.py"
        " _VerifyFileStoragePaths, lib/storage/filestorage.py); Corral refuses it",
    ),
    "qa_cluster.TestClusterModifySharedFileStorageDir": (
        "b",
        "`gnt-cluster modify --shared-file-storage-dir=/boot/`: as --file-storage-dir",
    ),
    "qa_cluster.TestClusterModifyInstallImage": (
        "d",
        "`gnt-cluster modify --install-image`: OS images (design-os)",
    ),
    "qa_cluster.TestClusterRename": ("a", "`gnt-cluster rename` is not built"),
    "qa_cluster.TestClusterCopyfile": ("a", "`gnt-cluster copyfile` is not built"),
    "qa_cluster.TestClusterCommand": ("a", "`gnt-cluster command` is not built"),
    "qa_cluster.TestClusterMasterFailover": ("d", "master failover (gnt-debug wconfd)"),
    "qa_cluster.TestClusterMasterFailoverWithDrainedQueue": (
        "d",
        "master failover (node2 has no job queue directory: not a master candidate's)",
    ),
    "qa_cluster.TestClusterOob": (
        "a",
        "out-of-band management: `gnt-cluster verify` does not check the OOB program",
    ),
    "qa_cluster.TestInstanceCommunication": (
        "d",
        "instance communication (`gnt-cluster modify --instance-communication-network`)",
    ),
    "qa_instance.TestInstanceCommunication": (
        "d",
        "instance communication (`gnt-cluster modify --instance-communication-network`)",
    ),
    "qa_rapi.TestEmptyCluster": (
        "b",
        "PUT /2/modify with the cluster's own parameters (prealloc_wipe_disks=False):"
        " Ganeti accepts them (lib/cmdlib/cluster/__init__.py LUClusterSetParams);"
        " Corral answers 400 'not supported by Corral yet'",
    ),
    "qa_os.TestOsValid": (
        "b",
        "GET /2/os lists a hidden OS: Ganeti leaves out hidden, blacklisted and invalid"
        " OSes there (lib/cmdlib/operating_system.py 176, legacy name/variants query)",
    ),
    "qa_os.TestOsModifyValid": (
        "b",
        "`gnt-os modify -H xen-pvm:...,xen-hvm:...`: Ganeti stores OS hypervisor"
        " parameters for any hypervisor (lib/cmdlib/cluster/__init__.py 1365-1380);"
        " Corral refuses hypervisors it lacks",
    ),
    "qa_node.TestOutOfBand": (
        "e",
        "`gnt-node modify -O no --node-powered yes NODE` without --force asks 'You are setting"
        " this node online manually ... continue?' (lib/client/gnt_node.py 994-1001); the suite"
        " runs it over ssh without a terminal, where Ganeti's AskUser answers no"
        " (lib/cli.py 640-648) and the command exits 1, as Corral's does",
    ),
    "qa_network.TestNetworkAddRemove": ("a", "gnt-network"),
    "qa_network.TestNetworkConnect": ("a", "gnt-network"),
    "qa_network.TestNetworkTags": ("a", "gnt-network"),
    "qa_filters.TestAdHocReasonRateLimit": (
        "b",
        "a job whose reason trail holds 'rate-limit:1:...' must wait while one such job"
        " runs (src/Ganeti/JQScheduler/ReasonRateLimiting.hs); Corral runs it",
    ),
    "qa_node.TestNodeReadd": (
        "b",
        "`gnt-node add --no-ssh-key-check --readd`: Ganeti accepts the option"
        " (lib/client/gnt_node.py 250); Corral refuses it as an SSH option",
    ),
    "qa_node.TestNodeModify": _RAPI_PEM_LEFT,
    "qa_instance.TestInstanceAddDiskless": _SSCONF,
    "qa_instance.TestInstanceAddFile": _SSCONF,
    "qa_instance.TestInstanceAddSharedFile": _SSCONF,
    "qa_instance.TestInstanceCreationRestrictedByDiskTemplates": _SSCONF,
    "qa_cluster.TestClusterEpo": ("a", "`gnt-cluster epo` is not built"),
    "qa_cluster.TestClusterRepairDiskSizes": ("a", "`gnt-cluster repair-disk-sizes`"),
    "qa_instance.TestSecretOsParams": (
        "b",
        "by design: the test greps the job file /var/lib/ganeti/queue/job-<id> for"
        ' \'"param1":"<redacted>"\' (Corral\'s job queue is the SQLite queue.db, where the'
        " value is redacted too), then wants `gnt-debug test-osparams` to print the secret"
        " values back, which Ganeti's LUTestOsParams writes into the job's log on disk;"
        " Corral's job log scrubs them, as secret values never reach the disk",
    ),
    "qa_performance.TestParallelMaxInstanceCreationPerformance": (
        "b",
        "`gnt-instance add --opportunistic-locking`: Ganeti's option (lib/cli_opts.py,"
        " lib/cmdlib/instance_create.py 374-461); Corral refuses it",
    ),
    "qa_performance.TestParallelNodeCountInstanceCreationPerformance": (
        "b",
        "`gnt-instance add --opportunistic-locking` (as the test above)",
    ),
    "qa_performance.CreateAllInstances": (
        "b",
        "`gnt-instance add --opportunistic-locking` (as the tests above)",
    ),
}


def classify(test: str) -> tuple[str, str] | None:
    """``(category, text)`` of a failing ``test``, None if not classified."""
    for key in (test, re.sub(r" #\d+$", "", test), re.sub(r"\[\w+\]( #\d+)?$", "", test)):
        if key in TABLE:
            return TABLE[key]
    return None
