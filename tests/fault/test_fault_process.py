"""Process faults: an extension killed or stopped mid-hook, late replies, a crash loop, the host cancelled or killed.

Each scenario runs a real host.Agent turn on a SQLite store, then checks the persisted messages and a next turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from fault_helpers import (
    SESSION,
    FaultHost,
    ext_pid,
    group_gone,
    group_members,
    host,
    mode,
    persisted_and_next_turn_works,
    process_gone,
    scratch_dir,
    tool_output,
    wait_until,
)

Record = Callable[[str, str, str], None]
ECHO = '/tool echo {"msg": "a"}'


async def test_sigkill_mid_hook_fails_open_and_the_extension_is_restarted(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "hang_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 20000}},
                restart={"backoffMs": 50})
    async with host(tmp_path, path) as agent:
        pid = ext_pid(agent)
        entered = scratch_dir(agent) / "entered"

        async def kill_when_entered() -> None:
            assert await wait_until(entered.exists, 15)
            os.kill(pid, signal.SIGKILL)

        killer = asyncio.ensure_future(kill_when_entered())
        result = await agent.chat(ECHO)
        await killer
        assert result.status == "completed"
        assert tool_output(result, "echo") == "pong: a"  # failed open: the tool ran
        assert result.failed_open == ["misbehave"]
        assert any(e.hook == "beforeToolCall" and e.outcome == "failed_open" for e in result.trace)
        assert await wait_until(lambda: agent.manager.extensions()[0].restarts == 1
                                and agent.manager.extensions()[0].state == "running", 15)
        restarted = agent.manager.extensions()[0]
        assert restarted.pid is not None and restarted.pid != pid
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("SIGKILL mid-hook", "hook fails open, turn completes, restart",
           f"failed_open={result.failed_open}, restarted pid {pid}->{restarted.pid}")


async def test_sigstopped_fail_closed_extension_blocks_and_is_killed_on_close(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "hang_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 400,
                                                                   "failure": "closed"}})
    async with host(tmp_path, path) as agent:
        pid = ext_pid(agent)
        os.kill(pid, signal.SIGSTOP)
        result = await agent.chat(ECHO)
        assert result.status == "completed"
        output = tool_output(result, "echo")
        assert "blocked" in str(output) and "misbehave" in str(output) and "failure: closed" in str(output)
        assert any(e.outcome == "failed_closed" and "no reply within 400 ms" in e.detail for e in result.trace)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "T"  # still stopped when the host closes
    assert await wait_until(lambda: process_gone(pid), 10)
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("SIGSTOP (stopped extension)", "hook times out, fail-closed blocks, killed on close",
           f"tool output: blocked (failed_closed); pid {pid} gone after close")


async def test_a_stopped_extension_is_found_by_the_health_probe_and_restarted(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "hang_hook", timeouts={"healthIntervalMs": 200, "healthTimeoutMs": 200, "healthFailures": 2})
    async with host(tmp_path, path) as agent:
        pid = ext_pid(agent)
        os.kill(pid, signal.SIGSTOP)  # alive, but answers nothing: no exit for the exit watcher to see
        assert await wait_until(lambda: process_gone(pid), 15)
        # "running" alone would also match the moment before the crash handler marks it restarting
        assert await wait_until(lambda: agent.manager.extensions()[0].restarts == 1
                                and agent.manager.extensions()[0].state == "running", 15)
        restarted = agent.manager.extensions()[0]
        assert restarted.pid is not None and restarted.pid != pid
        result = await agent.chat(ECHO)
        assert result.status == "completed"
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("SIGSTOP, health probe on", "missed health checks count as a crash: killed, restarted",
           f"pid {pid} killed after 2 missed checks, restarted as {restarted.pid}")


async def test_reply_past_the_deadline_is_discarded_and_the_turn_goes_on(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "slow_hook", "--delay-ms", "1200",
                hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 300}})
    async with host(tmp_path, path) as agent:
        result = await agent.chat(ECHO)
        assert tool_output(result, "echo") == "pong: a"  # the late "block" was not applied
        assert result.failed_open == ["misbehave"]
        assert any(e.outcome == "failed_open" and "timeout" in e.detail for e in result.trace)
        await asyncio.sleep(1.2)  # the late reply arrives and is discarded
        assert agent.manager.extensions()[0].state == "running"
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("reply past the deadline", "hook times out, late reply discarded, turn goes on",
           "tool ran (late block ignored), failed_open=['misbehave']")


async def test_turn_deadline_bounds_the_hook_timeout(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "hang_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 30000,
                                                                   "failure": "closed"}})

    class ShortTurn(FaultHost):
        def before_turn(self, ctx):  # type: ignore[no-untyped-def]
            return {"timeout": {"totalMs": 1500}}

    async with host(tmp_path, path, cls=ShortTurn) as agent:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        result = await agent.chat(ECHO)
        waited = loop.time() - t0
        assert waited < 15  # far below the hook's own 30 s timeoutMs
        event = next(e for e in result.trace if e.hook == "beforeToolCall")
        assert event.outcome == "failed_closed" and "bounded by the turn's remaining time" in event.detail
        assert "blocked" in str(tool_output(result, "echo"))
    await persisted_and_next_turn_works(tmp_path, result, ECHO)
    record("turn deadline < hook timeoutMs", "hook waits only the turn's remaining time",
           f"failed_closed after {waited:.1f}s (timeoutMs 30s, totalMs 1.5s)")


async def test_crash_loop_ends_in_quarantine_and_turns_go_on(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "crash_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 5000}},
                restart={"maxCrashes": 2, "backoffMs": 50, "windowSeconds": 60})
    results = []
    async with host(tmp_path, path) as agent:
        for crashes in range(2):
            # serving again after `crashes` crashes ("running" alone also matches before a crash is handled)
            assert await wait_until(lambda: agent.manager.extensions()[0].crashes == crashes
                                    and agent.manager.extensions()[0].state == "running", 15)
            result = await agent.chat(ECHO)
            assert result.status == "completed" and tool_output(result, "echo") == "pong: a"
            results.append(result)
        assert await wait_until(lambda: agent.manager.extensions()[0].state == "quarantined", 10)
        info = agent.manager.extensions()[0]
        result = await agent.chat(ECHO)  # quarantined: skipped, the turn goes on
        assert result.status == "completed" and tool_output(result, "echo") == "pong: a"
        assert any(e.hook == "beforeToolCall" and "quarantined" in e.detail for e in result.trace)
    await persisted_and_next_turn_works(tmp_path, None, ECHO)
    record("crash loop", "restart with backoff, then quarantine; turns go on",
           f"state={info.state} after {info.crashes} crashes; 3 turns completed")


async def test_host_cancelled_mid_turn_reaps_every_child(tmp_path: Path, record: Record) -> None:
    path = mode(tmp_path, "hang_tool", "--grandchild")
    async with host(tmp_path, path) as agent:
        pid = ext_pid(agent)
        assert await wait_until(lambda: len(group_members(pid)) >= 2, 10)  # the extension and its grandchild
        members = group_members(pid)
        turn = asyncio.ensure_future(agent.chat('/tool misbehave_act {}'))
        await asyncio.sleep(0.5)  # the tool is running
        turn.cancel()
        try:
            await turn
        except asyncio.CancelledError:
            pass
    assert await wait_until(lambda: all(process_gone(p) for p in members), 10), group_members(pid)
    assert group_gone(pid)
    await persisted_and_next_turn_works(tmp_path, None, '/tool misbehave_act {}')
    record("host cancelled mid-turn", "every child reaped (pid and process group)",
           f"{len(members)} processes of group {pid} gone")


HOST_SCRIPT = textwrap.dedent("""
    import asyncio, json, sys
    sys.path[:0] = [{helpers!r}, {helpers!r} + "/.."]  # fault_helpers, and the tests' shared `fixtures`
    from fault_helpers import FaultHost
    async def main():
        async with FaultHost(session_id={session!r}, store={store!r}, extensions=[{manifest!r}], sandbox="off") as a:
            print(json.dumps([e.pid for e in a.manager.extensions()]), flush=True)
            await a.chat('/tool echo {{"msg": "a"}}')
    asyncio.run(main())
""")


async def test_killed_host_leaves_no_extension_behind(tmp_path: Path, record: Record) -> None:
    # The turn hangs in an (async) beforeToolCall when the host dies.
    path = mode(tmp_path, "hang_hook", hooks={"beforeToolCall": {"decisions": True, "timeoutMs": 60000}})
    script = HOST_SCRIPT.format(helpers=str(Path(__file__).parent), session=SESSION, store=str(tmp_path / "store.db"),
                                manifest=str(path))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        pids = json.loads(line)
        assert pids and all(not process_gone(p) for p in pids)
        await asyncio.sleep(1.0)  # the turn is in the tool call
        proc.kill()
        proc.wait()
        gone = await wait_until(lambda: all(process_gone(p) for p in pids), 15)
        assert gone, [p for p in pids if not process_gone(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    await persisted_and_next_turn_works(tmp_path, None, ECHO)
    record("host SIGKILLed mid-turn", "extensions exit by themselves (stdin lifeline)",
           f"extension pid(s) {pids} exited; store reopened, next turn ok")
