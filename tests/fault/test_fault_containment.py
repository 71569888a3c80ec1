"""Containment faults through real turns (issue 10 items 2, 3, 5, 6, 7, 8, 9, 11, 13): what an extension can read,
which processes it sees and leaves behind, sibling socket squatting, memory of the whole tree, scratch disk cap,
deep scratch trees at close, and a failed Agent.start().

Each scenario runs a real host.Agent turn on a SQLite store with the sandbox in mode "auto" (item 9: "off", so the
scratch tree lands on the host's disk), then checks the persisted messages and a next turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import (
    SESSION,
    FaultHost,
    host,
    manifest,
    persisted_and_next_turn_works,
    tool_output,
    wait_until,
)
from fixtures.processes import pids_with_arg
from fixtures.sandbox_dirs import require

from host import ExtensionStartError

Record = Callable[[str, str, str], None]
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox layers are Linux features")


def contain(tmp_path: Path, mode_name: str, *, name: str = "contain", **fields: Any) -> Path:
    return manifest(tmp_path, "containment_ext.py", "--mode", mode_name, name=name, **fields)


def act(tool: str = "contain_act", **args: Any) -> str:
    return f"/tool {tool} {json.dumps(args)}"


async def test_extension_reads_no_store_workspace_sibling_or_home_file(tmp_path: Path, record: Record) -> None:
    """workspace: none, cwd = the dir holding the store: store (+ sidecars), workspace, sibling manifest, home → denied."""
    require("fs_read_confinement")
    async with FaultHost(session_id=SESSION, store=tmp_path / "store.db") as first:  # a store with a user message
        await first.chat("secret user message")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("workspace secret")
    home_file = Path.home() / f".hookwire-fault-{os.getpid()}-{random.randrange(10**9)}"
    home_file.write_text("home secret")
    sibling = contain(tmp_path, "ok", name="sibling")
    reader = contain(tmp_path, "read", cwd=str(tmp_path))
    try:
        async with host(tmp_path, reader, sibling, sandbox="auto", workspace=workspace) as agent:
            store = tmp_path / "store.db"
            secrets = [str(store), *(str(store) + s for s in ("-wal", "-shm") if Path(str(store) + s).exists()),
                       str(workspace), str(workspace / "notes.txt"), str(sibling), str(home_file)]
            own_code = str(Path(__file__).parent / "fixtures" / "containment_ext.py")
            sent = act(paths=[*secrets, own_code])
            result = await agent.chat(sent)
            out = tool_output(result, "contain_act")
        assert out[own_code].startswith("read "), out  # the probe itself works
        leaked = {p: v for p, v in out.items() if p != own_code and (v.startswith("read") or v.startswith("listed"))}
        assert leaked == {}, leaked
    finally:
        home_file.unlink()
    await persisted_and_next_turn_works(tmp_path, result)  # (the first message is the earlier secret one)
    record("workspace none reads store/ws/sibling/home", "every read fails (hidden or covered)",
           f"{len(secrets)} paths: " + ", ".join(sorted({v.split(':')[0] for p, v in out.items() if p != own_code})))


async def test_extension_sees_only_its_own_processes(tmp_path: Path, record: Record) -> None:
    """A host process with a --password= marker is invisible: /proc lists only the extension (pid 1 of its namespace)."""
    require("pid_namespace")
    marker = f"--password=hw{random.randrange(10**9)}"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        sent = act(marker=marker)
        async with host(tmp_path, contain(tmp_path, "procs"), sandbox="auto") as agent:
            result = await agent.chat(sent)
            out = tool_output(result, "contain_act")
        assert pids_with_arg(marker) == [other.pid]  # the marker is really there, on the host
        assert out == {"pids": [1], "seen": False}
    finally:
        other.kill()
        other.wait()
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("extension lists /proc for a --password= marker", "sees pid 1 only (itself), no marker",
           f"pids {out['pids']}, marker seen: {out['seen']}")


def sleepers(marker: str) -> list[int]:
    """Pids of `sleep <marker>` processes (not the host script that carries the marker in its source)."""
    return [p for p in pids_with_arg(marker) if _cmdline(p).startswith(b"sleep\0")]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def _escape(agent: FaultHost) -> tuple[str, str]:
    marker = f"3000.{random.randrange(10**9)}"
    sent = act(marker=marker)
    result = await agent.chat(sent)
    assert tool_output(result, "contain_act") == "started"
    assert await wait_until(lambda: len(sleepers(marker)) == 1, 10)
    return marker, sent


async def test_setsid_grandchild_is_gone_after_unload(tmp_path: Path, record: Record) -> None:
    """A `sleep` started with setsid() and stdin closed dies when its extension is unloaded."""
    require("pid_namespace")
    async with host(tmp_path, contain(tmp_path, "escape"), sandbox="auto") as agent:
        marker, sent = await _escape(agent)
        assert await agent.manager.unload("contain")
        gone = await wait_until(lambda: not sleepers(marker), 10)
        assert gone, sleepers(marker)
    await persisted_and_next_turn_works(tmp_path, None, sent)
    record("setsid grandchild after unload()", "gone (pid namespace torn down)", "gone")


async def test_setsid_grandchild_is_gone_after_close(tmp_path: Path, record: Record) -> None:
    """A `sleep` started with setsid() and stdin closed dies when the host closes."""
    require("pid_namespace")
    async with host(tmp_path, contain(tmp_path, "escape"), sandbox="auto") as agent:
        marker, sent = await _escape(agent)
    assert await wait_until(lambda: not sleepers(marker), 10), sleepers(marker)
    await persisted_and_next_turn_works(tmp_path, None, sent)
    record("setsid grandchild after close()", "gone (pid namespace torn down)", "gone")


HOST_SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    sys.path[:0] = [{helpers!r}, {helpers!r} + "/.."]
    from fault_helpers import FaultHost
    async def main():
        async with FaultHost(session_id={session!r}, store={store!r}, extensions=[{manifest!r}], sandbox="auto") as a:
            await a.chat({sent!r})
            print("started", flush=True)
            await asyncio.sleep(120)
    asyncio.run(main())
""")


