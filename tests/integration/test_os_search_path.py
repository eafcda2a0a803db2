"""Several OS directories: the first match wins, shadowed ones are shown;
and listing an unknown instance by name is an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral import errors
from tests.helpers.cluster import new_root
from tests.helpers.osdef import make_os


def test_search_path_order_and_shadowed_entries(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    first = make_os(cl.paths, "multi", os_version="first")
    later = cl.paths.root / "usr" / "share" / "ganeti" / "os" / "multi"
    later.mkdir(parents=True)  # an invalid copy further down the default search path
    extra = cl.paths.root / "usr" / "lib" / "ganeti" / "os" / "onlyhere"
    extra.mkdir(parents=True)
    try:
        assert cl.init().rc == 0
        diagnose = cl.gnt("os", "diagnose")
        assert diagnose.rc == 1  # "onlyhere" is invalid
        assert f"status: valid (path: {first})" in diagnose.stdout
        assert f"    [hidden] path: {later}, status: invalid" in diagnose.stdout
        assert f"(path: {extra})" in diagnose.stdout
        listing = cl.gnt("os", "list", "--no-headers")
        assert listing.stdout.split() == ["multi+default"]
    finally:
        cl.stop()


def test_configured_search_path_replaces_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cl = new_root(tmp_path)
    make_os(cl.paths, "default-dir-os")
    monkeypatch.setenv("CORRAL_OS_SEARCH_PATH", "/opt/os")
    try:
        make_os(cl.paths, "custom-os")  # the first search directory is now /opt/os
        assert (cl.paths.root / "opt" / "os" / "custom-os").is_dir()
        assert cl.init().rc == 0  # the daemons inherit the variable
        listing = cl.gnt("os", "list", "--no-headers")
        assert listing.stdout.split() == ["custom-os+default"]
    finally:
        cl.stop()


def test_listing_an_unknown_instance_by_name_fails(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    try:
        assert cl.init().rc == 0
        result = cl.gnt("instance", "list", "nosuch.example.com")
        assert result.rc == 1
        assert "Instance name nosuch.example.com not found" in result.stderr
        assert cl.gnt("instance", "list").rc == 0
    finally:
        cl.stop()


def test_os_info_of_an_unknown_os_is_an_empty_entry(tmp_path: Path) -> None:
    cl = new_root(tmp_path)
    make_os(cl.paths, "known")
    try:
        assert cl.init().rc == 0
        result = cl.gnt("os", "info", "nosuch", "known")
        assert result.rc == 0
        # As Ganeti: the OSes found first, then the names that are none.
        assert result.stdout.startswith("known:\n  - valid: True\n")
        assert result.stdout.endswith("\nnosuch: \n\n")
        with cl.client() as client, pytest.raises(errors.GenericError, match="internal use"):
            client.call("PickupJob", 1)
    finally:
        cl.stop()
