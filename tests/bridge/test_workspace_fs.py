"""open_beneath, with openat2 and with the fd-relative walk that replaces it on kernels without openat2."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from host.extensions._workspace_fs import PathEscapes, open_beneath, openat2_available

MODES = [pytest.param(True, id="openat2"), pytest.param(False, id="walk")]


@pytest.fixture
def root(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A workspace: notes.txt, sub/, links inside (alias, sub/up, subl) and out (esc, etc, abs)."""
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "notes.txt").write_text("hello")
    (tmp_path / "secret.txt").write_text("secret")
    (ws / "alias").symlink_to("notes.txt")
    (ws / "sub" / "up").symlink_to("../notes.txt")
    (ws / "subl").symlink_to("sub")
    (ws / "esc").symlink_to("../secret.txt")
    (ws / "etc").symlink_to("/etc")
    (ws / "abs").symlink_to(ws / "notes.txt")  # absolute, even though it points inside: refused
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    yield ws, fd
    os.close(fd)


def _read(fd: int) -> str:
    with os.fdopen(fd, "r") as fh:
        return fh.read()


@pytest.mark.parametrize("use_openat2", MODES)
@pytest.mark.parametrize("path", ["notes.txt", "alias", "sub/up", "subl/up", "sub/../notes.txt", "./sub/./up"])
def test_paths_that_stay_inside_are_opened(root: tuple[Path, int], use_openat2: bool, path: str) -> None:
    """Files and symlinks that resolve beneath the root open (and read what is there)."""
    if use_openat2 and not openat2_available():
        pytest.skip("no openat2 on this kernel")
    assert _read(open_beneath(root[1], path, os.O_RDONLY, use_openat2=use_openat2)) == "hello"


@pytest.mark.parametrize("use_openat2", MODES)
@pytest.mark.parametrize("path", ["../secret.txt", "esc", "etc/passwd", "abs", "sub/../../secret.txt", "/etc/passwd"])
def test_paths_that_lead_out_are_refused(root: tuple[Path, int], use_openat2: bool, path: str) -> None:
    """`..` past the root, absolute paths and symlinks pointing out raise PathEscapes."""
    if use_openat2 and not openat2_available():
        pytest.skip("no openat2 on this kernel")
    with pytest.raises(PathEscapes):
        open_beneath(root[1], path, os.O_RDONLY, use_openat2=use_openat2)


@pytest.mark.parametrize("use_openat2", MODES)
def test_creating_through_a_symlink_out_is_refused(root: tuple[Path, int], use_openat2: bool) -> None:
    """O_CREAT|O_TRUNC through a symlink out neither creates nor truncates anything outside."""
    if use_openat2 and not openat2_available():
        pytest.skip("no openat2 on this kernel")
    with pytest.raises(PathEscapes):
        open_beneath(root[1], "esc", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, use_openat2=use_openat2)
    assert (root[0].parent / "secret.txt").read_text() == "secret"


@pytest.mark.parametrize("use_openat2", MODES)
def test_a_symlink_to_a_directory_is_a_directory_and_a_trailing_slash_needs_one(
    root: tuple[Path, int], use_openat2: bool
) -> None:
    """`subl` opens as the directory `sub`; `alias/` (a file) is not a directory."""
    if use_openat2 and not openat2_available():
        pytest.skip("no openat2 on this kernel")
    fd = open_beneath(root[1], "subl", os.O_RDONLY | os.O_DIRECTORY, use_openat2=use_openat2)
    try:
        assert os.readlink(f"/proc/self/fd/{fd}") == str(root[0] / "sub")
    finally:
        os.close(fd)
    with pytest.raises(NotADirectoryError):
        open_beneath(root[1], "alias/", os.O_RDONLY, use_openat2=use_openat2)
