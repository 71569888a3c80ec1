"""Bounded replies and slow observers (issue 10 items 10 and 19, issue 19 item 2), through real turns on a SQLite
store: a tool output over limits.toolOutputKb is cut with a visible marker before it reaches the transcript; a flood
of preliminaries is thinned and capped while the final output still arrives; a stalled observer is detached for the
rest of the turn and tried again the next; observations a crashed observer lost are counted in the turn's result."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fault_helpers import FaultHost, echo, host, manifest, persisted_and_next_turn_works, scratch_dir, tool_output
from fault_helpers import wait_until

from host import ChunkContext, tool
from host.extensions._convert import PREVIEW_BYTES

Record = Callable[[str, str, str], None]
MIB = 1024 * 1024


def bounds(tmp_path: Path, observer: str = "none", *args: str, **fields: Any) -> Path:
    return manifest(tmp_path, "bounds_ext.py", "--observer", observer, *args, name="bounds", **fields)


def store_bytes(tmp_path: Path) -> int:
    return sum(p.stat().st_size for p in tmp_path.glob("store.db*"))


@tool(description="Sleeps 1.5 s", parameters={"type": "object", "properties": {}})
async def nap() -> str:
    await asyncio.sleep(1.5)
    return "rested"


class PreliminaryHost(FaultHost):
    """Records the preliminary and final tool-result chunks its on_chunk sees, in order; has a slow `nap` tool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results: list[tuple[bool, Any]] = []

    def get_tools(self) -> dict[str, Any]:
        return {"echo": echo, "nap": nap}

    def on_chunk(self, ctx: ChunkContext) -> None:
        if ctx.chunk.type == "tool-result":
            self.results.append((bool(ctx.chunk.preliminary), ctx.chunk.output))


