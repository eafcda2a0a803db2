"""The RAPI client's instance calls, each written once for both transports
(see client_core). Calls that submit a job return its id as an int."""

from __future__ import annotations

from corral.rapi.client_core import API, Request, args, call, given, job, path, tag_args

TYPE_CHECKING = False  # not typing's: see corral/cli/__init__.py
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    Dict = dict[str, Any]

INSTANCE = API + "/instances/{}"
#: ``__version__`` of the instance creation body (feature ``instance-create-reqv1``)
CREATE_VERSION = 1


def _dry_run(dry_run: bool | None, reason: str | None) -> list[tuple[str, object]]:
    return args(("dry-run", dry_run or None), reason=reason)


def _allocation(
    mode: str, name: str, disk_template: str, disks: Any, nics: Any, extra: Dict
) -> Dict:
    """One instance's creation fields: the required ones and ``extra``."""
    body = {
        "mode": mode,
        "name": name,
        "disk_template": disk_template,
        "disks": disks,
        "nics": nics,
    }
    clash = sorted(set(body) & set(extra))
    if clash:
        raise ValueError(f"Give {', '.join(clash)} as arguments, not as keywords")
    body.update(extra)
    return body


class InstanceCalls:
    """The calls of ``/2/instances`` and below."""

    @call
    def get_instances(self, bulk: bool = False, reason: str | None = None) -> Request[list[Any]]:
        """The instance names, or with ``bulk`` a dict per instance."""
        query = args(("bulk", bulk or None), reason=reason)
        return Request("GET", API + "/instances", query, decode=None if bulk else _names)

    @call
    def get_instance(self, instance: str, reason: str | None = None) -> Request[Dict]:
        """One instance's dict (as an item of the bulk list)."""
        return Request("GET", path(INSTANCE, instance), args(reason=reason))

    @call
    def get_instance_info(
        self, instance: str, static: bool | None = None, reason: str | None = None
    ) -> Request[int]:
        """Detailed information (``gnt-instance info``); a job, whose result has it."""
        query = args(("static", static), reason=reason)
        return job("GET", path(INSTANCE + "/info", instance), query)

    @call
    def create_instance(
        self,
        /,
        mode: str,
        name: str,
        disk_template: str,
        disks: list[Dict],
        nics: list[Dict],
        dry_run: bool = False,
        reason: str | None = None,
        **kwargs: Any,
    ) -> Request[int]:
        """Create an instance (OpInstanceCreate's fields as keywords, e.g.
        ``os_type``, ``pnode``, ``beparams``, ``osparams_secret``); a job."""
        body = _allocation(mode, name, disk_template, disks, nics, kwargs)
        body["__version__"] = CREATE_VERSION
        return job("POST", API + "/instances", _dry_run(dry_run, reason), body)

    @call
    def instances_multi_alloc(
        self,
        /,
        instances: list[Dict],
        dry_run: bool = False,
        reason: str | None = None,
        **kwargs: Any,
    ) -> Request[int]:
        """Allocate several instances at once (``instances``: creation bodies); a job."""
        body = {"instances": instances, **kwargs}
        return job("POST", API + "-multi-alloc", _dry_run(dry_run, reason), body)

    @call
    def delete_instance(
        self, /, instance: str, dry_run: bool = False, reason: str | None = None, **kwargs: Any
    ) -> Request[int]:
        """Remove an instance (keywords: OpInstanceRemove's, e.g. ``shutdown_timeout``); a job."""
        return job("DELETE", path(INSTANCE, instance), _dry_run(dry_run, reason), kwargs or None)

    @call
    def modify_instance(
        self, /, instance: str, reason: str | None = None, **kwargs: Any
    ) -> Request[int]:
        """Change instance parameters (OpInstanceSetParams's fields); a job."""
        return job("PUT", path(INSTANCE + "/modify", instance), args(reason=reason), kwargs)

    @call
    def startup_instance(
        self,
        instance: str,
        dry_run: bool = False,
        no_remember: bool = False,
        force: bool = False,
        reason: str | None = None,
    ) -> Request[int]:
        """Start an instance; a job."""
        query = args(
            ("dry-run", dry_run or None),
            ("no_remember", no_remember or None),
            ("force", force or None),
            reason=reason,
        )
        return job("PUT", path(INSTANCE + "/startup", instance), query)

    @call
    def shutdown_instance(
        self,
        /,
        instance: str,
        dry_run: bool = False,
        no_remember: bool = False,
        timeout: int | None = None,
        reason: str | None = None,
        **kwargs: Any,
    ) -> Request[int]:
        """Stop an instance (``timeout``: seconds before a hard stop); a job."""
        query = args(
            ("dry-run", dry_run or None), ("no_remember", no_remember or None), reason=reason
        )
        body = {**given(timeout=timeout), **kwargs}
        return job("PUT", path(INSTANCE + "/shutdown", instance), query, body or None)

    @call
    def reboot_instance(
        self,
        /,
        instance: str,
        reboot_type: str | None = None,
        ignore_secondaries: bool | None = None,
        dry_run: bool = False,
        shutdown_timeout: int | None = None,
        reason: str | None = None,
        **kwargs: Any,
    ) -> Request[int]:
        """Reboot an instance (``reboot_type``: soft, hard or full); a job."""
        query = args(
            ("type", reboot_type),
            ("ignore_secondaries", ignore_secondaries),
            ("dry-run", dry_run or None),
            reason=reason,
        )
        body = {**given(shutdown_timeout=shutdown_timeout), **kwargs}
        return job("POST", path(INSTANCE + "/reboot", instance), query, body or None)

    @call
    def reinstall_instance(
        self,
        instance: str,
        os: str | None = None,
        no_startup: bool = False,
        osparams: Dict | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Reinstall an instance (stop, reinstall, start unless ``no_startup``); a job."""
        body = {"start": not no_startup, **given(os=os, osparams=osparams)}
        return job("POST", path(INSTANCE + "/reinstall", instance), args(reason=reason), body)

    @call
    def rename_instance(
        self,
        instance: str,
        new_name: str,
        ip_check: bool | None = None,
        name_check: bool | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Rename an instance; a job."""
        body = {"new_name": new_name, **given(ip_check=ip_check, name_check=name_check)}
        return job("PUT", path(INSTANCE + "/rename", instance), args(reason=reason), body)

    @call
    def grow_instance_disk(
        self,
        instance: str,
        disk: int,
        amount: int,
        wait_for_sync: bool | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Grow disk ``disk`` by ``amount`` MiB; a job."""
        body = {"amount": amount, **given(wait_for_sync=wait_for_sync)}
        target = path(INSTANCE + "/disk/{}/grow", instance, disk)
        return job("POST", target, args(reason=reason), body)

    @call
    def activate_instance_disks(
        self, instance: str, ignore_size: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Activate an instance's disks; a job."""
        query = args(("ignore_size", ignore_size or None), reason=reason)
        return job("PUT", path(INSTANCE + "/activate-disks", instance), query)

    @call
    def deactivate_instance_disks(
        self, instance: str, force: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Deactivate an instance's disks; a job."""
        query = args(("force", force or None), reason=reason)
        return job("PUT", path(INSTANCE + "/deactivate-disks", instance), query)

    @call
    def recreate_instance_disks(
        self,
        instance: str,
        disks: list[Any] | None = None,
        nodes: list[str] | None = None,
        iallocator: str | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Recreate an instance's disks (all, or those of ``disks``); a job."""
        body = given(disks=disks, nodes=nodes, iallocator=iallocator)
        return job("POST", path(INSTANCE + "/recreate-disks", instance), args(reason=reason), body)

    @call
    def replace_instance_disks(
        self,
        instance: str,
        disks: Sequence[int] | None = None,
        mode: str = "replace_auto",
        remote_node: str | None = None,
        iallocator: str | None = None,
        early_release: bool | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Replace an instance's disks (``mode``: replace_on_primary,
        replace_on_secondary, replace_new_secondary, replace_auto); a job."""
        listed = None if disks is None else ",".join(str(idx) for idx in disks)
        query = args(
            ("mode", mode),
            ("disks", listed),
            ("remote_node", remote_node),
            ("iallocator", iallocator),
            ("early_release", early_release),
            reason=reason,
        )
        return job("POST", path(INSTANCE + "/replace-disks", instance), query)

    @call
    def migrate_instance(
        self,
        instance: str,
        mode: str | None = None,
        cleanup: bool | None = None,
        target_node: str | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Live-migrate an instance (``mode``: live or non-live); a job."""
        body = given(mode=mode, cleanup=cleanup, target_node=target_node)
        return job("PUT", path(INSTANCE + "/migrate", instance), args(reason=reason), body)

    @call
    def failover_instance(
        self,
        instance: str,
        iallocator: str | None = None,
        ignore_consistency: bool | None = None,
        target_node: str | None = None,
        reason: str | None = None,
    ) -> Request[int]:
        """Fail an instance over to another node; a job."""
        body = given(
            iallocator=iallocator, ignore_consistency=ignore_consistency, target_node=target_node
        )
        return job("PUT", path(INSTANCE + "/failover", instance), args(reason=reason), body)

    @call
    def prepare_export(self, instance: str, mode: str, reason: str | None = None) -> Request[int]:
        """Prepare an export (``mode``: local or remote); a job. A remote
        one's result is ``{handshake, x509_key_name, x509_ca}``."""
        query = args(("mode", mode), reason=reason)
        return job("PUT", path(INSTANCE + "/prepare-export", instance), query)

    @call
    def export_instance(
        self,
        instance: str,
        mode: str,
        destination: Any,
        shutdown: bool | None = None,
        remove_instance: bool | None = None,
        x509_key_name: Any = None,
        destination_x509_ca: str | None = None,
        compress: str | None = None,
        reason: str | None = None,
        long_sleep: bool | None = None,
    ) -> Request[int]:
        """Export an instance (``destination``: a node, or the remote disks'
        info); a job. ``long_sleep`` (not in Ganeti's client; its RAPI passes
        it on) lets a running instance whose disks cannot be snapshotted stay
        shut down for the whole transfer."""
        body = {
            "destination": destination,
            "mode": mode,
            **given(
                shutdown=shutdown,
                remove_instance=remove_instance,
                x509_key_name=x509_key_name,
                destination_x509_ca=destination_x509_ca,
                compress=compress,
                long_sleep=long_sleep,
            ),
        }
        return job("PUT", path(INSTANCE + "/export", instance), args(reason=reason), body)

    @call
    def delete_instance_export(self, instance: str, reason: str | None = None) -> Request[int]:
        """Remove an instance's exports; a job."""
        return job("DELETE", path(INSTANCE + "/export", instance), args(reason=reason))

    @call
    def get_instance_console(self, instance: str, reason: str | None = None) -> Request[Dict]:
        """How to reach the instance's console (kind, host, command, ...)."""
        return Request("GET", path(INSTANCE + "/console", instance), args(reason=reason))

    @call
    def get_instance_tags(self, instance: str, reason: str | None = None) -> Request[list[str]]:
        """An instance's tags."""
        return Request("GET", path(INSTANCE + "/tags", instance), args(reason=reason))

    @call
    def add_instance_tags(
        self, instance: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Add tags to an instance; a job."""
        return job("PUT", path(INSTANCE + "/tags", instance), tag_args(tags, dry_run, reason))

    @call
    def delete_instance_tags(
        self, instance: str, tags: Iterable[str], dry_run: bool = False, reason: str | None = None
    ) -> Request[int]:
        """Remove tags from an instance; a job."""
        return job("DELETE", path(INSTANCE + "/tags", instance), tag_args(tags, dry_run, reason))


def _names(items: list[Dict]) -> list[str]:
    return [item["id"] for item in items]
