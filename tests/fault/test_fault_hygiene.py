"""Hygiene faults through real turns (issue 10, items 4, 12, 14-18): tool names an extension must not take, a
symlink race against the HostBridge, `context: own` of a prefix-sharing sibling, a token in a command manifest,
terminal escapes on the CLI, a flood of refused bridge calls in the audit log, and manifests built to pin the host.

Each scenario runs real extension processes (tests/fault/fixtures/hygiene_ext.py) under a host.Agent on a SQLite
store, then checks that the persisted messages are intact and the next turn works.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import FaultHost, echo, host, manifest, persisted_and_next_turn_works, tool_output, wait_until

from host import ManifestError, ToolNameCollision
from host.extensions._bridge_server import AUDIT_BURST, AUDIT_RATE

Record = Callable[[str, str, str], None]
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")


def hygiene(tmp_path: Path, name: str, mode: str, *args: str, **fields: Any) -> Path:
    """A manifest named `name` for hygiene_ext.py in one mode."""
    return manifest(tmp_path, "hygiene_ext.py", "--mode", mode, *args, name=name, **fields)


def host_paid() -> str:
    return "paid by the host"


class PayHost(FaultHost):
    """A host app with its own tool `pay_invoice` (unless `late`: then only once `late` is cleared)."""

    late = False

    def get_tools(self) -> dict[str, Any]:
        tools: dict[str, Any] = {"echo": echo}
        if not self.late:
            tools["pay_invoice"] = host_paid
        return tools


class LatePayHost(PayHost):
    late = True


async def first_turn(tmp_path: Path, prompt: str = "/tool echo {\"msg\": \"hi\"}") -> Any:
    """A turn with no extension, so the store holds a conversation before the scenario."""
    async with FaultHost(session_id="fault", store=tmp_path / "store.db") as agent:
        return await agent.chat(prompt)


# ---------------------------------------------------------------------------------------------- item 4: tool names


async def test_extension_tool_named_like_a_host_tool_fails_start(tmp_path: Path, record: Record) -> None:
    """Extension `pay` with tool `invoice` (exposed `pay_invoice`) is refused where it meets the host tool."""
    before = await first_turn(tmp_path)
    with pytest.raises(ToolNameCollision) as caught:
        async with host(tmp_path, hygiene(tmp_path, "pay", "tools", "--tool", "invoice"), cls=PayHost):
            pass
    message = str(caught.value)
    assert "'pay_invoice'" in message and "the host tool 'pay_invoice'" in message
    assert "extension 'pay' (its tool 'invoice')" in message
    await persisted_and_next_turn_works(tmp_path, before, '/tool echo {"msg": "hi"}')
    record("extension tool shadows a host tool", "start refused naming both owners", message[message.find("tool name"):][:80])


async def test_host_tool_added_after_start_keeps_its_name_in_the_turn(tmp_path: Path, record: Record) -> None:
    """A host tool that appears after start wins its name in the turn; the extension's is withheld and traced."""
    async with host(tmp_path, hygiene(tmp_path, "pay", "tools", "--tool", "invoice"), cls=LatePayHost) as agent:
        agent.late = False
        result = await agent.chat("/tool pay_invoice {}")
    assert tool_output(result, "pay_invoice") == "paid by the host"
    denied = [e for e in result.trace if e.hook == "tools" and e.outcome == "denied"]
    assert [e.extension for e in denied] == ["pay"]
    assert "the host tool 'pay_invoice'" in denied[0].detail and "extension 'pay' (its tool 'invoice')" in denied[0].detail
    await persisted_and_next_turn_works(tmp_path, result, "/tool pay_invoice {}")
    record("host tool appears after start", "host tool runs; extension tool withheld, traced", "host's output; 1 denied")


async def test_two_extensions_meeting_on_one_tool_name_are_refused_at_load(tmp_path: Path, record: Record) -> None:
    """`my` + `tools_search` and `my-tools` + `search` are both `my_tools_search`: the load is refused."""
    before = await first_turn(tmp_path)
    my = hygiene(tmp_path, "my", "tools", "--tool", "tools_search")
    my_tools = hygiene(tmp_path, "my-tools", "tools", "--tool", "search")
    with pytest.raises(ToolNameCollision) as caught:
        async with host(tmp_path, my, my_tools):
            pass
    message = str(caught.value)
    assert "tool name 'my_tools_search' collides" in message
    assert "extension 'my' (its tool 'tools_search')" in message and "extension 'my-tools' (its tool 'search')" in message
    await persisted_and_next_turn_works(tmp_path, before, '/tool echo {"msg": "hi"}')
    record("two extensions, one tool name", "load refused naming both owners", "my_tools_search: my + my-tools")


