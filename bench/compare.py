"""The benchmarks of a git revision and of the working tree, compared in one run.

    .venv/bin/python -m bench.compare --base 0247ade --runs 5
    .venv/bin/python -m bench.compare --base HEAD~1 --only job_list --runs 3 --inner-runs 1

*base* is the given revision, checked out with ``git worktree add`` in a
temporary directory under /tmp, with its own virtual environment (made from
the same interpreter as ``.venv``; the dependencies its ``pyproject.toml``
names, at the versions installed in ``.venv``).  *new* is this working tree,
as it is, with ``.venv``.  Each side runs its *own* benchmark scripts (an old
revision's scripts may need the old opcodes, and the new ones the new), from
its own tree, with its own interpreter (the venv's python, never a pyenv
shim) and no ``PYTHONPATH`` from outside, so the two never mix.  Before
the first run each side's ``corral`` is compiled to ``__pycache__``.

``--borrow NAME`` (repeatable) lends the working tree's ``bench/bench_NAME.py``
to the base: it is copied into the base's worktree before anything runs,
replacing the base's own script if there is one.  A benchmark newer than the
base can so be measured on both sides, and a script fixed since can replace a
broken one.  A borrowed script runs against the base's code, so it must use
only what the base has (its ``bench.common``, its test helpers, its opcodes),
and the bench modules it imports are the base's unless borrowed too.

One *round* runs every benchmark once on each side, in a new process
(``python -m bench.bench_<name> --runs <inner-runs>``, each with its own
fresh cluster), the two sides one after the other, base first in even
rounds and new first in odd ones, so that a drift of the machine's load
weighs on both alike.  The runs of every round are pooled per side: a
figure's value is the median of all its runs on that side (``--runs`` x
``--inner-runs`` samples), and the ratio is new / base.  Each side's
interquartile range is kept too: where the two ranges overlap, the
difference is reported as noise ("≈"), otherwise as better or worse
according to the figure's direction (jobs/s: higher is better; time and
memory: lower is better).  The machine is shared and noisy, so nothing here
is a timed assertion.

Results: ``bench/results/compare-<base>.json`` (every run's samples and each
process's full results) and the table on stdout.  The worktree and its
environment are removed afterwards, even on failure or interruption.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    PYTHON,
    REPO_ROOT,
    RESULTS_DIR,
    RESULTS_ENV,
    machine_info,
    median,
    print_rows,
    shown_path,
)
from bench.run_all import BENCHMARKS

# Environment variables that would let one side import the other's code.
_FOREIGN_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", RESULTS_ENV)


def git(*args: str) -> str:
    """Run git in this repository; its stdout, stripped."""
    proc = subprocess.run(
        ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


@dataclass
class Side:
    """One side of the comparison: a source tree with its own interpreter."""

    label: str
    root: Path
    # The venv's ``bin/python``, used for the benchmarks and the gnt-* commands.
    python: Path
    # Where the side's benchmarks are asked to write their results (RESULTS_ENV).
    results: Path

    @property
    def env(self) -> dict[str, str]:
        """The process environment: this side's venv first on PATH, nothing foreign."""
        env = {k: v for k, v in os.environ.items() if k not in _FOREIGN_ENV}
        venv_bin = str(self.python.parent)
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not _is_venv_bin(p)]
        env["PATH"] = os.pathsep.join([venv_bin, *path])
        env[RESULTS_ENV] = str(self.results)
        return env

    def result_files(self, name: str) -> list[Path]:
        """Where a benchmark's results may land: RESULTS_ENV, or else (for a revision
        whose benchmarks do not know that variable) the worktree's bench/results,
        never this repository's own."""
        files = [self.results / f"{name}.json"]
        if self.root != REPO_ROOT:
            files.append(self.root / "bench" / "results" / f"{name}.json")
        return files

    def check(self, *args: str) -> str:
        """Run ``python args...`` in this side's tree and environment; its stdout."""
        proc = subprocess.run(
            [str(self.python), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{self.label}: python {' '.join(args)} failed:\n{proc.stderr}")
        return proc.stdout

    def prepare(self) -> None:
        """Compile the side's ``corral`` and check that it imports its own code."""
        self.check("-m", "compileall", "-q", "corral")
        where = Path(self.check("-c", "import corral; print(corral.__file__)").strip())
        if not where.is_relative_to(self.root):
            raise RuntimeError(f"{self.label}: corral imported from {where}, not {self.root}")

    def run(self, name: str, inner_runs: int) -> tuple[dict[str, Any], float]:
        """Run one benchmark in a new process; its results and the wall-clock seconds."""
        files = self.result_files(name)
        for path in files:
            path.unlink(missing_ok=True)
        start = time.monotonic()
        proc = subprocess.run(
            [str(self.python), "-m", f"bench.bench_{name}", "--runs", str(inner_runs)],
            cwd=self.root,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            raise RuntimeError(f"{self.label}: bench_{name} failed:\n{proc.stdout[-4000:]}")
        for path in files:
            if path.exists():
                return dict(json.loads(path.read_text())), elapsed
        raise RuntimeError(f"{self.label}: bench_{name} wrote no results")


def _is_venv_bin(entry: str) -> bool:
    """Whether a PATH entry is some virtual environment's ``bin``."""
    return (Path(entry).parent / "pyvenv.cfg").exists()


# The base revision
def borrow(tree: Path, names: Sequence[str]) -> None:
    """Copy the working tree's ``bench/bench_<name>.py`` into ``tree``'s bench/."""
    for name in names:
        script = f"bench_{name}.py"
        shutil.copyfile(REPO_ROOT / "bench" / script, tree / "bench" / script)


@contextmanager
def base_tree(revision: str) -> Iterator[Path]:
    """A worktree of ``revision`` under /tmp with its own ``.venv``, removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="corral-bench-base-", dir="/tmp"))
    tree = parent / "repo"
    try:
        git("worktree", "add", "--detach", str(tree), revision)
        make_venv(tree, parent / "constraints.txt")
        yield tree
    finally:
        if tree.exists():
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(tree)],
                capture_output=True,
                check=False,
            )
        shutil.rmtree(parent, ignore_errors=True)
        git("worktree", "prune")


def make_venv(tree: Path, constraints: Path) -> None:
    """``tree/.venv``: the interpreter of ``.venv``, the dependencies that ``tree``'s
    pyproject.toml names, each at the version installed in ``.venv``."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    interpreter = Path(sys.base_prefix) / "bin" / f"python{version}"
    subprocess.run([str(interpreter), "-m", "venv", str(tree / ".venv")], check=True)
    frozen = subprocess.run(
        [PYTHON, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    constraints.write_text(frozen)
    project = tomllib.loads((tree / "pyproject.toml").read_text())["project"]
    proc = subprocess.run(
        [
            str(tree / ".venv" / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--constraint",
            str(constraints),
            *project["dependencies"],
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"installing the base's dependencies failed:\n{proc.stderr}")


# Statistics and the report
def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The first and third quartiles (both the value itself for a single sample)."""
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def side_summary(samples: list[float], round_medians: list[float]) -> dict[str, Any]:
    """A figure's runs on one side: all samples pooled, and each round's median."""
    q1, q3 = quartiles(samples)
    return {
        "median": round(median(samples), 4),
        "q1": round(q1, 4),
        "q3": round(q3, 4),
        "samples": [round(s, 4) for s in samples],
        "round_medians": [round(m, 4) for m in round_medians],
    }


def verdict(figure: dict[str, Any]) -> str:
    """ "≈" when the interquartile ranges overlap, else better or worse for the figure."""
    base, new = figure["base"], figure["new"]
    if new["q1"] <= base["q3"] and base["q1"] <= new["q3"]:
        return "≈"
    higher_is_better = figure["bound"] == "min"
    return "better" if (new["median"] > base["median"]) == higher_is_better else "worse"


def compare_figures(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every figure measured on both sides, with its medians, ratio and verdict.

    ``runs`` maps a side's label to its results, one per benchmark process, in
    the order they ran.
    """
    figures: dict[str, dict[str, Any]] = {}
    for label, results in runs.items():
        for result in results:
            for f in result["figures"]:
                entry = figures.setdefault(
                    f["key"],
                    {
                        "benchmark": result["benchmark"],
                        "key": f["key"],
                        "unit": f["unit"],
                        "bound": f["bound"],
                        "base_samples": [],
                        "new_samples": [],
                        "base_rounds": [],
                        "new_rounds": [],
                    },
                )
                # The title and Ganeti's figure as the working tree states them.
                if label == "new" or "title" not in entry:
                    entry["title"], entry["ganeti"] = f["title"], f["ganeti"]
                entry[f"{label}_samples"] += f["runs"]
                entry[f"{label}_rounds"].append(median(f["runs"]))
    compared = []
    for entry in figures.values():
        if not (entry["base_samples"] and entry["new_samples"]):
            print(f"figure {entry['key']} measured on one side only; left out")
            continue
        figure = {k: entry[k] for k in ("benchmark", "key", "title", "unit", "bound", "ganeti")}
        for label in ("base", "new"):
            figure[label] = side_summary(entry[f"{label}_samples"], entry[f"{label}_rounds"])
        figure["ratio"] = round(figure["new"]["median"] / figure["base"]["median"], 4)
        figure["verdict"] = verdict(figure)
        compared.append(figure)
    return compared


def print_comparison(figures: Sequence[dict[str, Any]], base: str) -> None:
    """The comparison as a text table."""
    rows = [
        ["Figure", "Ganeti 3.0.2", f"base {base}", "new", "new/base", "change", "n"],
    ]
    for f in figures:
        rows.append(
            [
                f["title"],
                f["ganeti"],
                f"{f['base']['median']:.4g} {f['unit']}",
                f"{f['new']['median']:.4g} {f['unit']}",
                f"{f['ratio']:.3f}",
                f["verdict"],
                f"{len(f['base']['samples'])}/{len(f['new']['samples'])}",
            ]
        )
    print_rows(rows)


def working_tree_state() -> dict[str, Any]:
    """The commit the working tree is on and what differs from it."""
    return {
        "head": git("rev-parse", "HEAD"),
        "changed_files": git("status", "--porcelain").splitlines(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument(
        "--inner-runs",
        type=int,
        default=3,
        help="--runs given to every benchmark process (default 3)",
    )
    parser.add_argument("--only", action="append", choices=BENCHMARKS, help="run only these")
    parser.add_argument(
        "--borrow",
        action="append",
        default=[],
        choices=BENCHMARKS,
        metavar="NAME",
        help="run the working tree's bench_NAME.py on the base too (repeatable)",
    )
    args = parser.parse_args()
    names = args.only or list(BENCHMARKS)
    base_sha = git("rev-parse", "--verify", f"{args.base}^{{commit}}")
    short = base_sha[:7]
    started = machine_info()
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "new": []}
    seconds: dict[str, list[float]] = {"base": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="corral-bench-compare-") as tmp:
        print(f"== setting up base {short} in a worktree under /tmp", flush=True)
        with base_tree(base_sha) as tree:
            sides = {
                "base": Side("base", tree, tree / ".venv" / "bin" / "python", Path(tmp, "base")),
                "new": Side("new", REPO_ROOT, Path(PYTHON), Path(tmp, "new")),
            }
            if args.borrow:
                borrow(tree, args.borrow)
                print(f"== lent to {short}: {', '.join(args.borrow)}", flush=True)
            # A benchmark newer than the base (bench_rapi before issue 9) is skipped,
            # unless it was lent.
            missing = [n for n in names if not (tree / "bench" / f"bench_{n}.py").exists()]
            if missing:
                print(f"== not in {short}, skipped: {', '.join(missing)}", flush=True)
                names = [n for n in names if n not in missing]
            if not names:
                raise SystemExit(f"{short} has none of the benchmarks asked for")
            for side in sides.values():
                side.results.mkdir()
                side.prepare()
            base_packages = sides["base"].check("-m", "pip", "freeze").splitlines()
            for round_no in range(args.runs):
                order = ("base", "new") if round_no % 2 == 0 else ("new", "base")
                for name in names:
                    for label in order:
                        result, elapsed = sides[label].run(name, args.inner_runs)
                        runs[label].append(result)
                        seconds[label].append(elapsed)
                        medians = ", ".join(
                            f"{f['key']} {f['median']:.4g} {f['unit']}" for f in result["figures"]
                        )
                        print(
                            f"round {round_no + 1}/{args.runs} {name} {label}: {medians}"
                            f" ({elapsed:.0f} s)",
                            flush=True,
                        )
    figures = compare_figures(runs)
    data = {
        "base": {"revision": args.base, "commit": base_sha, "packages": base_packages},
        "new": {"tree": str(REPO_ROOT), **working_tree_state()},
        "params": {
            "rounds": args.runs,
            "inner_runs": args.inner_runs,
            "benchmarks": names,
            "borrowed": args.borrow,
        },
        "machine_at_start": started,
        "machine": machine_info(),
        "figures": figures,
        "process_seconds": seconds,
        "runs": runs,
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"compare-{short}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    print()
    print_comparison(figures, short)
    print(f"results: {shown_path(path)}")


if __name__ == "__main__":
    main()
