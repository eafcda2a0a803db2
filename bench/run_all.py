"""Run every benchmark and print one summary table of the "Must show" figures.

Each benchmark runs in its own process (``<venv>/bin/python -m bench.<name>``)
with its own fresh cluster and writes ``bench/results/<name>.json``; this
script then collects their figures into ``bench/results/summary.json``.

    .venv/bin/python -m bench.run_all            # all, default repetitions
    .venv/bin/python -m bench.run_all --only job_list --runs 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

from bench.common import PYTHON, REPO_ROOT, RESULTS_DIR, machine_info, print_rows, shown_path

BENCHMARKS = (
    "job_throughput",
    "job_list",
    "wfjc_fanout",
    "masterd_rss",
    "metrics",
    "instances",
    "config_commit",
    "config_export",
    "rapi",
    "rapi_flood",
    "multinode",
    "move",
    "backup",
    "kvm",
    "kvm_migration",
    "kvm_namespaces",
    "configdrive",
    "metad",
    "os_image",
    "etcd_store",
    "node_fencing",
    "failover",
    "netns_faults",
    "cloudinit_boot",
)


def run(name: str, runs: int | None) -> dict[str, Any]:
    """Run one benchmark in a new process; returns its results file's content."""
    command = [PYTHON, "-m", f"bench.bench_{name}"]
    if runs is not None:
        command += ["--runs", str(runs)]
    print(f"== {name}", flush=True)
    subprocess.run(command, cwd=REPO_ROOT, check=True)
    return dict(json.loads((RESULTS_DIR / f"{name}.json").read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, help="repetitions for every benchmark")
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only these")
    args = parser.parse_args()
    results = {name: run(name, args.runs) for name in args.only or BENCHMARKS}
    figures = [
        {"benchmark": name, **figure}
        for name, result in results.items()
        for figure in result["figures"]
    ]
    rows = [["Figure", "Target", "Ganeti 3.0.2", "Measured (median)", "Runs", "Met"]]
    for f in figures:
        rows.append(
            [
                f["title"],
                f["target_text"],
                f["ganeti"],
                f"{f['median']:.4g} {f['unit']}",
                str(len(f["runs"])),
                "yes" if f["met"] else "NO",
            ]
        )
    print()
    print_rows(rows)
    summary = {"machine": machine_info(), "figures": figures}
    path = RESULTS_DIR / "summary.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"results: {shown_path(path)}")
    missed = [f["title"] for f in figures if not f["met"]]
    if missed:
        print(f"target not met: {'; '.join(missed)}")


if __name__ == "__main__":
    main()