async def test_setsid_grandchild_is_gone_after_kill_9_of_the_host(tmp_path: Path, record: Record) -> None:
    """kill -9 of the host takes the extension's whole tree down (PDEATHSIG), setsid grandchild included."""
    require("pid_namespace")
    marker = f"3000.{random.randrange(10**9)}"
    sent = act(marker=marker)
    script = HOST_SCRIPT.format(helpers=str(Path(__file__).parent), session=SESSION, store=str(tmp_path / "store.db"),
                                manifest=str(contain(tmp_path, "escape")), sent=sent)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert line == b"started\n"
        assert len(sleepers(marker)) == 1
        proc.kill()
        proc.wait()
        gone = await wait_until(lambda: not sleepers(marker), 15)
        assert gone, sleepers(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    await persisted_and_next_turn_works(tmp_path, None, sent)
    record("setsid grandchild after kill -9 of the host", "gone (PDEATHSIG, pid namespace)", "gone")


async def test_sibling_cannot_squat_the_victims_socket_names(tmp_path: Path, record: Record) -> None:
    """A sibling can't bind sockets in the victim's private runtime subdir; the victim restarts fine."""
    require("landlock_fs")
    victim = contain(tmp_path, "ok", name="victim", restart={"backoffMs": 50})
    squatter = contain(tmp_path, "squat", name="squatter")
    async with host(tmp_path, victim, squatter, sandbox="auto") as agent:
        runtime = agent.manager._registry.exts["victim"]  # noqa: SLF001 - the test needs the victim's socket dir
        assert runtime.socket_path is not None
        sent = act("squatter_act", dir=str(runtime.socket_path.parent))
        result = await agent.chat(sent)
        squat = tool_output(result, "squatter_act")
        assert squat.startswith("bound 0 ("), squat
        pid = next(e.pid for e in agent.manager.extensions() if e.name == "victim")
        assert pid is not None
        os.kill(pid, 9)
        assert await wait_until(lambda: next(e for e in agent.manager.extensions() if e.name == "victim").state
                                == "running" and next(e for e in agent.manager.extensions()
                                                      if e.name == "victim").pid != pid, 20)
        again = await agent.chat(act("victim_act"))
        assert tool_output(again, "victim_act") == "ok"
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("sibling squats the victim's socket names", "cannot bind there; victim restarts and serves",
           f"{squat}; victim restarted, tool ok")


async def test_memory_limit_holds_for_the_whole_process_tree(tmp_path: Path, record: Record) -> None:
    """Six children of 100 MB under memoryMb 256: at most two hold their memory; the host and the turn go on."""
    require("memory_cgroup")
    sent = act(children=6, mb=100)
    async with host(tmp_path, contain(tmp_path, "memory", limits={"memoryMb": 256}, timeouts={"toolMs": 60000}),
                    sandbox="auto") as agent:
        result = await agent.chat(sent)
        assert result.status == "completed"
        out = tool_output(result, "contain_act")
    assert isinstance(out, dict) and out["held"] <= 2, out
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("6 children x 100 MB under memoryMb 256", "at most 2 hold (memory cgroup), turn completes",
           f"{out['held']} of 6 held their memory")


async def test_host_unix_socket_outside_the_tree_is_unreachable(tmp_path: Path, record: Record) -> None:
    """network: [] and a host Unix socket elsewhere (think docker.sock): not in the private root, ENOENT."""
    require("fs_read_confinement")
    with tempfile.TemporaryDirectory(prefix="hwdb-") as elsewhere:
        path = Path(elsewhere) / "db.sock"
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(str(path))
        srv.listen(1)
        try:
            sent = act(path=str(path))
            async with host(tmp_path, contain(tmp_path, "connect"), sandbox="auto") as agent:
                result = await agent.chat(sent)
                out = tool_output(result, "contain_act")
        finally:
            srv.close()
    assert out == "FileNotFoundError: No such file or directory"
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("connect to a host Unix socket (network: [])", "not in the private root: ENOENT", out)


async def test_deep_scratch_tree_does_not_break_close(tmp_path: Path, record: Record,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A 1,200-level chain in scratch (sandbox off: on the host's disk): close finishes, removes it, closes the store."""
    sent = act(levels=1200)
    agent = FaultHost(session_id=SESSION, store=tmp_path / "store.db", extensions=[contain(tmp_path, "deep")],
                      sandbox="off")
    await agent.start()
    result = await agent.chat(sent)
    assert tool_output(result, "contain_act") == "1200 levels"
    runtime = agent.manager._launcher._runtime  # noqa: SLF001 - the test checks the dir is gone
    assert runtime is not None and runtime.exists()
    await agent.close()
    assert not runtime.exists()
    assert agent.store.raw._closed  # noqa: SLF001
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("1,200-level dir chain in scratch, then close()", "close finishes, dir removed, store closed",
           "closed; runtime dir gone; store closed")


def _zygotes() -> list[int]:
    """Zygote processes started by this test process."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == os.getpid() and b"_zygote_main.py" in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


async def test_failed_start_leaves_no_zygote_runtime_dir_or_extension(tmp_path: Path, record: Record,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Agent.start() with one good and one early-exiting extension fails and closes all it started."""
    runtime_parent = Path(tempfile.mkdtemp(prefix="hwrt-"))
    monkeypatch.setattr(tempfile, "tempdir", str(runtime_parent))
    try:
        zygotes_before = _zygotes()
        agent = FaultHost(session_id=SESSION, store=tmp_path / "store.db", sandbox="auto",
                          extensions=[contain(tmp_path, "ok", name="good"), contain(tmp_path, "exit_early")])
        with pytest.raises(ExtensionStartError) as err:
            await agent.start()
        assert "exited with code 3 before the handshake" in str(err.value)
        left = sorted(p.name for p in runtime_parent.iterdir())
        assert left == []
        assert await wait_until(lambda: _zygotes() == zygotes_before, 10), _zygotes()
        assert agent.store.raw._closed  # noqa: SLF001
    finally:
        monkeypatch.undo()
        for p in runtime_parent.iterdir():
            subprocess.run(["rm", "-rf", str(p)], check=False)
        runtime_parent.rmdir()
    await persisted_and_next_turn_works_without_messages(tmp_path)
    record("Agent.start() with an extension that exits early", "raises; no zygote, runtime dir or store left open",
           f"runtime entries left: {left}; zygotes: {len(_zygotes()) - len(zygotes_before)} new")


async def persisted_and_next_turn_works_without_messages(tmp_path: Path) -> None:
    """The store a failed start opened is usable: a fresh host completes a turn on it."""
    async with FaultHost(session_id=SESSION, store=tmp_path / "store.db") as agent:
        assert await agent.store.messages() == []
        nxt = await agent.chat("next turn")
        assert nxt.status == "completed" and nxt.message["content"] == "echo: next turn"


async def test_scratch_is_capped_at_scratch_mb(tmp_path: Path, record: Record) -> None:
    """limits.scratchMb 16: writing scratch stops at 16 MiB with ENOSPC; the turn goes on."""
    require("scratch_quota")
    sent = act()
    async with host(tmp_path, contain(tmp_path, "fill", limits={"scratchMb": 16}), sandbox="auto") as agent:
        result = await agent.chat(sent)
        out = tool_output(result, "contain_act")
    assert out == {"mb": 16, "error": "OSError: No space left on device"} or (
        out["mb"] in (15, 16) and out["error"] == "OSError: No space left on device"), out
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("scratch fill with scratchMb 16", "ENOSPC at 16 MiB, turn completes", f"{out['mb']} MiB, {out['error']}")
