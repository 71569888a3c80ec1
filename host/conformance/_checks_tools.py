"""Clauses 5.1-5.5: tools on ExecuteTool and, with connect-tools, as frames on the Connect stream."""

from __future__ import annotations

import asyncio
import json

import grpc

from extension_sdk.proto import extension_pb2 as pb

from ._checks_hooks import FrameIds
from ._kit import Kit
from ._wire import ConnectSession, call_context, decode_json, sample_instance

UNKNOWN_TOOL = "hookwire_kit_no_such_tool"
TOOL_HOOK = "tool"  # HookError.hook of a tool's error event (docs/protocol.md §5)
OBSERVABLE_MS = 50.0  # a tool call still running this long after the next frame was sent can show whether it held
# that frame up; one that ends sooner (or before the frame was even sent) shows nothing


def tool_inputs(kit: Kit) -> dict[str, str]:
    """Each tool's input as JSON text: --tool-input when given, else a small instance of its schema."""
    out = {}
    assert kit.describe is not None
    for tool in kit.describe.tools:
        if tool.name in kit.tool_inputs:
            out[tool.name] = json.dumps(kit.tool_inputs[tool.name])
            continue
        try:
            schema = json.loads(tool.input_schema_json) if tool.input_schema_json else {}
        except ValueError:
            schema = {}
        out[tool.name] = json.dumps(sample_instance(schema))
    return out


def events_problems(events: list[pb.ToolEvent]) -> tuple[list[str], str]:
    """What is wrong with one call's events (preliminaries, one final, nothing after it), and how it ended."""
    problems: list[str] = []
    final = None
    for i, event in enumerate(events):
        kind = event.WhichOneof("event")
        if final is not None:
            problems.append(f"event {i} ({kind}) after the final event")
            break
        if kind == "preliminary_json":
            if (why := decode_json(event.preliminary_json)) is not None:
                problems.append(f"preliminary_json is not JSON ({why})")
        elif kind == "output_json":
            final = "output"
            if (why := decode_json(event.output_json)) is not None:
                problems.append(f"output_json is not JSON ({why})")
        elif kind == "error":
            err = event.error
            final = f"error {err.name}: {err.message}"[:160]
            if err.hook != TOOL_HOOK:
                problems.append(f"error event with HookError.hook {err.hook!r} (a tool's errors say {TOOL_HOOK!r})")
            if not err.message and not err.name:
                problems.append("error event without a name or message")
        else:
            problems.append(f"event {i} is empty (none of preliminary_json, output_json, error)")
    if final is None and not problems:
        problems.append("ended without an output_json or error event")
    prelims = sum(1 for e in events if e.WhichOneof("event") == "preliminary_json")
    return problems, f"{prelims} preliminar{'y' if prelims == 1 else 'ies'}, then {final or 'nothing'}"


async def _run_unary(kit: Kit, name: str, input_json: str) -> tuple[list[pb.ToolEvent], str | None]:
    call = kit.stub.ExecuteTool(pb.ExecuteToolRequest(context=call_context(), name=name, input_json=input_json,
                                                      tool_call_id="kit-call"),
                                metadata=kit.metadata, timeout=kit.tool_timeout_s)
    events: list[pb.ToolEvent] = []
    try:
        async for event in call:
            events.append(event)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return events, f"no final event within {kit.tool_timeout_s * 1000:.0f} ms (timeouts.toolMs)"
        return events, f"the call ended with {exc.code().name}: {exc.details()}"
    return events, None


async def check_execute_tool(kit: Kit, inputs: dict[str, str]) -> None:
    """5.1 for every tool, 5.2 with a tool name the extension does not have."""
    if not inputs:
        kit.results.skipped("5.1", "no tools")
    else:
        seen, bad = [], []
        for name, input_json in inputs.items():
            events, status = await _run_unary(kit, name, input_json)
            problems, how = events_problems(events)
            if status is not None:
                problems.insert(0, status)
            (bad if problems else seen).append(f"{name}: {'; '.join(problems) if problems else how}")
        kit.results.set("5.1", "FAIL" if bad else "PASS", "; ".join(bad or seen))

    events, status = await _run_unary(kit, UNKNOWN_TOOL, "{}")
    problems = [status] if status is not None else []
    kinds = [e.WhichOneof("event") for e in events]
    if status is None and kinds != ["error"]:
        problems.append(f"events {kinds}: want exactly one error event")
    elif events and events[-1].WhichOneof("event") == "error" and events[-1].error.hook != TOOL_HOOK:
        problems.append(f"HookError.hook {events[-1].error.hook!r}, want {TOOL_HOOK!r}")
    try:
        await kit.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=kit.metadata, timeout=5.0)
    except grpc.aio.AioRpcError as exc:
        problems.append(f"afterwards Describe failed: {exc.code().name}")
    if problems:
        kit.results.failed("5.2", "; ".join(problems))
    else:
        err = events[0].error
        kit.results.passed("5.2", f"error event {err.name}: {err.message}"[:200])


