"""How long corral-metad's ``cidata`` config drive takes to build (issue 23).

One instance with two NICs, an SSH key, three OS parameters (one private, one
secret: left off the drive) and 16 KiB of user-data; the ISO 9660 image
(Joliet, Rock Ridge) built in memory with pycdlib, from the model to the image
bytes.  Beside it, in the same run, the rendering of NoCloud's files alone (the
floor: what any drive needs) and the ratio of the two.

Target: the build at most 50 ms (the issue measured 9 ms with pycdlib).
Ganeti 3.0.2 has no config drive.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from bench.common import Figure, arg_parser, median, write_results
from corral.metad.configdrive import build_iso
from corral.metad.model import InstanceMetadata, UserData
from corral.metad.trees import nocloud_files
from tests.helpers.metad import USER_DATA, sample

NAME = "configdrive"


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def instance() -> InstanceMetadata:
    user_data = USER_DATA + b"# " + b"x" * (16 * 1024) + b"\n"
    return dataclasses.replace(sample(), user_data=UserData(user_data))


def main() -> None:
    parser = arg_parser(__doc__ or NAME, runs=25)
    args = parser.parse_args()
    meta = instance()
    build_iso(meta)  # warm-up: imports, caches
    floor, builds = [], []
    for _ in range(args.runs):
        floor.append(timed_ms(lambda: nocloud_files(meta)))
        builds.append(timed_ms(lambda: build_iso(meta)))
    build = Figure("iso_build_ms", "cidata ISO build, in memory", "ms", 50, "max", "none")
    build.runs = builds
    build.notes = f"image of {len(build_iso(meta))} bytes"
    render = Figure("nocloud_render_ms", "NoCloud files rendered (the floor)", "ms", 0, "min", "")
    render.runs = floor
    ratio = Figure("iso_vs_render", "ISO build / rendering alone", "x", 0, "min", "")
    ratio.runs = [median(builds) / median(floor)]
    write_results(NAME, [build, render, ratio], {"runs": args.runs})


if __name__ == "__main__":
    main()