async def test_oversize_text_tool_output_is_cut_to_the_manifest_cap_with_a_visible_marker(
    tmp_path: Path, record: Record
) -> None:
    """A 2 MiB text output with limits.toolOutputKb 64 keeps 64 KiB and says how much was cut, in the store too."""
    async with host(tmp_path, bounds(tmp_path, limits={"toolOutputKb": 64})) as agent:
        result = await agent.chat('/tool bounds_big {"mib": 2}\n/next\ndone')
    output = tool_output(result, "bounds_big")
    assert output == ("hookwire " * (2 * MIB // 9 + 1))[:65536] + f"…[truncated {2 * MIB - 65536} bytes]"
    tool_trace = next(e for e in result.trace if e.hook == "tool:big")
    assert tool_trace.detail == f"output of {2 * MIB + 2} bytes truncated to limits.toolOutputKb (64 KiB)"
    messages = await persisted_and_next_turn_works(tmp_path, result)
    assert len(json.dumps(messages)) < 100_000
    assert store_bytes(tmp_path) < 512 * 1024
    record("tool output over limits.toolOutputKb (item 10)", "cut to the cap with …[truncated N bytes]; store bounded",
           f"kept 64 KiB of 2 MiB; store {store_bytes(tmp_path) // 1024} KiB")


async def test_oversize_json_tool_output_becomes_a_truncated_marker_with_its_size_and_preview(
    tmp_path: Path, record: Record
) -> None:
    """A 2 MiB JSON list over the default cap (256 KiB) is stored as {"$truncated": true, "bytes", "preview"}."""
    async with host(tmp_path, bounds(tmp_path)) as agent:
        result = await agent.chat('/tool bounds_big {"mib": 2, "kind": "list"}\n/next\ndone')
    sent = json.dumps([{"k": "v" * 40}] * (2 * MIB // 52), ensure_ascii=False)
    assert tool_output(result, "bounds_big") == {"$truncated": True, "bytes": len(sent), "preview": sent[:PREVIEW_BYTES]}
    messages = await persisted_and_next_turn_works(tmp_path, result)
    stored = next(p for m in messages for p in m.get("parts", []) if p.get("toolName") == "bounds_big")
    assert stored["output"]["$truncated"] is True and stored["output"]["bytes"] == len(sent)
    record("JSON tool output over the cap (item 10)", '{"$truncated": true, bytes, preview} kept instead',
           f"{len(sent)} bytes -> marker with a {PREVIEW_BYTES} B preview")


async def test_an_oversize_substitute_output_is_cut_to_the_deciders_cap(tmp_path: Path, record: Record) -> None:
    """A beforeToolCall decider substituting 1 MiB for the tool's output gets its own limits.toolOutputKb (16)."""
    m = bounds(tmp_path, "none", "--decider", "substitute_big", limits={"toolOutputKb": 16},
               hooks={"beforeToolCall": {"decisions": True}})
    async with host(tmp_path, m) as agent:
        result = await agent.chat('/tool echo {"msg": "a"}\n/next\ndone')
    cut = 1024 * 1024 - 16384
    assert tool_output(result, "echo") == ("hookwire " * (MIB // 9 + 1))[:16384] + f"…[truncated {cut} bytes]"
    decided = next(e for e in result.trace if e.hook == "beforeToolCall")
    assert decided.detail == f"substitute; output of {MIB + 2} bytes truncated to limits.toolOutputKb (16 KiB)"
    await persisted_and_next_turn_works(tmp_path, result)
    record("1 MiB substitute output, toolOutputKb 16 (item 10)", "cut to the decider's cap with the marker",
           f"16 KiB kept, {cut} bytes cut")


async def test_preliminaries_over_the_per_call_cap_are_dropped_and_the_final_output_still_arrives(
    tmp_path: Path, record: Record
) -> None:
    """limits.toolPreliminaries 10: the first 10 of 5,000 preliminaries reach on_chunk, in order, then the final."""
    m = bounds(tmp_path, limits={"toolPreliminaries": 10})
    async with host(tmp_path, m, cls=PreliminaryHost) as agent:
        result = await agent.chat('/tool bounds_stream {"n": 5000}\n/next\ndone')
        seen = list(agent.results)
    assert seen == [(True, {"i": k}) for k in range(10)] + [(False, "streamed 5000")]
    tool_trace = next(e for e in result.trace if e.hook == "tool:stream")
    assert tool_trace.detail == ("5000 preliminary results: 10 delivered, 4990 coalesced or dropped "
                                 "(4990 over limits.toolPreliminaries=10)")
    await persisted_and_next_turn_works(tmp_path, result)
    record("5,000 preliminaries, toolPreliminaries 10 (item 19)", "10 delivered in order, then the final",
           "10 + final; 4990 dropped, in the trace")


async def test_a_preliminary_flood_is_thinned_after_the_burst_keeping_order(tmp_path: Path, record: Record) -> None:
    """3,000 preliminaries with the default limits: the burst of 64, then about 20/s, increasing, then the final."""
    async with host(tmp_path, bounds(tmp_path), cls=PreliminaryHost) as agent:
        t0 = time.monotonic()
        result = await agent.chat('/tool bounds_stream {"n": 3000}\n/next\ndone')
        wall = time.monotonic() - t0
        seen = list(agent.results)
    prelims = [out["i"] for pre, out in seen if pre]
    assert seen[-1] == (False, "streamed 3000") and all(pre for pre, _ in seen[:-1])
    assert prelims[:64] == list(range(64))
    assert prelims == sorted(set(prelims))  # in order, none twice
    assert 64 <= len(prelims) <= 64 + int(20 * wall) + 1
    await persisted_and_next_turn_works(tmp_path, result)
    record("3,000 preliminaries, default limits (item 19)", "burst of 64, then ~20/s, in order; final delivered",
           f"{len(prelims)} delivered in {wall:.1f} s, then the final")


async def test_a_stalled_observer_is_detached_for_the_rest_of_the_turn_and_tried_again_next_turn(
    tmp_path: Path, record: Record
) -> None:
    """onStepFinish hangs 3 s (hookMs 400): later observations of that turn are not sent; the next turn gets them."""
    m = bounds(tmp_path, "hang_once", "--delay-ms", "3000", timeouts={"hookMs": 400},
               observations={"maxDelayMs": 0})
    async with host(tmp_path, m, cls=PreliminaryHost) as agent:
        first = await agent.chat('/tool echo {"msg": "a"}\n/next\n/tool nap {}\n/next\ndone')
        steps = scratch_dir(agent) / "steps.jsonl"
        await wait_until(steps.exists, 10)  # the observer woke up and handled step 0 of the first turn
        # A tool call's answer comes after the ack of the frames before it: the host has seen the observer recover.
        assert await agent.manager.execute_tool("bounds_stream", {"n": 0}) == "streamed 0"
        second = await agent.chat("again")
        await wait_until(lambda: len(steps.read_text().splitlines()) == 2, 10)
        handled = [json.loads(line) for line in steps.read_text().splitlines()]
    assert first.status == "completed" and first.failed_open == ["bounds"]
    observe = [(e.outcome, e.detail) for e in first.trace if e.hook == "observe"]
    assert observe == [
        ("failed_open", "stalled: observations not acknowledged within 400 ms (timeouts.hookMs); "
                        "detached for the rest of this turn"),
        ("skipped", "2 later observation(s) of this turn not sent (detached: stalled)"),
    ]
    assert handled == [[0, "", first.request_id], [0, "echo: again", second.request_id]]
    assert second.failed_open == []
    await persisted_and_next_turn_works(tmp_path, second)
    record("hung onStepFinish, hookMs 400 (item 19)", "detached for the turn, reported; next turn tried again",
           "steps 1-2 not sent; failed_open; next turn delivered")


async def test_observations_lost_with_a_crashed_observer_are_counted_in_the_turn(tmp_path: Path, record: Record) -> None:
    """onStepFinish exits the process: the turn's two observations are reported lost, nothing waits for an ack."""
    m = bounds(tmp_path, "crash", restart={"backoffMs": 10_000})
    async with host(tmp_path, m, cls=PreliminaryHost) as agent:
        result = await agent.chat('/tool echo {"msg": "a"}\n/next\ndone')
    assert result.status == "completed" and result.message["content"] == "echo: done"
    lost = [e for e in result.trace if e.hook == "observe"]
    assert [(e.outcome, e.detail) for e in lost] == [(
        "failed_open",
        "2 observation(s) of this turn lost: its connection broke before they were handled, "
        "or it was not running",
    )]
    assert "bounds" in result.failed_open
    await persisted_and_next_turn_works(tmp_path, result)
    record("observer crashes mid-turn (issue 19 item 2)", "no wait for the ack; lost observations counted",
           "2 lost, reported as failed_open")