async def check_stream_tools(kit: Kit, session: ConnectSession, ids: FrameIds, inputs: dict[str, str]) -> None:
    """5.3 (events per call), 5.4 (a running call does not hold up the next frame), 5.5 (cancel)."""
    if "connect-tools" not in kit.features:
        for cid in ("5.3", "5.4", "5.5"):
            kit.results.skipped(cid, "no 'connect-tools' feature: the host uses ExecuteTool")
        return
    if not inputs:
        for cid in ("5.3", "5.4", "5.5"):
            kit.results.skipped(cid, "no tools")
        return
    seen, bad, timing = [], [], {}
    concurrency_ok, concurrency_bad, unobservable = [], [], []
    for name, input_json in inputs.items():
        fid, probe = ids.next(), ids.next()
        await session.send(pb.HostFrame(id=fid, execute_tool=pb.ExecuteToolRequest(
            context=call_context(), name=name, input_json=input_json, tool_call_id=f"kit-{fid}")))
        await session.send(pb.HostFrame(id=probe, observations=pb.ObservationBatch(context=call_context())))
        await session.wait_for(lambda: session.tool_done(fid) and session.answered(probe), kit.tool_timeout_s)
        await asyncio.sleep(0.05)
        frames = session.frames_for(fid)
        problems = [r.error or f"a {r.kind or 'empty'} frame answering execute_tool" for r in frames
                    if r.kind != "tool_event"]
        events = [r.frame.tool_event for r in frames if r.frame is not None and r.kind == "tool_event"]
        more, how = events_problems(events)
        problems += more
        if session.ended:
            problems.append(f"the stream ended: {session.ended}")
        (bad if problems else seen).append(f"{name}: {'; '.join(problems) if problems else how}")
        done_at = next((r.at for r in frames if r.frame is not None and r.kind == "tool_event"
                        and r.frame.tool_event.WhichOneof("event") in ("output_json", "error")), None)
        probe_at = next((r.at for r in session.frames_for(probe)), None)
        if done_at is None or probe_at is None:
            continue
        ran_ms = (done_at - session.sent_at.get(fid, 0.0)) * 1000
        held_ms = (done_at - session.sent_at.get(probe, done_at)) * 1000  # still running after the probe was sent
        timing[name] = ran_ms
        if probe_at < done_at:
            concurrency_ok.append(f"{name}: the next frame was answered {1000 * (done_at - probe_at):.0f} ms "
                                  "before the tool finished")
        elif held_ms >= OBSERVABLE_MS:
            concurrency_bad.append(f"{name} ({ran_ms:.0f} ms): the frame sent after it was answered only after it "
                                   "finished")
        else:
            unobservable.append(name)
    kit.results.set("5.3", "FAIL" if bad else "PASS", "; ".join(bad or seen))
    if concurrency_bad:
        kit.results.failed("5.4", "; ".join(concurrency_bad))
    elif concurrency_ok:
        kit.results.passed("5.4", "; ".join(concurrency_ok))
    else:
        kit.results.skipped("5.4", f"{', '.join(unobservable) or 'no tool'} finished within {OBSERVABLE_MS:.0f} ms "
                                   "of the next frame: not observable (give a slow input with --tool-input NAME=JSON)")
    await _check_cancel(kit, session, ids, inputs, timing)


async def _check_cancel(kit: Kit, session: ConnectSession, ids: FrameIds, inputs: dict[str, str],
                        timing: dict[str, float]) -> None:
    name = max(inputs, key=lambda n: timing.get(n, 0.0))
    fid, probe = ids.next(), ids.next()
    before = len(session.received)
    await session.send(pb.HostFrame(id=fid, execute_tool=pb.ExecuteToolRequest(
        context=call_context(), name=name, input_json=inputs[name], tool_call_id=f"kit-{fid}")))
    await session.send(pb.HostFrame(cancel=pb.CancelCall(id=fid)))
    await session.send(pb.HostFrame(cancel=pb.CancelCall(id=fid + 1_000_000)))  # a call that does not exist
    await session.send(pb.HostFrame(id=probe, observations=pb.ObservationBatch(context=call_context())))
    await session.wait_for(lambda: session.answered(probe), kit.tool_timeout_s)
    await asyncio.sleep(0.1)
    problems = []
    fresh = session.received[before:]
    if any(r.id == 0 for r in fresh):
        problems.append("a frame with id 0 came back (cancel frames want no answer)")
    if not session.answered(probe):
        problems.append(f"the frame after the cancel (id {probe}) was not answered")
    if session.ended:
        problems.append(f"the stream ended: {session.ended}")
    after = [r for r in fresh if r.id == fid]
    if problems:
        kit.results.failed("5.5", "; ".join(problems))
    else:
        kit.results.passed("5.5", f"cancelled {name}: {len(after)} event(s) of it arrived (none owed); the stream "
                                  "went on")
