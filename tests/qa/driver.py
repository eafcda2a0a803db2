"""Run Ganeti 3.0.2's ``qa/ganeti-qa.py`` unchanged and report one line per test.

Run by Debian's ``/usr/bin/python3`` with Ganeti's library and the QA sources
importable (stdlib only here)::

    python3 driver.py QA_DIR CONFIG RESULTS_JSON

The suite is imported as it is; what this adds is about going on after a
failure and reporting, never about what a test asserts:

- Ganeti's QA stops at its first failure.  Here ``RunTest``, ``RunTestIf``,
  ``ReportTestSkip`` and ``RunTestBlock`` of ``ganeti-qa.py`` are wrapped (the
  originals still run and print their headers into the log) so that a failure
  is recorded and the suite goes on.  A failed test returns a :class:`Blocked`
  stand-in; a later test given it (or the instance that a test that did not
  run should have made, until ``_QaInstance.Release``, which is watched) is
  reported as blocked, not run.  The few
  assertions ``ganeti-qa.py`` calls outside any test (cluster verify between
  blocks, the RAPI and group set-up) are recorded as tests of their own.
- Ganeti's QA assumes a test that fails leaves nothing behind (it stops
  there).  Going on, a failed test's leftovers would fail the tests after it,
  so after a failure the suite's own clean-up is run (:func:`recover`): the
  instances and nodes the test acquired are released, unfinished jobs
  cancelled, instances the suite does not hold removed, the enabled disk
  templates restored, the RAPI certificate reloaded.
- Tests that need LVM, DRBD, RBD, Gluster or Xen are reported N/A, never run
  (some of them would return early and look like a pass), and so are the
  tests given the instance such a test should have made (an import's).
- Two defects of the suite are patched, and only those: PyYAML 6's
  ``yaml.load`` needs a ``Loader`` (the suite predates it), and
  ``qa_job_utils._RetrieveTerminationInfo`` calls ``is_termination_info``,
  which it names ``is_termination_info_fn``.

The suite's own output goes to the log (standard output and error); the
report lines go to the original standard output, and all results into
RESULTS_JSON.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import sys
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

# QA config test names whose tests this machine cannot run, and why.
NOT_APPLICABLE = {
    "instance-add-plain-disk": "needs LVM (plain disks)",
    "instance-add-drbd-disk": "needs DRBD",
    "instance-add-rbd": "needs RBD (Ceph)",
    "instance-add-gluster": "needs GlusterFS",
    "disk template plain": "needs LVM (plain disks)",
    "disk template drbd": "needs DRBD",
    "disk template rbd": "needs RBD (Ceph)",
    "disk template gluster": "needs GlusterFS",
    "cluster-reserved-lvs": "needs LVM",
    "cluster-exclusive-storage": "needs LVM (exclusive storage)",
    "exclusive-storage-instance-tests": "needs LVM (exclusive storage)",
    "node-volumes": "needs LVM (gnt-node volumes lists logical volumes)",
    "instance-remove-drbd-offline": "needs DRBD",
    "group-custom-ssh-port": "needs LVM (plain instances) and iptables",
    "parallel-performance": "needs LVM or DRBD (plain and drbd instances)",
}
# Tests that run but whose body needs what this machine lacks (they would return
# early and look like a pass).
NOT_APPLICABLE_TESTS = {
    "TestInstanceAddOsParams": "needs LVM (creates a plain instance)",
    "TestIPolicyPlainInstance": "needs LVM (plain instances)",
    "TestClusterReservedLvs": "needs LVM",
    "TestClusterModifyUserShutdown": "needs Xen or KVM (the cluster runs the fake hypervisor)",
    "TestInstanceUserDown": "needs Xen or KVM (the cluster runs the fake hypervisor)",
    "TestInstStatusCollector": "needs Xen (mon-collector inst-status-xen)",
    "TestInstanceImport": "needs LVM (the import is to a plain instance)",
    "TestReplaceDisks": "needs DRBD (replace-disks)",
    "TestRapiInstanceReplaceDisks": "needs DRBD (replace-disks)",
}
# Tests that make an instance (the argument at this index) for the tests after them.
MAKERS = {"TestInstanceImport": 0, "TestInterClusterInstanceMove": 1}
# Direct calls of ganeti-qa.py, outside any test, recorded as tests.
STEPS = {
    "qa_cluster": ("AssertClusterVerify",),
    "qa_rapi": ("SetupRapi",),
    "qa_group": ("ConfigureGroups",),
    "qa_utils": ("AssertCommand",),
    "qa_performance": ("CreateAllInstances", "RemoveAllInstances"),
}
UNFINISHED = (["queued"], ["waiting"], ["running"], ["canceling"])
TEST_TIMEOUT = 900  # seconds; a hung test fails instead of hanging the run


class TestTimeout(Exception):
    """A test ran for longer than TEST_TIMEOUT."""


class Blocked:
    """What a failed (or not applicable) test returns: anything done with it is a
    no-op, and a test given it is not run."""

    def __init__(self, by: str, outcome: str) -> None:
        self.by, self.outcome = by, outcome

    def __getattr__(self, name: str) -> Blocked:
        return self

    def __call__(self, *args: object, **kwargs: object) -> Blocked:
        return self

    def __iter__(self) -> Iterator[object]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<result of {self.by}>"


class Recorder:
    """The test results, reported as they come."""

    def __init__(self, report: Any) -> None:
        self.report = report
        self.results: list[dict[str, Any]] = []
        self.seen: dict[str, int] = {}
        self.block = ""
        self.template = ""  # of the instance tests running (RunInstanceTests)

    def name(self, fn: Callable[..., Any]) -> str:
        """A unique name: module.function, the disk template whose instance tests
        are running, a count (names do not depend on outcomes)."""
        module = getattr(fn, "__module__", "") or ""
        base = f"{module.rpartition('.')[2]}.{getattr(fn, '__name__', repr(fn))}"
        base = base.replace("ganeti_qa.", "ganeti-qa.")
        if self.template:
            base += f"[{self.template}]"
        count = self.seen[base] = self.seen.get(base, 0) + 1
        return base if count == 1 else f"{base} #{count}"

    def add(self, name: str, outcome: str, reason: str = "", seconds: float = 0.0) -> None:
        reason = " ".join(reason.split())[:300]
        self.results.append(
            {"test": name, "outcome": outcome, "reason": reason,
             "seconds": round(seconds, 2), "block": self.block}
        )  # fmt: skip
        line = f"{outcome:<4} {name}" + (f": {reason}" if reason else "")
        print(line, file=self.report, flush=True)


def _is_instance(value: object) -> bool:
    return type(value).__name__ == "_QaInstance"


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _on_alarm(signum: int, frame: object) -> None:
    raise TestTimeout(f"still running after {TEST_TIMEOUT} s")


def _names(testnames: Any) -> list[str]:
    """The plain test names in a RunTestIf condition (Either and lists flattened)."""
    if isinstance(testnames, str):
        return [testnames]
    if isinstance(testnames, list | tuple):
        return [name for item in testnames for name in _names(item)]
    inner = getattr(testnames, "tests", None)
    return _names(inner) if inner is not None else []


class Runner:
    """The runner functions of ``ganeti-qa.py``, wrapped (see the module docstring)."""

    def __init__(self, qa: types.ModuleType, recorder: Recorder) -> None:
        self.recorder = recorder
        self.run_test, self.run_test_if = qa.RunTest, qa.RunTestIf
        self.report_skip, self.run_block = qa.ReportTestSkip, qa.RunTestBlock
        self.skipping: list[Callable[..., Any]] = []
        # The instance-creating tests of RunInstanceTests, and their templates.
        self.creators = {
            fn.__name__: template
            for (_, template, fn, _) in sys.modules["qa.qa_instance"].available_instance_tests
        }
        # Instances a test that did not run should have made (MAKERS): the tests
        # given them later do not run either, until the suite releases them.
        self.tainted: dict[int, Blocked] = {}

    def install(self, qa: types.ModuleType) -> None:
        """Put the wrappers in place of ``qa``'s own."""
        for name in ("RunTest", "RunTestIf", "ReportTestSkip", "RunTestBlock"):
            setattr(qa, name, getattr(self, name))
        instance_class = sys.modules["qa.qa_config"]._QaInstance
        release = instance_class.Release

        def Release(instance: Any) -> None:  # a released instance is the suite's again
            self.tainted.pop(id(instance), None)
            release(instance)

        instance_class.Release = Release
        for module_name, functions in STEPS.items():
            setattr(qa, module_name, _steps(getattr(qa, module_name), functions, self.RunTest))

    def _blocker(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Blocked | None:
        for value in (*args, *kwargs.values()):
            for item in value if isinstance(value, list | tuple) else [value]:
                if isinstance(item, Blocked):
                    return item
                if _is_instance(item) and id(item) in self.tainted:
                    return self.tainted[id(item)]
        return None

    def RunTest(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.recorder.template = self.creators.get(fn.__name__, self.recorder.template)
        name = self.recorder.name(fn)
        reason = NOT_APPLICABLE_TESTS.get(getattr(fn, "__name__", ""))
        blocker = self._blocker(args, kwargs)
        if reason is not None or blocker is not None:
            blocked = Blocked(name, "N/A") if reason is not None else blocker
            assert blocked is not None
            self.recorder.add(name, blocked.outcome, reason or f"not run: needs {blocked.by}")
            made = MAKERS.get(fn.__name__)
            if made is not None:
                self.tainted[id(args[made])] = Blocked(name, blocked.outcome)
            return Blocked(name, blocked.outcome)
        start = time.monotonic()
        acquired, uses = _acquired(), _node_uses()
        signal.alarm(TEST_TIMEOUT)
        try:
            result = self.run_test(fn, *args, **kwargs)
        except Exception as error:
            signal.alarm(0)
            self.recorder.add(name, "FAIL", _reason(error), time.monotonic() - start)
            recover(_acquired() - acquired, uses)
            return Blocked(name, "FAIL")
        finally:
            signal.alarm(0)
        self.recorder.add(name, "PASS", "", time.monotonic() - start)
        return result

    def RunTestIf(self, testnames: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.skipping.append(fn)
        try:
            return self.run_test_if(testnames, fn, *args, **kwargs)
        finally:
            self.skipping.pop()

    def ReportTestSkip(self, desc: str, testnames: Any) -> None:
        self.report_skip(desc, testnames)
        name = self.recorder.name(self.skipping[-1]) if self.skipping else desc
        names = _names(testnames)
        reasons = [NOT_APPLICABLE[n] for n in names if n in NOT_APPLICABLE]
        if reasons:
            self.recorder.add(name, "N/A", reasons[0])
        else:
            disabled = ", ".join(names) or desc
            self.recorder.add(name, "SKIP", f"disabled in the QA config: {disabled}")

    def RunTestBlock(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        outer, self.recorder.block = self.recorder.block, fn.__name__
        try:
            return self.run_block(fn, *args, **kwargs)
        except Exception as error:
            self.recorder.add(f"{fn.__name__} (rest of the block)", "FAIL", _reason(error))
            return None
        finally:
            self.recorder.block, self.recorder.template = outer, ""


def _acquired() -> set[Any]:
    """The QA config's instances in use."""
    config = sys.modules["qa.qa_config"].GetConfig()
    return {instance for instance in config["instances"] if instance.used}


def _node_uses() -> dict[Any, int]:
    """How many times the suite holds each node."""
    return {node: node.use_count for node in sys.modules["qa.qa_config"].get("nodes")}


def recover(leaked: set[Any], uses: dict[Any, int]) -> None:
    """Clean up after a failed test with the suite's own means (see the module
    docstring); what fails here is only logged."""
    print("---- harness: cleaning up after the failure", flush=True)
    qa_utils = sys.modules["qa.qa_utils"]
    qa_cluster, qa_rapi = sys.modules["qa.qa_cluster"], sys.modules["qa.qa_rapi"]
    master = sys.modules["qa.qa_config"].GetMasterNode().primary
    for instance in leaked:
        instance.Release()
    for node, count in uses.items():  # nodes the failed test acquired and kept
        for _ in range(node.use_count - count):
            node.Release()
    held = {instance.name for instance in _acquired()}
    steps: list[Callable[[], Any]] = [
        functools.partial(_cancel_jobs, qa_utils, master),
        functools.partial(_remove_instances, qa_utils, master, held),
        qa_cluster._RestoreEnabledDiskTemplates,
    ]
    if qa_rapi.Enabled():
        steps.append(functools.partial(qa_rapi.ReloadCertificates, ensure_presence=False))
    for step in steps:
        try:
            step()
        except Exception as error:
            print(f"---- harness: clean-up step failed: {_reason(error)}", flush=True)


def _cancel_jobs(qa_utils: Any, master: str) -> None:
    """Cancel the jobs a failed test left unfinished (a ``gnt-debug delay`` of minutes)."""
    rows = qa_utils.GetCommandOutput(master, "gnt-job list --no-headers -o id,status")
    pending = [row.split()[0] for row in rows.splitlines() if row.split()[1:] in UNFINISHED]
    if pending:
        command = ["gnt-job", "cancel", "--kill", "--yes-do-it", "--force", *pending]
        qa_utils.AssertCommand(command, fail=None)


def _remove_instances(qa_utils: Any, master: str, held: set[str]) -> None:
    """Remove the cluster's instances the suite does not hold (a failed test's)."""
    names = qa_utils.GetCommandOutput(master, "gnt-instance list --no-headers -o name")
    for name in sorted(set(names.split()) - held):
        qa_utils.AssertCommand(["gnt-instance", "remove", "-f", name], fail=None)


def _steps(
    module: types.ModuleType, functions: tuple[str, ...], run: Callable[..., Any]
) -> types.SimpleNamespace:
    """``module`` as ganeti-qa.py sees it, with ``functions`` run as tests."""
    view = types.SimpleNamespace(**vars(module))
    for function in functions:
        real = getattr(module, function)
        setattr(view, function, functools.wraps(real)(functools.partial(run, real)))
    return view


def patch_defects() -> None:
    """The two defects of the suite that are patched (see the module docstring)."""
    import yaml  # type: ignore[import-untyped]  # Debian's python3-yaml

    yaml.load = functools.partial(yaml.load, Loader=yaml.SafeLoader)
    from ganeti import constants  # type: ignore[import-not-found]

    for name in ("qa_job_utils", "qa.qa_job_utils"):
        module = sys.modules.get(name)
        if module is not None:
            module.is_termination_info = lambda e: e["Content"][1] == constants.ELOG_DELAY_TEST  # type: ignore[attr-defined]


def load_suite(qa_dir: str) -> types.ModuleType:
    """``ganeti-qa.py`` imported as it runs from Ganeti's source tree."""
    sys.path[:0] = [qa_dir, os.path.dirname(qa_dir)]
    spec = importlib.util.spec_from_file_location("ganeti_qa", os.path.join(qa_dir, "ganeti-qa.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ganeti_qa"] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> int:
    """Run the suite with the config ``argv[1]``; 0 when it ran to its end."""
    qa_dir, config, results_file = argv
    report = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)  # the suite's own output goes where standard error goes: the log
    recorder = Recorder(report)
    signal.signal(signal.SIGALRM, _on_alarm)
    qa = load_suite(qa_dir)
    patch_defects()
    Runner(qa, recorder).install(qa)
    sys.argv = ["ganeti-qa.py", "--yes-do-it", config]
    ended = 0
    try:
        qa.main()
    except Exception as error:
        recorder.add("ganeti-qa.RunQa (rest of the suite)", "FAIL", _reason(error))
        ended = 1
    finally:
        with open(results_file, "w", encoding="utf-8") as out:
            json.dump(recorder.results, out, indent=1)
    return ended


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
