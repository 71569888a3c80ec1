"""Clauses 4.1-4.6: hooks on the unary path and on the Connect stream (answers, ordering, acks, preludes, batches of
many turns in one frame)."""

from __future__ import annotations

import asyncio

import grpc

from extension_sdk.proto import extension_pb2 as pb

from ._kit import Kit
from ._wire import ConnectSession, call_context, observation_items, tool_call_snapshot, turn_snapshot

SETTLE_S = 0.2  # after the last expected answer, how long the kit keeps listening for stray frames


def _tool_names(kit: Kit) -> list[str]:
    return [f"{kit.manifest.tool_prefix}_{n}" for n in kit.tool_names()]


def awaited_frames(kit: Kit) -> list[pb.HostFrame]:
    """The awaited hooks the host would send this extension (beforeToolCall only to a decider), without ids."""
    frames = []
    if "beforeTurn" in kit.hooks:
        frames.append(pb.HostFrame(before_turn=pb.BeforeTurnRequest(context=call_context(),
                                                                    snapshot=turn_snapshot(_tool_names(kit)))))
    if "beforeToolCall" in kit.hooks and kit.decisions:
        frames.append(pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(
            context=call_context(), snapshot=tool_call_snapshot(), want_decision=True)))
    return frames


def _batch(items: list[pb.Observation]) -> pb.ObservationBatch:
    return pb.ObservationBatch(context=call_context(), items=items)


def _error_note(err: pb.HookError) -> str:
    return f"{err.hook or '?'}: {err.name}: {err.message}"[:200]


