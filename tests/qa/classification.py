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
        "`ganeti-watcher --version` (every other command answers --version: gnt-storage,"
        " and Ganeti's daemon names, which start Corral's daemons)",
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
    "qa_instance.TestRecreateDisks[file]": (
        "e",
        "follows from TestInstanceModifyDisks[file] and TestInstanceDeviceNames[file] (e): the"
        " two disks they added and could not remove are left on the instance, the test's"
        " `rm -rf` of the instance's directory takes their files and it recreates disks 0"
        " and 1 only, so `activate-disks` finds disks 2 and 3 missing, as Ganeti's would",
    ),
    "qa_instance.TestRecreateDisks[sharedfile]": (
        "e",
        "qa_instance._DestroyInstanceDisks removes the instance's directory in the"
        " *file* storage directory for sharedfile instances too, so the sharedfile disks"
        " stay and recreating them fails, as in Ganeti (lib/storage/filestorage.py 74)",
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
    "qa_cluster.TestClusterRename": (
        "d",
        "renaming back to cluster.example.com: its address (127.0.0.100) still answers, on"
        " the namespace's loopback, so the rename refuses it as Ganeti's does"
        " (LUClusterRename's TcpPing, refused counts); Ganeti takes the master IP down on"
        " rename, Corral brings no master IP up or down (master IP handling comes with"
        " master failover)",
    ),
    "qa_cluster.TestClusterBurnin": (
        "e",
        "BurnAddDisks/BurnRemoveDisks detach and remove disks of running instances with"
        " hotplug_if_possible; the fake hypervisor cannot hotplug (Ganeti's neither:"
        " lib/hypervisor/hv_base.py HotplugSupported), so Ganeti 3.0.2 refuses the removal"
        " too (lib/cmdlib/instance_set_params.py 270-273; Corral the detach before it as"
        " well); every other step passes, its confd queries included",
    ),
    "qa_cluster.TestClusterMasterFailover": ("d", "master failover (gnt-debug wconfd)"),
    "qa_cluster.TestClusterMasterFailoverWithDrainedQueue": (
        "d",
        "master failover (node2 has no job queue directory: not a master candidate's)",
    ),
    "qa_instance.TestInstanceCommunication": (
        "e",
        "the test reads `gnt-instance list --separator=: -o nic.names` and splits it at every"
        " ':', also those of the NIC's name `ganeti:communication:<instance>`"
        " (qa/qa_instance.py 177-182, 1437-1442; Ganeti's list does not escape the"
        " separator), so it never finds the NIC; past that it asks for the field"
        " `nic.network.name`, which Ganeti's list does not know, wants the NIC's tap from"
        " `ip route`, which the fake hypervisor has not (Ganeti's neither), and three lines"
        " from `ip address show dev TAP`, which current iproute2 prints in four",
    ),
    "qa_node.TestOutOfBand": (
        "e",
        "`gnt-node modify -O no --node-powered yes NODE` without --force asks 'You are setting"
        " this node online manually ... continue?' (lib/client/gnt_node.py 994-1001); the suite"
        " runs it over ssh without a terminal, where Ganeti's AskUser answers no"
        " (lib/cli.py 640-648) and the command exits 1, as Corral's does",
    ),
    "qa_instance.TestSecretOsParams": (
        "b",
        "by design: the test greps the job file /var/lib/ganeti/queue/job-<id> for"
        ' \'"param1":"<redacted>"\' (Corral\'s job queue is the SQLite queue.db, where the'
        " value is redacted too), then wants `gnt-debug test-osparams` to print the secret"
        " values back, which Ganeti's LUTestOsParams writes into the job's log on disk;"
        " Corral's job log scrubs them, as secret values never reach the disk",
    ),
}


def classify(test: str) -> tuple[str, str] | None:
    """``(category, text)`` of a failing ``test``, None if not classified."""
    for key in (test, re.sub(r" #\d+$", "", test), re.sub(r"\[\w+\]( #\d+)?$", "", test)):
        if key in TABLE:
            return TABLE[key]
    return None
