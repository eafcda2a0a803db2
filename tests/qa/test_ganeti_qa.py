"""Ganeti 3.0.2's own QA suite, unchanged, against a throw-away Corral cluster.

The fast subset runs by default; the whole suite with ``-m qa_full`` (CI runs
both).  Each checks the run against ``tests/qa/expected.json``: every test
recorded as passing must pass, every one recorded N/A (it needs LVM, DRBD,
RBD, Gluster or Xen) must stay N/A.  A test that newly passes is printed:
record it with ``python -m tests.qa.report`` (tests/qa/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.noded import REPO_ROOT
from tests.qa.report import count, load_expected

RUN_TIMEOUT = {"fast": 600, "full": 2400}


def run_subset(subset: str, work: Path) -> list[dict[str, Any]]:
    """Run the suite's ``subset`` against a new cluster; its results."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.qa.throwaway", "--work", str(work), "--tests", subset],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT[subset], check=False,
    )  # fmt: skip
    print(proc.stdout)
    assert proc.returncode == 0, f"the harness failed: {proc.stderr[-3000:]}"
    results: list[dict[str, Any]] = json.loads((work / "results.json").read_text())
    return results


def check(subset: str, results: list[dict[str, Any]]) -> None:
    """What was recorded as passing passes, what was N/A stays N/A."""
    now = {r["test"]: r for r in results}
    expected = load_expected()[subset]
    regressed = [
        f"{test}: {now[test]['outcome']} {now[test]['reason']}"
        if test in now
        else f"{test}: not run"
        for test, outcome in expected.items()
        if outcome in ("PASS", "N/A") and (now.get(test) or {}).get("outcome") != outcome
    ]
    improved = [t for t, r in now.items() if r["outcome"] == "PASS" and expected.get(t) != "PASS"]
    passed, applicable = count(results)
    print(f"{subset}: {passed}/{applicable}; newly passing: {', '.join(improved) or 'none'}")
    assert not regressed, "\n".join(["Tests that no longer behave as recorded:", *regressed])


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT["fast"] + 60)
def test_fast_subset_of_ganeti_qa(tmp_path: Path) -> None:
    check("fast", run_subset("fast", tmp_path))


@pytest.mark.slow
@pytest.mark.qa_full
@pytest.mark.timeout(RUN_TIMEOUT["full"] + 60)
def test_whole_ganeti_qa_suite(tmp_path: Path) -> None:
    check("full", run_subset("full", tmp_path))
