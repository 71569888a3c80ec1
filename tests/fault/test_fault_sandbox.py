"""Sandbox faults through real turns: memory bomb, CPU spin, fork bomb, network, writes outside scratch,
a foreign client on the extension's socket, HostBridge calls beyond the manifest's permissions.

Each scenario runs a real host.Agent turn on a SQLite store (sandbox "auto" where a limit is under test), then
checks the persisted messages and a next turn.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_helpers import host, mode, persisted_and_next_turn_works, process_gone, tool_output, wait_until

Record = Callable[[str, str, str], None]
ACT = "/tool misbehave_act {}"


async def test_memory_bomb_fails_the_tool_not_the_host(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "memory_bomb", limits={"memoryMb": 256})
    async with host(tmp_path, path, sandbox="auto") as agent:
        result = await agent.chat(ACT)
        assert result.status == "completed"
        output = str(tool_output(result, "misbehave_act"))
        assert "MemoryError" in output or "went away" in output
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("memory bomb (limit 256 MB)", "allocation fails inside the sandbox, turn completes", output[:60])


async def test_cpu_spin_is_killed_by_the_cpu_limit(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "cpu_spin", limits={"cpuSeconds": 2}, timeouts={"toolMs": 30000},
                restart={"backoffMs": 50})
    async with host(tmp_path, path, sandbox="auto") as agent:
        pid = agent.manager.extensions()[0].pid
        result = await agent.chat(ACT)
        assert result.status == "completed"
        output = str(tool_output(result, "misbehave_act"))
        assert "went away" in output  # killed (SIGXCPU/SIGKILL), not timed out
        # Restarted: running again under a new pid (the tool's error can arrive before the exit is handled).
        assert await wait_until(lambda: agent.manager.extensions()[0].state == "running"
                                and agent.manager.extensions()[0].pid != pid, 15)
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("CPU spin (limit 2 s)", "killed by RLIMIT_CPU, tool error, restarted", "killed; tool error; restarted")


async def test_fork_bomb_is_contained(tmp_path: Path, record: Record) -> None:
    # Bounded even without the limit: at most 200 children, each exits after 20 s, all in the group we kill.
    path = mode(tmp_path, "fork_bomb", limits={"processes": 32},
                timeouts={"toolMs": 15000, "healthIntervalMs": 500, "healthTimeoutMs": 500, "healthFailures": 2})
    async with host(tmp_path, path, sandbox="auto") as agent:
        pid = agent.manager.extensions()[0].pid
        result = await agent.chat(ACT)
        output = tool_output(result, "misbehave_act")
        assert result.status == "completed"
        # Either fork() fails at the limit, or the extension's own threads can't start and it dies, or gRPC is
        # wedged without threads and the call times out (which one depends on gRPC's thread pool state): contained.
        contained = (isinstance(output, dict) and output["forked"] < 32 and output["error"]) or (
            "went away" in output or "timed out" in output)
        assert contained, output
    assert await wait_until(lambda: process_gone(pid), 10)
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("fork bomb (limit 32 tasks)", "fork fails at the limit, group reaped on close",
           f"forked {output['forked']}, then {output['error'][:30]}" if isinstance(output, dict)
           else "gRPC threads refused at the limit: "
           + ("extension died, tool error" if "went away" in output else "gRPC wedged, tool timed out"))


@pytest.fixture
def tcp_server() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.setblocking(False)
    yield srv, srv.getsockname()[1]
    srv.close()


async def test_network_attempt_is_refused(tmp_path: Path, record: Record, tcp_server: tuple[socket.socket, int]) -> None:
    srv, port = tcp_server
    path = mode(tmp_path, "network", "--port", str(port))
    async with host(tmp_path, path, sandbox="auto") as agent:
        result = await agent.chat(ACT)
        output = str(tool_output(result, "misbehave_act"))
    assert output != "connected" and "Error" in output
    with pytest.raises(BlockingIOError):
        srv.accept()  # nothing ever connected
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("network attempt (network: [])", "no route out of the net namespace", output[:60])


async def test_write_outside_scratch_is_denied(tmp_path: Path, record: Record) -> None:
    target = tmp_path / "escaped.txt"
    path = mode(tmp_path, "write_outside", "--path", str(target))
    async with host(tmp_path, path, sandbox="auto") as agent:
        result = await agent.chat(ACT)
        output = str(tool_output(result, "misbehave_act"))
    assert not target.exists()
    # Landlock (EACCES), or first the private root that shows the extension's tree read-only (EROFS).
    assert "PermissionError" in output or "Read-only file system" in output, output
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("write outside scratch", "denied (read-only root / Landlock), nothing written", output[:60])


FOREIGN_CLIENT = textwrap.dedent("""
    import sys, grpc
    from extension_sdk.proto import extension_pb2 as pb, extension_pb2_grpc
    with grpc.insecure_channel(sys.argv[1]) as ch:
        try:
            extension_pb2_grpc.ExtensionStub(ch).Describe(pb.DescribeRequest(protocol_version="1"), timeout=10)
            print("OK")
        except grpc.RpcError as exc:
            print(exc.code().name)
""")


async def test_foreign_process_without_the_token_is_unauthenticated(tmp_path: Path, record: Record) -> None:
    async with host(tmp_path, mode(tmp_path, "ok")) as agent:
        ext = next(iter(agent.manager._exts.values()))  # noqa: SLF001 - the socket the extension bound
        assert ext.proc is not None
        out = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", FOREIGN_CLIENT, ext.proc.target], capture_output=True, text=True,
            timeout=60,
        )
        assert out.stdout.strip() == "UNAUTHENTICATED", out.stderr[-500:]
        result = await agent.chat(ACT)  # the real host still gets through
        assert tool_output(result, "misbehave_act") == "ok"
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("foreign client on the extension socket", "UNAUTHENTICATED without the token", out.stdout.strip())


async def test_bridge_calls_beyond_permissions_are_denied_and_audited(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    workspace = tmp_path / "ws"
    path = mode(tmp_path, "bridge", permissions={"workspace": "read"})
    with caplog.at_level(logging.INFO, logger="hookwire.audit"):
        async with host(tmp_path, path, workspace=workspace) as agent:
            result = await agent.chat(ACT)
            output = tool_output(result, "misbehave_act")
    assert "PERMISSION_DENIED" in output["write"] or "denied" in output["write"].lower(), output
    assert output["escape"] != "allowed" and not (workspace / "note.txt").exists()
    audit = [r.getMessage() for r in caplog.records if r.name == "hookwire.audit"]
    assert any("misbehave" in line and "write_file" in line.lower().replace("writefile", "write_file")
               and "denied" in line.lower() for line in audit), audit
    assert any("misbehave" in line and "passwd" in line and "allowed" not in line.split("outcome=")[-1]
               for line in audit), audit
    await persisted_and_next_turn_works(tmp_path, result, ACT)
    record("HostBridge beyond permissions / path escape", "denied and audited",
           f"write: {output['write'][:25]}; ../../etc/passwd: {output['escape'][:25]}")