async def test_restart_cannot_take_a_tool_name(tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture) -> None:
    """A tool that appears in Describe only after a restart and collides is dropped; the holder keeps the name."""
    my = hygiene(tmp_path, "my", "tools", "--tool", "tools_search")
    my_tools = hygiene(tmp_path, "my-tools", "tools", "--tool", "other", "--after-restart", "search",
                       restart={"backoffMs": 0})
    with caplog.at_level(logging.ERROR, logger="hookwire.extensions"):
        async with host(tmp_path, my, my_tools) as agent:
            await agent.chat("/tool my_tools_crash {}")
            await wait_until(lambda: any(i.name == "my-tools" and i.restarts == 1 and i.state == "running"
                                         for i in agent.manager.extensions()), timeout=30)
            result = await agent.chat("/tool my_tools_search {}")
            tools = {i.name: i.tools for i in agent.manager.extensions()}
    assert tool_output(result, "my_tools_search") == "my:tools_search"
    assert tools["my-tools"] == ["my_tools_other", "my_tools_crash"]
    dropped = [r.getMessage() for r in caplog.records if "the tool is dropped" in r.getMessage()]
    assert len(dropped) == 1 and "extension 'my' (its tool 'tools_search')" in dropped[0], dropped
    await persisted_and_next_turn_works(tmp_path, None)
    record("restart brings a colliding tool", "tool dropped, logged; holder keeps the name", "my:tools_search")


# ------------------------------------------------------------------------------------ item 14: context `own`


async def test_context_own_is_exactly_the_extensions_namespace(tmp_path: Path, record: Record) -> None:
    """`context: own` of `my` reaches `my` and `my.*`, not `my_tools.usage` (of `my-tools`) nor `my_tools_usage`."""
    path = hygiene(tmp_path, "my", "context", permissions={"context": {"read": "own", "write": "own"}})
    labels = ["my", "my.notes", "my_tools.usage", "my_tools_usage"]
    prompt = '/tool my_probe {"labels": ' + str(labels).replace("'", '"') + "}"
    async with host(tmp_path, path) as agent:
        result = await agent.chat(prompt)
        stored = {label: await agent.get_context(label) for label in labels}
    assert tool_output(result, "my_probe") == {
        "my": "ok", "my.notes": "ok", "my_tools.usage": "PERMISSION_DENIED", "my_tools_usage": "PERMISSION_DENIED",
    }
    assert stored == {"my": "written by my", "my.notes": "written by my", "my_tools.usage": None, "my_tools_usage": None}
    await persisted_and_next_turn_works(tmp_path, result, prompt)
    record("context own vs a prefix-sharing sibling", "my.* only; my_tools.usage denied", "my, my.notes ok; others denied")


# -------------------------------------------------------------------------------- item 15: tokens


async def test_token_in_a_command_manifest_is_refused(tmp_path: Path, record: Record) -> None:
    """A command manifest with `token:` fails to load with an error naming the file and the field."""
    before = await first_turn(tmp_path)
    path = hygiene(tmp_path, "tok", "token", token="chosen-by-the-manifest")
    with pytest.raises(ManifestError) as caught:
        async with host(tmp_path, path):
            pass
    assert Path(caught.value.file or '').resolve() == path.resolve() and caught.value.field == "token"
    assert "`token` is for `endpoint` manifests only" in str(caught.value)
    await persisted_and_next_turn_works(tmp_path, before, '/tool echo {"msg": "hi"}')
    record("token: in a command manifest", "refused, naming file and field", f"field {caught.value.field!r}")


