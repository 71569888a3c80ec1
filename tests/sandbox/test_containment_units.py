"""Units of the containment work: iterative tree removal, and what the private root shows or covers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from host.sandbox._fs_cleanup import remove_tree
from host.sandbox._fs import fs_view

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux paths")


def test_remove_tree_deletes_a_1200_level_chain(tmp_path: Path) -> None:
    """No RecursionError and no PATH_MAX trouble: the whole chain is gone."""
    top = tmp_path / "top"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1200):
        os.mkdir("d" * 20, dir_fd=fd)
        child = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)
    remove_tree(top)
    assert not top.exists()


def test_remove_tree_unlinks_symlinks_without_following_them(tmp_path: Path) -> None:
    """A symlink to a directory outside is removed; the directory it pointed to keeps its files."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    top = tmp_path / "top"
    (top / "a").mkdir(parents=True)
    (top / "a" / "link").symlink_to(outside)
    os.mkdir(top / "a" / "locked", 0)
    remove_tree(top)
    assert not top.exists()
    assert (outside / "keep.txt").read_text() == "keep"


def test_fs_view_covers_the_store_and_its_sidecars_inside_the_cwd(tmp_path: Path) -> None:
    """The store (and its -wal) in the extension's cwd are covered; the cwd itself stays shown."""
    store = tmp_path / "agent.db"
    store.write_text("x")
    Path(str(store) + "-wal").write_text("x")
    view = fs_view(command=["/bin/true"], cwd=tmp_path, extension_dir=None, runtime_subdir=tmp_path / "run",
                   scratch_dir=tmp_path / "scratch", scratch_mb=8, sockets=[], private=[store])
    assert str(tmp_path.resolve()) in view["ro"]
    assert view["deny"] == [str(store.resolve()), str(store.resolve()) + "-wal"]
    assert view["scratch"] == {"path": str((tmp_path / "scratch").resolve()), "size_mb": 8}


def test_fs_view_never_covers_a_private_path_holding_the_extensions_cwd(tmp_path: Path) -> None:
    """A workspace that contains the extension's own cwd is not covered (the extension could not run)."""
    cwd = tmp_path / "ws" / "ext"
    cwd.mkdir(parents=True)
    view = fs_view(command=["/bin/true"], cwd=cwd, extension_dir=None, runtime_subdir=tmp_path / "run",
                   scratch_dir=tmp_path / "scratch", scratch_mb=8, sockets=[], private=[tmp_path / "ws"])
    assert view["deny"] == []
    assert not any(p == str(Path.home()) for p in view["ro"])
