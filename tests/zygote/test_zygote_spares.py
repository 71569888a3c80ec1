"""The zygote's spares (host/sandbox/_zygote_spares.py): children cloned into a sandbox's namespaces and cgroups while
the zygote is idle. A start that takes one must end up exactly where a freshly cloned child would: its own cgroups,
named after the extension and the pid the host sees, with the manifest's limits; idle spares die with the zygote
and leave no cgroup behind."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from zy_helpers import Dirs, collect, require, spawn

from host import sandbox_capabilities
from host.sandbox._zygote import Zygote

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the zygote is Linux-only (pidfd, namespaces)")

LIMITS = {"processes": 17, "memoryMb": 300}
WAIT_S = 10.0


def _bases() -> dict[str, Path]:
    """The cgroup bases a sandboxed start joins here (skip unless both a pids and a memory cgroup are made)."""
    require("pid_namespace", "memory_cgroup")
    layers = sandbox_capabilities()["layers"]
    if layers["process_limit"].get("mechanism") != "pids_cgroup":
        pytest.skip("no pids cgroup here")
    return {"pids": Path(layers["process_limit"]["base"]), "memory": Path(layers["memory_cgroup"]["base"])}


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _spares(zygote: Zygote, bases: dict[str, Path]) -> set[int]:
    """Pids of the zygote's idle spares: a `spare-<pid>` pids cgroup whose process is the zygote's child."""
    found = set()
    for entry in os.listdir(bases["pids"] / "hookwire"):
        name, _, pid = entry.rpartition("-")
        if name == "spare" and pid.isdigit():
            try:
                if _parent(int(pid)) == zygote.pid:
                    found.add(int(pid))
            except OSError:
                pass
    return found


async def _a_spare(zygote: Zygote, bases: dict[str, Path]) -> int:
    deadline = time.monotonic() + WAIT_S
    while not (spares := _spares(zygote, bases)):
        assert time.monotonic() < deadline, "the zygote made no spare after a sandboxed start"
        await asyncio.sleep(0.02)
    return min(spares)


def _cgroup_of(pid: int, controller: str) -> str:
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    raise AssertionError(f"{pid} is in no {controller} cgroup")


def _script(dirs: Dirs, name: str, code: str) -> str:
    path = dirs.base / name
    path.write_text(code)
    return str(path)


async def _run_one(zygote: Zygote, dirs: Dirs) -> int:
    proc = await spawn(zygote, dirs, [sys.executable, _script(dirs, "quick.py", "pass\n")], limits=LIMITS)
    code, _, err = await collect(proc)
    assert code == 0, err
    return proc.pid


async def test_a_start_that_takes_a_spare_gets_its_own_cgroups_with_the_manifests_limits(
        zygote: Zygote, dirs: Dirs) -> None:
    bases = _bases()
    await _run_one(zygote, dirs)
    spare = await _a_spare(zygote, bases)
    waits = _script(dirs, "waits.py", "import sys\nprint('up', flush=True)\nsys.stdin.read()\n")
    proc = await spawn(zygote, dirs, [sys.executable, waits], limits=LIMITS)
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), WAIT_S) == b"up\n"  # its code runs: init is done
        assert proc.pid == spare  # the request took the spare, not a fresh clone
        group = _cgroup_of(proc.pid, "pids")
        assert group.endswith(f"/hookwire/zygote_test-{proc.pid}")
        pids_dir = bases["pids"] / "hookwire" / f"zygote_test-{proc.pid}"
        assert (pids_dir / "pids.max").read_text().strip() == "17"
        assert _cgroup_of(proc.pid, "memory").endswith(f"/hookwire/zygote_test-{proc.pid}")
        memory_dir = bases["memory"] / "hookwire" / f"zygote_test-{proc.pid}"
        limit = next(f for f in ("memory.max", "memory.limit_in_bytes") if (memory_dir / f).exists())
        assert int((memory_dir / limit).read_text()) == 300 * 1024 * 1024
        assert not (bases["pids"] / "hookwire" / f"spare-{spare}").exists()
        assert not (bases["memory"] / "hookwire" / f"spare-{spare}").exists()
    finally:
        code, _, err = await collect(proc)
    assert code == 0, err


async def test_closing_the_zygote_kills_its_spares_and_removes_their_cgroups(dirs: Dirs) -> None:
    bases = _bases()
    zygote = Zygote()
    try:
        await zygote.start()
        await _run_one(zygote, dirs)
        spare = await _a_spare(zygote, bases)
    finally:
        await zygote.close()
    with pytest.raises(ProcessLookupError):
        os.kill(spare, 0)
    assert [p for p in bases.values() if (p / "hookwire" / f"spare-{spare}").exists()] == []


async def test_a_spare_that_dies_idle_is_dropped_and_the_next_start_clones_as_before(
        zygote: Zygote, dirs: Dirs) -> None:
    bases = _bases()
    await _run_one(zygote, dirs)
    spare = await _a_spare(zygote, bases)
    os.kill(spare, signal.SIGKILL)
    deadline = time.monotonic() + WAIT_S
    while (bases["pids"] / "hookwire" / f"spare-{spare}").exists():  # the zygote reaps it and removes its cgroups
        assert time.monotonic() < deadline, "a dead spare's cgroup was left behind"
        await asyncio.sleep(0.02)
    assert not (bases["memory"] / "hookwire" / f"spare-{spare}").exists()
    assert await _run_one(zygote, dirs) != spare


async def test_no_spares_with_hookwire_zygote_spares_0(
        zygote: Zygote, dirs: Dirs, monkeypatch: pytest.MonkeyPatch) -> None:
    bases = _bases()
    monkeypatch.setenv("HOOKWIRE_ZYGOTE_SPARES", "0")
    await _run_one(zygote, dirs)
    await _run_one(zygote, dirs)
    await asyncio.sleep(0.3)  # well past the zygote's idle moment before a refill
    assert _spares(zygote, bases) == set()


async def test_no_spare_is_cloned_while_the_host_has_a_start_in_flight_and_one_is_when_it_has_none(
        zygote: Zygote, dirs: Dirs) -> None:
    """Five spares cloned in the middle of five starts took CPU from them (issue 10's five-parallel cold start)."""
    bases = _bases()
    waits = _script(dirs, "waits.py", "import sys\nsys.stdin.read()\n")
    with zygote.busy():  # the manager holds this from spawn to Describe
        # a request (the pool's target is one spare from now on), answered at once; its child runs on meanwhile
        proc = await spawn(zygote, dirs, [sys.executable, waits], limits=LIMITS)
        try:
            # 30x the quiet moment after which an idle zygote refills, well inside the 1 s after which a host
            # that stays busy gets its spares anyway (counted from the request, just before `spawn` returned)
            await asyncio.sleep(0.3)
            assert _spares(zygote, bases) == set()
        finally:
            code, _, err = await collect(proc)
        assert code == 0, err
    await _a_spare(zygote, bases)  # the host has no start in flight: the zygote refills at once


CAPS = "print(*(l.split()[1] for l in open('/proc/self/status') if l[:6] in ('CapBnd', 'CapPrm', 'CapEff', 'CapAmb')))\n"


async def test_an_extension_has_no_capability_left_whether_its_init_was_a_spare_or_not(
        zygote: Zygote, dirs: Dirs) -> None:
    bases = _bases()
    script = _script(dirs, "caps.py", CAPS)
    first = await spawn(zygote, dirs, [sys.executable, script], limits=LIMITS)  # a new zygote has no spare yet
    code, out, err = await collect(first)
    assert (code, out.split()) == (0, ["0000000000000000"] * 4), err
    spare = await _a_spare(zygote, bases)
    second = await spawn(zygote, dirs, [sys.executable, script], limits=LIMITS)
    code, out, err = await collect(second)
    assert second.pid == spare
    assert (code, out.split()) == (0, ["0000000000000000"] * 4), err


def test_a_busy_host_gets_its_spares_refill_busy_s_after_it_said_busy_however_old_the_last_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for a start that hangs counts from the host's `busy` (or a later request), not from a request
    of an earlier burst: else a pool still short of its target refilled at once, in the middle of the new starts."""
    from host.sandbox import _zygote_spares as pool_module

    clock = [1000.0]
    monkeypatch.setattr(pool_module.time, "monotonic", lambda: clock[0])
    pool = pool_module.SparePool()
    key = (1, ("base",))
    pool.note_request(key, 4)  # the pool wants one spare from now on
    assert pool.refill_wait_s() == pool_module.REFILL_IDLE_S  # host idle: the usual quiet moment
    clock[0] += 60.0  # an earlier burst's request, a minute ago
    pool.host_says(busy=True)
    assert pool.refill_wait_s() == pool_module.REFILL_BUSY_S
    clock[0] += 0.4
    assert pool.refill_wait_s() == pytest.approx(pool_module.REFILL_BUSY_S - 0.4)
    pool.note_request(key, 4)  # the start's own request restarts the wait
    assert pool.refill_wait_s() == pool_module.REFILL_BUSY_S
    clock[0] += pool_module.REFILL_BUSY_S + 1
    assert pool.refill_wait_s() == 0.0  # busy for longer than REFILL_BUSY_S: refill now
    pool.host_says(busy=False)
    assert pool.refill_wait_s() == pool_module.REFILL_IDLE_S