async def test_started_extensions_get_distinct_unpredictable_tokens(tmp_path: Path, record: Record) -> None:
    """Each started extension gets its own 256-bit token, in none of the manifests."""
    a, b = hygiene(tmp_path, "a", "token"), hygiene(tmp_path, "b", "token")
    async with host(tmp_path, a, b) as agent:
        first = await agent.chat("/tool a_token {}")
        second = await agent.chat("/tool b_token {}")
    tokens = [tool_output(first, "a_token"), tool_output(second, "b_token")]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{43}", t) for t in tokens), tokens
    assert tokens[0] != tokens[1]
    assert not any(t in (a.read_text() + b.read_text()) for t in tokens)
    await persisted_and_next_turn_works(tmp_path, second, "/tool a_token {}")
    record("tokens of started extensions", "one per extension, 256-bit, host-made", "2 distinct 43-char tokens")


# --------------------------------------------------------------------------- item 16: terminal escapes on the CLI


_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


async def test_cli_prints_no_terminal_escapes_from_extensions_or_the_model(tmp_path: Path, record: Record) -> None:
    """`hookwire run` shows an extension's escapes and bidi overrides as visible text, in output and log lines."""
    path = hygiene(tmp_path, "esc", "escapes")
    prompt = "/tool esc_act {}"
    proc = await asyncio.to_thread(
        subprocess.run,
        [HOOKWIRE, "--debug", "run", prompt, "-e", str(path), "--session", "fault", "--store",
         str(tmp_path / "store.db"), "--workspace", str(tmp_path / "ws"), "--sandbox", "off"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = r"\x1b[2J\x1b]0;pwned\x07\x1b[31mred\x1b[0m \u202eevil\u202c \x9b31m\x0dX"
    assert shown in proc.stderr  # the extension's stderr line, logged
    assert _RAW_CONTROL.findall(proc.stdout) == [] and _RAW_CONTROL.findall(proc.stderr) == []
    await persisted_and_next_turn_works(tmp_path, None, prompt)
    record("terminal escapes via the CLI", "shown escaped (\\x1b, \\u202e), never raw", "0 raw control chars; escaped")


# ----------------------------------------------------------------------------- item 17: audit-log flood


async def test_refused_bridge_calls_flood_the_audit_log_no_more_than_the_limit(
    tmp_path: Path, record: Record, caplog: pytest.LogCaptureFixture
) -> None:
    """2,000 refused bridge calls give a bounded number of audit lines; the rest are counted in summary lines."""
    count = 1000
    path = hygiene(tmp_path, "flood", "flood", "--count", str(count), permissions={"context": {"read": "own"}})
    with caplog.at_level(logging.INFO, logger="hookwire.audit"):
        async with host(tmp_path, path) as agent:
            t0 = time.monotonic()
            result = await agent.chat("/tool flood_act {}")
            elapsed = time.monotonic() - t0
    assert tool_output(result, "flood_act") == {"UNAUTHENTICATED": count, "PERMISSION_DENIED": count}
    lines = [r.getMessage() for r in caplog.records if r.name == "hookwire.audit"]
    per_call = [line for line in lines if line.startswith("bridge extension=") and "outcome=" in line]
    summaries = [line for line in lines if "similar audit lines suppressed" in line]
    suppressed = sum(int(re.search(r": (\d+) similar", line).group(1)) for line in summaries)  # type: ignore[union-attr]
    assert len(per_call) + suppressed == 2 * count  # every refused call is logged or counted, none lost
    assert len(per_call) <= 2 * (AUDIT_BURST + AUDIT_RATE * elapsed + 1)
    assert {line.split()[1] for line in summaries} == {"extension=?:", "extension=flood:"}
    await persisted_and_next_turn_works(tmp_path, result, "/tool flood_act {}")
    record("audit-log flood (bogus token, denied)", "rate-limited; rest counted in summaries",
           f"{len(per_call)} lines + {suppressed} suppressed of {2 * count}")


# ------------------------------------------------------------------------------------ item 12: bridge race


SWAPPER = textwrap.dedent("""
    import os, shutil, sys, time
    workspace, outside, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.chdir(workspace)
    end = time.monotonic() + seconds
    swaps = 0
    while time.monotonic() < end:  # `dir` is a real directory, then for a moment a symlink to `outside`
        try:
            os.rename("dir", "parked")
            os.symlink(outside, "dir")
            time.sleep(0.002)
            os.unlink("dir")
            os.rename("parked", "dir")
            swaps += 1
            time.sleep(0.002)
        except OSError:  # the host made `dir` meanwhile (a write's parent): put things back and go on
            for _ in range(1000):
                try:
                    if os.path.islink("dir"):
                        os.unlink("dir")
                    if os.path.isdir("parked"):
                        if os.path.isdir("dir"):
                            shutil.rmtree("dir", ignore_errors=True)
                        os.rename("parked", "dir")
                    break
                except OSError:
                    continue
    print(swaps)
""")


async def test_directory_swapped_for_a_symlink_during_bridge_writes_never_leads_out(
    tmp_path: Path, record: Record
) -> None:
    """A process swapping the written file's directory for a symlink out never gets a bridge write outside."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "dir").mkdir(parents=True)
    outside.mkdir()
    path = hygiene(tmp_path, "racer", "race", "--seconds", "3", permissions={"workspace": "read-write"})
    async with host(tmp_path, path, workspace=workspace) as agent:
        swapper = await asyncio.create_subprocess_exec(
            sys.executable, "-c", SWAPPER, str(workspace), str(outside), "4", stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        result = await agent.chat("/tool racer_act {}")
        out, err = await swapper.communicate()
        assert swapper.returncode == 0, err.decode()[-1000:]
        swaps = int(out)
    counts = tool_output(result, "racer_act")
    assert os.listdir(outside) == []
    assert counts.get("written", 0) > 0 and counts.get("PERMISSION_DENIED", 0) > 0, counts  # both states were hit
    await persisted_and_next_turn_works(tmp_path, result, "/tool racer_act {}")
    record("dir/symlink swap race on bridge WriteFile", "never writes outside the workspace",
           f"{counts.get('written')} in, {counts.get('PERMISSION_DENIED')} denied, 0 out; {swaps} swaps")


# ------------------------------------------------------------------------------------ item 18: manifest caps


async def test_oversized_or_alias_bomb_manifests_are_refused_quickly(tmp_path: Path, record: Record) -> None:
    """A 50 MB manifest and a YAML alias bomb fail to load within a second, naming the file."""
    before = await first_turn(tmp_path)
    big = tmp_path / "big.yaml"
    big.write_text("name: big\ncommand: [x]\ndescription: " + "a" * (50 * 1024 * 1024) + "\n")
    bomb = tmp_path / "bomb.yaml"
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi")]
    bomb.write_text("name: bomb\ncommand: [x]\n" + "\n".join(levels) + "\n")
    errors = []
    for path in (big, bomb):
        t0 = time.monotonic()
        with pytest.raises(ManifestError) as caught:
            async with host(tmp_path, path):
                pass
        errors.append((time.monotonic() - t0, caught.value))
    assert Path(errors[0][1].file or '') == big and "larger than 1048576 bytes" in errors[0][1].reason
    assert Path(errors[1][1].file or '') == bomb and "YAML aliases (*a) are not allowed" in errors[1][1].reason
    await persisted_and_next_turn_works(tmp_path, before, '/tool echo {"msg": "hi"}')
    record("50 MB manifest / YAML alias bomb", "refused before parsing / at the first alias",
           f"{errors[0][0]:.2f} s / {errors[1][0]:.2f} s, file named")


@pytest.mark.parametrize(("field", "value", "where"), [
    ("restart", {"windowSeconds": 10**9}, "restart.windowSeconds"),
    ("timeouts", {"startMs": 10**9}, "timeouts.startMs"),
    ("limits", {"cpuSeconds": 10**9}, "limits.cpuSeconds"),
    ("env", ["A"] * 300, "env"),
])
async def test_unbounded_manifest_values_are_refused_naming_the_field(
    tmp_path: Path, record: Record, field: str, value: Any, where: str
) -> None:
    """Limits, timeouts, restart windows and list lengths have upper bounds; the error names file and field."""
    path = hygiene(tmp_path, "bounds", "token", **{field: value})
    with pytest.raises(ManifestError) as caught:
        async with host(tmp_path, path):
            pass
    assert Path(caught.value.file or '').resolve() == path.resolve() and caught.value.field == where
    assert re.search(r"less than or equal to|at most", caught.value.reason), caught.value.reason
    record(f"manifest {where} out of bounds", "refused naming file and field", caught.value.reason[:60])
