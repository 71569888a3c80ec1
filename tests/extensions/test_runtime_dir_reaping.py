"""A SIGKILLed host leaves its runtime dir (sockets, every scratch file): the next host removes it, and nothing else."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ext_helpers import FIXTURES

from host import ExtensionManager
from host.extensions._runtime_dirs import LOCK_NAME, reap_abandoned

_HOST = """
import asyncio, sys
from host import ExtensionManager

async def main():
    mgr = ExtensionManager(sandbox="off", runtime_dir=sys.argv[1])
    await mgr.load(sys.argv[2])
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def _start_host(parent: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", _HOST, str(parent), str(FIXTURES / "tools.yaml")],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _runtime_dirs(parent: Path) -> set[Path]:
    return {p for p in parent.iterdir() if p.name.startswith("hw-")}


def _age(path: Path, seconds: float) -> None:
    old = time.time() - seconds
    os.utime(path, (old, old))


@pytest.fixture
def short_parent() -> Iterator[Path]:
    """A parent short enough for the sockets beneath it (pytest's tmp_path is too long for AF_UNIX)."""
    parent = Path(tempfile.mkdtemp(prefix="hwr", dir="/tmp"))
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


async def test_a_killed_hosts_dir_is_removed_while_a_living_hosts_and_a_strangers_are_kept(short_parent: Path) -> None:
    tmp_path = short_parent
    dead = _start_host(tmp_path)
    (dead_dir,) = _runtime_dirs(tmp_path)
    os.killpg(dead.pid, signal.SIGKILL)
    dead.wait()
    living = _start_host(tmp_path)
    try:
        (living_dir,) = _runtime_dirs(tmp_path) - {dead_dir}
        stranger = tmp_path / "hw-not-a-host"
        stranger.mkdir()
        (stranger / "data").write_text("keep me")
        for d in (dead_dir, living_dir, stranger):
            _age(d, 600)
        assert (dead_dir / "scratch").is_dir()  # what the dead host's extension had

        mgr = ExtensionManager(sandbox="off", runtime_dir=tmp_path)
        try:
            await mgr.load(FIXTURES / "tools.yaml")
            ours = _runtime_dirs(tmp_path) - {dead_dir, living_dir, stranger}
        finally:
            await mgr.close()

        assert not dead_dir.exists()
        assert living_dir.is_dir() and (living_dir / LOCK_NAME).is_file()
        assert (stranger / "data").read_text() == "keep me"
        assert len(ours) == 1 and not next(iter(ours)).exists()  # and our own is gone after close()
    finally:
        os.killpg(living.pid, signal.SIGKILL)
        living.wait()


def _abandoned_dir(parent: Path, name: str) -> Path:
    """A runtime dir as a dead host leaves it: a lock file nobody holds."""
    d = parent / name
    d.mkdir(mode=0o700)
    (d / LOCK_NAME).touch()
    (d / "scratch").mkdir()
    return d


def test_a_young_abandoned_dir_is_kept_until_it_is_old_enough(tmp_path: Path) -> None:
    young = _abandoned_dir(tmp_path, "hw-young")
    assert reap_abandoned(tmp_path, tmp_path / "hw-ours", min_age_s=60) == []
    assert young.is_dir()
    _age(young, 61)
    assert reap_abandoned(tmp_path, tmp_path / "hw-ours", min_age_s=60) == [young]
    assert not young.exists()


def test_a_symlink_named_like_a_runtime_dir_is_not_followed(tmp_path: Path) -> None:
    elsewhere = _abandoned_dir(tmp_path, "elsewhere")
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "hw-link").symlink_to(elsewhere)
    _age(elsewhere, 600)
    assert reap_abandoned(parent, parent / "hw-ours", min_age_s=60) == []
    assert (parent / "hw-link").is_symlink() and (elsewhere / "scratch").is_dir()