async def check_unary(kit: Kit) -> None:
    """4.1 (BeforeTurn, BeforeToolCall of a decider) and 4.2 (Observe) on the unary RPCs."""
    streaming = "connect" in kit.features
    notes, bad = [], []
    for frame in awaited_frames(kit):
        kind = frame.WhichOneof("body")
        hook = "beforeTurn" if kind == "before_turn" else "beforeToolCall"
        method = "BeforeTurn" if kind == "before_turn" else "BeforeToolCall"
        timeout = kit.hook_timeout_s(hook)
        try:
            resp = await getattr(kit.stub, method)(getattr(frame, kind), metadata=kit.metadata, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED and streaming:
                notes.append(f"{method} not served (the host uses Connect)")
            elif exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                bad.append(f"{method}: no answer within {timeout * 1000:.0f} ms (timeoutMs)")
            else:
                bad.append(f"{method} answered {exc.code().name}: {exc.details()} (report a failed handler as a "
                           "HookError in the reply)")
            continue
        if resp.HasField("error"):
            notes.append(f"{method} reported {_error_note(resp.error)}")
        else:
            notes.append(f"{method} ok")
    if bad:
        kit.results.failed("4.1", "; ".join(bad))
    elif notes:
        kit.results.passed("4.1", "; ".join(notes))
    else:
        kit.results.skipped("4.1", "serves no awaited hook (beforeTurn, or beforeToolCall with decisions)")

    items = observation_items(kit.hooks, kit.decisions)
    if not items:
        kit.results.skipped("4.2", "subscribes to no observation")
        return
    timeout = max(kit.hook_timeout_s(h) for h in kit.hooks)
    try:
        ack = await kit.stub.Observe(_batch(items), metadata=kit.metadata, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        if exc.code() == grpc.StatusCode.UNIMPLEMENTED and streaming:
            kit.results.skipped("4.2", "Observe not served (the host uses Connect)")
        else:
            kit.results.failed("4.2", f"Observe answered {exc.code().name}: {exc.details()}")
        return
    errors = "; ".join(_error_note(e) for e in ack.errors)
    if ack.handled != len(items):
        kit.results.failed("4.2", f"handled {ack.handled} for a batch of {len(items)} item(s)")
    else:
        kit.results.passed("4.2", f"handled {ack.handled} of {len(items)}" + (f"; errors: {errors}" if errors else ""))


class FrameIds:
    """The ids of the frames the kit sends on one stream: 1, 2, 3, ..."""

    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def stream_problems(session: ConnectSession, expected: dict[int, str]) -> list[str]:
    """What is wrong with the answers to the frames in `expected` (id -> body kind wanted), the stream as a whole."""
    problems = []
    for r in session.received:
        if r.frame is None:
            problems.append(r.error)
        elif r.id == 0:
            problems.append(f"a frame with id 0 ({r.kind}): id-0 frames want no answer")
    for fid, kind in expected.items():
        got = session.frames_for(fid)
        if not got:
            problems.append(f"frame {fid} ({kind}) not answered")
        elif len(got) > 1:
            problems.append(f"frame {fid} answered {len(got)} times")
        elif got[0].frame is not None and got[0].kind != kind:
            problems.append(f"frame {fid} ({kind}) answered with a {got[0].kind or 'empty'} frame")
    if session.ended:
        problems.append(f"the stream ended: {session.ended}")
    return problems


async def check_connect(kit: Kit, session: ConnectSession, ids: FrameIds) -> dict[int, str]:
    """4.3 and 4.4 on an open Connect stream; returns the id frames sent (id -> answer kind) for later checks."""
    items = observation_items(kit.hooks, kit.decisions)
    frames: list[pb.HostFrame] = []
    acks: list[tuple[int, int]] = []  # (frame id, observations handled since the previous ack)
    if items:
        frames.append(pb.HostFrame(id=0, observations=_batch(items)))
    for frame in awaited_frames(kit):
        frame.id = ids.next()
        frames.append(frame)
    if items:
        fid = ids.next()
        frames.append(pb.HostFrame(id=fid, observations=_batch(items)))
        acks.append((fid, 2 * len(items)))
        fid = ids.next()
        frames.append(pb.HostFrame(id=fid, observations=_batch([])))
        acks.append((fid, 0))
    expected = {f.id: f.WhichOneof("body") or "" for f in frames if f.id}
    if not expected:
        kit.results.skipped("4.3", "nothing the host would send on the stream but tool calls (see 5.3)")
        kit.results.skipped("4.4", "no hooks on the stream")
        return {}
    for frame in frames:
        await session.send(frame)
    timeout = max([kit.hook_timeout_s(h) for h in kit.hooks] or [5.0])
    await session.wait_for(lambda: all(session.answered(i) for i in expected), timeout)
    await asyncio.sleep(SETTLE_S)
    problems = stream_problems(session, expected)
    if problems:
        kit.results.failed("4.3", "; ".join(problems))
    else:
        kit.results.passed("4.3", f"{len(expected)} frame(s) answered with their ids"
                           + (", the id-0 observations frame not" if items else ""))
    order = [r.id for r in session.received if r.id in expected]
    sent_order = [f.id for f in frames if f.id]
    wrong = []
    if order != sent_order and not problems:
        wrong.append(f"answers came in the order {order}, the frames were sent as {sent_order}")
    for fid, want in acks:
        got = session.frames_for(fid)
        if got and got[0].frame is not None and got[0].kind == "observations":
            handled = got[0].frame.observations.handled
            if handled != want:
                wrong.append(f"the ack of frame {fid} says handled {handled}; {want} observation(s) were sent since "
                             "the previous ack (id-0 frames included)")
    if wrong:
        kit.results.failed("4.4", "; ".join(wrong))
    elif problems:
        kit.results.skipped("4.4", "see 4.3")
    elif len(sent_order) < 2 and not items:
        kit.results.skipped("4.4", "a single frame: no order to observe")
    else:
        kit.results.passed("4.4", f"answers in frame order {sent_order}"
                           + (f"; acks counted {', '.join(str(w) for _, w in acks)}" if acks else ""))
    return expected


async def check_prelude(kit: Kit, session: ConnectSession, ids: FrameIds, tool_input: tuple[str, str] | None) -> None:
    """4.5: a frame carrying a prelude is answered, and the next ack counts the prelude's observations."""
    if "prelude" not in kit.features:
        kit.results.skipped("4.5", "no 'prelude' feature: the host sends held observations in a frame of their own")
        return
    items = observation_items(kit.hooks, kit.decisions)
    if not items:
        kit.results.skipped("4.5", "subscribes to no observation: the host never sends a prelude")
        return
    carriers = awaited_frames(kit)
    if carriers:
        carrier = carriers[0]
    elif tool_input is not None and "connect-tools" in kit.features:
        carrier = pb.HostFrame(execute_tool=pb.ExecuteToolRequest(context=call_context(), name=tool_input[0],
                                                                  input_json=tool_input[1], tool_call_id="kit-p"))
    else:
        kit.results.skipped("4.5", "no awaited hook or tool call to carry a prelude")
        return
    carrier.id = ids.next()
    carrier.prelude.CopyFrom(_batch(items))
    ack_id = ids.next()
    await session.send(carrier)
    await session.send(pb.HostFrame(id=ack_id, observations=_batch([])))
    timeout = max([kit.hook_timeout_s(h) for h in kit.hooks] + [kit.tool_timeout_s])
    await session.wait_for(lambda: session.answered(carrier.id) and session.answered(ack_id), timeout)
    problems = []
    if not session.answered(carrier.id):
        problems.append(f"the {carrier.WhichOneof('body')} frame {carrier.id} with a prelude was not answered")
    ack = session.frames_for(ack_id)
    if not ack or ack[0].frame is None or ack[0].kind != "observations":
        problems.append(f"the observations frame {ack_id} after it was not acknowledged")
    elif ack[0].frame.observations.handled != len(items):
        problems.append(f"the next ack says handled {ack[0].frame.observations.handled}; the prelude held "
                        f"{len(items)} observation(s)")
    if session.ended:
        problems.append(f"the stream ended: {session.ended}")
    if problems:
        kit.results.failed("4.5", "; ".join(problems))
    else:
        kit.results.passed("4.5", f"a {carrier.WhichOneof('body')} frame with a prelude of {len(items)} answered; "
                           f"the next ack counted {len(items)}")


async def check_multi_batch(kit: Kit, session: ConnectSession, ids: FrameIds) -> None:
    """4.6: an observations frame's `more_observations` (other turns' batches) are handled and counted in its ack."""
    if "multi-batch" not in kit.features:
        kit.results.skipped("4.6", "no 'multi-batch' feature: the host sends each turn's observations in a frame "
                                   "of their own")
        return
    items = observation_items(kit.hooks, kit.decisions)
    if not items:
        kit.results.skipped("4.6", "subscribes to no observation: the host never sends one")
        return
    other = pb.ObservationBatch(context=pb.CallContext(session_id="kit-session-2", request_id="kit-request-2"),
                                items=items)
    frame = pb.HostFrame(id=ids.next(), observations=_batch(items), more_observations=[other, other])
    want = 3 * len(items)
    await session.send(frame)
    timeout = max([kit.hook_timeout_s(h) for h in kit.hooks] + [kit.tool_timeout_s])
    await session.wait_for(lambda: session.answered(frame.id), timeout)
    ack = session.frames_for(frame.id)
    problems = []
    if not ack or ack[0].frame is None or ack[0].kind != "observations":
        problems.append(f"the observations frame {frame.id} with two more batches was not acknowledged")
    elif ack[0].frame.observations.handled != want:
        problems.append(f"the ack says handled {ack[0].frame.observations.handled}; the frame held {want} "
                        f"observation(s) ({len(items)} in its batch, {2 * len(items)} in more_observations)")
    if session.ended:
        problems.append(f"the stream ended: {session.ended}")
    if problems:
        kit.results.failed("4.6", "; ".join(problems))
    else:
        kit.results.passed("4.6", f"a frame with its batch and two more of another turn: the ack counted {want}")
