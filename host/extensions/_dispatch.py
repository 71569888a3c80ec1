"""Dispatch: how one hook reaches every extension that serves it, and how their answers combine.

One function per hook kind, like pluggy's `_multicall`; every rule is written here once:

- `merge_before_turn` (awaited, merged): subscribers in load order; each reply is screened against the
  extension's `permissions.turnConfig` grant, then merged into the patch — scalars last-wins, headers and
  providerOptions key by key (`merge_patch`) — with provenance naming who set each field.
- `decide_in_phases` (host/extensions/_phases.py; awaited, decided): subscribers with `decisions` answer in their
  phases — mutators one after another, then validators in parallel on the final input; block wins, then the first
  substitute, then allow with the mutated input (`first_by_precedence`). A decider that fails blocks when its
  policy is `failure: closed` (`fail_decision`), else the call goes on (failed open).
- shadow mode (`mode: shadow`, an extension's or one hook's): the hook runs, nothing it returns is applied; what it
  would have set or decided is traced (its event's `mode` is "shadow").
- `broadcast` (observed): afterToolCall, onStepFinish, onChunk, and beforeToolCall for subscribers without
  `decisions`, enqueued on each connection without waiting; `flush` waits for the turn's acks.

Every awaited call goes through `call_hook`, which never raises: it returns a `Reply` or a `Failure`
(timeout, error) whose wait was the hook's `timeoutMs`, cut short by the turn's deadline (`hook_timeout`).
Failures are logged and traced with the extension's name; they never raise into the turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import grpc

from extension_sdk.proto import extension_pb2 as pb

from .. import _telemetry as telemetry
from .._errors import ExtensionReplyError, ExtensionUnavailableError
from ..sandbox._egress_hosting import EgressProxies
from ._convert import (
    camel,
    chunk_to_observation,
    context_to_proto,
    fill_context,
    fill_tool_call,
    patch_from_proto,
    step_to_proto,
    tool_call_to_proto,
    tool_result_to_proto,
    turn_to_proto,
)
from . import _call_tags as call_tags
from ._before_turn_waves import wave_from
from ._chunk_item import chunk_item
from ._extension_client import ExtensionConnection
from ._flush_group import FlushOutcome, flush_all
from ._frames import context_field, observation_item
from ._observation_acks import unhandled_since
from ._observation_tally import ObservationTally, hook_rows
from ._observer_ledger import ObserverLedger
from ._registry import Registry
from ._snapshots import (
    CallContext,
    ChunkSnapshot,
    ExtensionDecision,
    MergedTurnPatch,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TurnPatch,
    TurnSnapshot,
)
from ._state import ExtensionRuntime
from ._trace import Tracer, bounded, reason_of_state
from ._turn_config_policy import MAP_FIELDS, TurnConfigDenial, merge_options, provider_of, screen_reply

log = logging.getLogger("hookwire.extensions")


# -- one awaited call ----------------------------------------------------------------------------------


@dataclass(slots=True)
class Reply:
    """An extension answered an awaited hook with a frame of the right kind.

    Not frozen (nothing changes it after the call): a frozen dataclass sets each field through object.__setattr__,
    and every awaited hook makes one."""

    frame: pb.ExtensionFrame
    ms: float


@dataclass(frozen=True, slots=True)
class Failure:
    """An awaited hook got no usable answer: `outcome` is "timeout" or "error", `detail` says why."""

    outcome: Literal["timeout", "error"]
    detail: str
    ms: float
    reason: str = ""  # "restarting" or "quarantined" when the extension was not called because of its state


HookCall = Callable[[ExtensionRuntime, str, pb.HostFrame, "CallContext | None", "float | None"],
                    Awaitable["Reply | Failure"]]


def hook_timeout(ext: ExtensionRuntime, hook: str, deadline: float | None, now: float) -> tuple[float, str] | Failure:
    """(seconds to wait, a note for the trace) for `hook` on `ext`: its timeoutMs, cut to the turn's deadline.

    A Failure when the deadline (event-loop time) has already passed: the extension is not called at all."""
    timeout = ext.tool_hook.timeout_s if hook == "beforeToolCall" else ext.manifest.hook_timeout_s(hook)
    if deadline is None:
        return timeout, ""
    remaining = deadline - now
    if remaining <= 0:
        return Failure("timeout", "not called: the turn's deadline has passed", 0.0)
    if remaining < timeout:
        return remaining, " (bounded by the turn's remaining time)"
    return timeout, ""


async def call_hook(ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                    deadline: float | None, egress: EgressProxies | None = None) -> Reply | Failure:
    """Send one awaited hook frame to `ext` and wait for its reply. Never raises (but CancelledError)."""
    t0 = time.perf_counter()
    conn = ext.conn
    if conn is None or ext.state != "running":
        state = unavailable_state(ext)
        return Failure("error", f"extension is {state}", 0.0, reason_of_state(state))
    wait = hook_timeout(ext, hook, deadline, asyncio.get_running_loop().time() if deadline is not None else 0.0)
    if isinstance(wait, Failure):
        return wait
    timeout, note = wait
    body = frame.WhichOneof("body")
    # CallContext.deadline_unix_ms: when the host stops waiting (absolute, so it survives queueing on the wire)
    getattr(frame, body or "").context.deadline_unix_ms = int((time.time() + timeout) * 1000)
    try:
        if egress is not None and context is not None and egress.serves(ext.name):
            with egress.during(ext.name, context):  # its egress proxy attributes connections to this call
                reply = await conn.call(frame, timeout)
        else:  # no proxy (or no context to attribute to): no context manager on the awaited hook's path
            reply = await conn.call(frame, timeout)
    except TimeoutError:
        return Failure("timeout", f"no reply within {timeout * 1000:.0f} ms{note}", (time.perf_counter() - t0) * 1000)
    except (ExtensionReplyError, ExtensionUnavailableError) as exc:
        return Failure("error", str(exc), (time.perf_counter() - t0) * 1000)
    except grpc.aio.AioRpcError as exc:
        return Failure("error", f"RPC failed: {exc.code().name}: {exc.details()}", (time.perf_counter() - t0) * 1000)
    if reply.WhichOneof("body") != body:
        return Failure("error", f"reply rejected: not a {hook} reply (field body)", (time.perf_counter() - t0) * 1000)
    return Reply(reply, (time.perf_counter() - t0) * 1000)


def unavailable_state(ext: ExtensionRuntime) -> str:
    """What to call an extension that cannot take a call: its state, or "restarting" while a crash is being
    handled (the connection is already gone, the state not yet changed)."""
    return "restarting" if ext.state == "running" else ext.state


# -- the rules, written once ---------------------------------------------------------------------------


def merge_patch(merged: dict[str, Any], provenance: dict[str, str], ext: str, values: dict[str, Any]) -> None:
    """Merge one extension's screened beforeTurn values into the patch so far (load order: later wins).

    Scalars replace; headers and providerOptions merge key by key (headers case-insensitively, providerOptions
    one level deep per provider). Provenance names, per camelCase field path, the extension whose value stands."""
    for key, value in values.items():
        if key in MAP_FIELDS:
            res = merge_options(merged.get(key), value, incoming_wins=True,
                                nested=key == "provider_options", case_insensitive=key == "headers")
            merged[key] = res.merged
            for path in res.replaced:
                provenance.pop(f"{camel(key)}.{path}", None)
            for path in res.applied:
                provenance[f"{camel(key)}.{path}"] = ext
        else:
            merged[key] = value
            provenance[camel(key)] = ext


def first_by_precedence(decisions: Sequence[ExtensionDecision | None]) -> ExtensionDecision | None:
    """The decision that stands among the deciders' (in load order): block, else substitute, else allow."""
    for wanted in ("block", "substitute", "allow"):
        for decision in decisions:
            if decision is not None and decision.action == wanted:
                return decision
    return None


def fail_decision(ext: ExtensionRuntime, tool: str, outcome: str, detail: str, ms: float,
                  context: CallContext | None, trace: Tracer, reason: str = "", *, mode: str = "enforce",
                  phase: str = "") -> ExtensionDecision | None:
    """A decider failed (timeout, error, invalid answer): block if its policy is `failure: closed`, else None.

    A shadow decider never blocks: its failure is traced as failed_open ("shadow: would fail closed" if closed)."""
    hook = "beforeToolCall"
    closed = ext.manifest.hook_policy(hook).failure == "closed"
    if closed and mode != "shadow":
        reason = (f"tool call {tool!r} blocked: extension {ext.name!r} failed its beforeToolCall hook "
                  f"({outcome}: {detail}) and its policy is failure: closed")
        log.warning("%s", reason)
        trace(hook, ext.name, "failed_closed", latency_ms=ms, detail=detail, context=context, phase=phase)
        return ExtensionDecision(action="block", reason=reason, extension=ext.name, failed_closed=True)
    log.warning("extension %r beforeToolCall failed (%s): %s; failing open%s", ext.name, outcome, detail,
                " (shadow mode)" if mode == "shadow" else "")
    note = "shadow: would fail closed: " if closed else ""
    trace(hook, ext.name, "failed_open", latency_ms=ms, detail=f"{note}{outcome}: {detail}", context=context,
          reason=reason or outcome, mode=mode, phase=phase)
    return None


# -- awaited hooks ---------------------------------------------------------------------------------------


async def merge_before_turn(subs: Sequence[ExtensionRuntime], snapshot: TurnSnapshot, context: CallContext | None,
                            deadline: float | None, call: HookCall, trace: Tracer) -> MergedTurnPatch:
    """beforeTurn on each subscriber in load order; each sees the system prompt and tools set before it. Those whose
    answers cannot change that input for the next ones are asked together (host/extensions/_before_turn_waves.py)."""
    merged: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    denied: list[TurnConfigDenial] = []
    system = snapshot.system
    tool_names = list(snapshot.tool_names)
    ctx = context_to_proto(context)
    provider = provider_of(snapshot.model_id)
    subs = list(subs)
    early: dict[str, Reply | Failure] = {}  # answers of a wave's later members (host/extensions/_before_turn_waves.py)
    for i, ext in enumerate(subs):
        answer = early.pop(ext.name, None)
        if answer is None and ext.state != "running":
            state = ext.state
            log.warning("extension %r beforeTurn skipped: extension is %s", ext.name, state)
            trace("beforeTurn", ext.name, "skipped", detail=f"extension is {state}", context=context,
                  reason=reason_of_state(state), mode=ext.manifest.hook_mode("beforeTurn"))
            continue
        if answer is None:  # ext opens a wave: it, and the ones after it that see the same input, asked at once
            wave = wave_from(subs, i)
            snap = turn_to_proto(snapshot, system, tool_names)
            asked = [(e, pb.HostFrame(before_turn=pb.BeforeTurnRequest(context=ctx, snapshot=snap))) for e in wave]
            if len(asked) == 1:
                answer = await call(ext, "beforeTurn", asked[0][1], context, deadline)
            else:
                answer, *rest = await asyncio.gather(*(call(e, "beforeTurn", f, context, deadline) for e, f in asked))
                early = {e.name: a for e, a in zip(wave[1:], rest)}
        mode = ext.manifest.hook_mode("beforeTurn")
        if isinstance(answer, Failure):
            trace.hook_failed(ext.name, "beforeTurn", answer.outcome, answer.detail, answer.ms, context, answer.reason,
                              mode=mode)
            continue
        resp, ms = answer.frame.before_turn, answer.ms
        if resp.HasField("error"):
            trace.hook_failed(ext.name, "beforeTurn", "error", f"{resp.error.name}: {resp.error.message}", ms, context,
                              mode=mode)
            continue
        values: dict[str, Any] = {}
        problems_text = ""
        refused: list[TurnConfigDenial] = []
        if resp.HasField("config"):
            values, problems = patch_from_proto(resp.config)
            # the trust boundary: only granted fields, only allowlisted request options (issue 10 item 1)
            screened = screen_reply(ext.name, values, problems, ext.manifest.permissions.turn_config, provider)
            values, problems, refused = screened.values, screened.problems, screened.denied
            for p in problems:
                log.warning("extension %r beforeTurn: invalid field %s: %s (ignored)", ext.name, p.field, p.reason)
            problems_text = "; ".join(f"invalid {p.field}: {p.reason}" for p in problems)
            if mode == "enforce":
                merge_patch(merged, provenance, ext.name, values)
                if "system" in values:
                    system = values["system"]
                if "active_tools" in values:
                    tool_names = list(values["active_tools"])
        set_text = "set " + ", ".join(camel(k) for k in values) if values else ""
        would = "shadow: would " if mode == "shadow" else ""  # shadow: traced, nothing applied, nobody sees it
        if would:
            set_text = would + set_text if set_text else "shadow: set nothing"
        trace("beforeTurn", ext.name, "error" if problems_text else "ok", latency_ms=ms, mode=mode,
              detail="; ".join(t for t in (set_text, problems_text) if t), context=context)
        for d in refused:
            log.warning("extension %r beforeTurn: field %s: %sdenied: %s", ext.name, d.field,
                        "(shadow) " if would else "", d.reason)
            trace("beforeTurn", ext.name, "denied", context=context, mode=mode,
                  detail=bounded(f"{'shadow: would be denied: ' if would else ''}{d.field}: {d.reason}"))
        if mode == "enforce":
            denied.extend(refused)
    return MergedTurnPatch(patch=TurnPatch.model_construct(**merged), provenance=provenance, denied=denied)


# -- the dispatcher: routes each hook to its rule; observations and their acks ------------------------------


class Dispatcher:
    """Routes the five hooks to the loaded extensions (`ExtensionManager`'s hook methods land here)."""

    def __init__(self, registry: Registry, trace: Tracer, egress: EgressProxies | None = None,
                 call: HookCall | None = None) -> None:
        self._registry = registry
        self._trace = trace
        self._egress = egress
        self._call: HookCall = call or self._call_hook
        self.ledger = ObserverLedger()  # stalled observers detached per turn; observations lost per turn
        self.tally = ObservationTally()  # observations per turn and hook: a trace row per hook (_observation_tally)
        self._ctx_of_record: CallContext | None = None  # the context whose record `broadcast` holds
        self._ctx_record_key: tuple[str, str] | None = None
        self._ctx_record = context_field(context_to_proto(None))
        self._flush_marks: dict[str, tuple[int, int]] = {}  # extension -> (enqueued, dropped) at its last flush
        self._unhandled_marks: dict[str, tuple[object, int]] = {}  # observations not handled, as of the last flush
        # beforeToolCall's subscribers split into (deciders, observers), for the subscriber list it was made of
        self._split_of: list[ExtensionRuntime] | None = None
        self._split: tuple[list[ExtensionRuntime], list[ExtensionRuntime]] = ([], [])

    def _call_hook(self, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                   deadline: float | None) -> Awaitable[Reply | Failure]:
        if not telemetry.hook_spans_wanted() and not call_tags.recording():
            # no span to open (OpenTelemetry off) and no log context to keep (text logs): the call itself, without a
            # coroutine around it (it is on every awaited hook)
            return call_hook(ext, hook, frame, context, deadline, self._egress)
        return self._traced_call(ext, hook, frame, context, deadline)

    async def _traced_call(self, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                           deadline: float | None) -> Reply | Failure:
        # the hook's span: its trace context rides in the frame; the call's trace event ends it (host/_telemetry.py)
        parent, state = telemetry.open_hook_span(ext.name, hook)
        ctx = getattr(frame, frame.WhichOneof("body")).context
        if parent:
            ctx.traceparent, ctx.tracestate = parent, state
        try:
            with call_tags.during(ext.proc, ext.name, hook, ctx):  # log context; whose a stderr line is
                return await call_hook(ext, hook, frame, context, deadline, self._egress)
        except BaseException:
            telemetry.close_hook_span("cancelled")
            raise

    async def before_turn(self, snapshot: TurnSnapshot, context: CallContext | None,
                          deadline: float | None) -> MergedTurnPatch:
        return await merge_before_turn(self._registry.subscribers("beforeTurn"), snapshot, context, deadline,
                                       self._call, self._trace)

    async def before_tool_call(self, snapshot: ToolCallSnapshot, context: CallContext | None,
                               deadline: float | None) -> ExtensionDecision | None:
        subs = self._registry.subscribers("beforeToolCall")
        if not subs:
            return None
        if subs is not self._split_of:  # the registry makes a new list when its subscribers change
            self._split = ([ext for ext in subs if ext.deciders], [ext for ext in subs if not ext.deciders])
            self._split_of = subs
        deciders, observers = self._split
        if not observers and len(deciders) == 1 and deciders[0].tool_hook.phase == "validate":
            # the common case: one validator and no observer (no mutator, so no input change to name; its decision is
            # the final one). Its frame is filled in place: no snapshot or context message built and copied into it.
            frame = pb.HostFrame()
            request = frame.before_tool_call
            if context is not None:
                fill_context(request.context, context)
            fill_tool_call(request.snapshot, snapshot)
            request.want_decision = True
            return await ask_decider(deciders[0], None, request.snapshot, context, deadline, self._call, self._trace,
                                     "validate", frame)
        snap = tool_call_to_proto(snapshot)
        if observers:
            self.tally.add(context, "beforeToolCall")
            self.broadcast(observers, pb.Observation(before_tool_call=snap), context, False)
        if not deciders:
            return None
        return await decide_in_phases(deciders, snapshot, snap, context, deadline, self._call, self._trace)

    def after_tool_call(self, snapshot: ToolResultSnapshot, context: CallContext | None) -> None:
        if subs := self._registry.subscribers("afterToolCall"):
            self.tally.add(context, "afterToolCall")
            self.broadcast(subs, pb.Observation(after_tool_call=tool_result_to_proto(snapshot)), context, False)

    def on_step_finish(self, snapshot: StepSnapshot, context: CallContext | None) -> None:
        if subs := self._registry.subscribers("onStepFinish"):
            self.tally.add(context, "onStepFinish")
            self.broadcast(subs, pb.Observation(step_finish=step_to_proto(snapshot)), context, False)

    def on_chunk(self, snapshot: ChunkSnapshot, context: CallContext | None) -> None:
        if subs := self._registry.subscribers("onChunk"):
            self.tally.add(context, "onChunk")
            self.broadcast(subs, chunk_to_observation(snapshot), context, True)

    def on_chunk_fields(self, type_: str, text: str | None, tool_name: str | None, tool_call_id: str | None,
                        context: CallContext | None) -> None:
        """onChunk from the turn's own chunk (trusted fields): no snapshot model, the record encoded directly
        (host/extensions/_chunk_item.py), the same bytes on the wire."""
        if subs := self._registry.subscribers("onChunk"):
            item = chunk_item(type_, text, tool_name, tool_call_id)
            if item is None:  # a long text or one protobuf refuses: bounded as always
                snapshot = ChunkSnapshot(type=type_, text=text, tool_name=tool_name, tool_call_id=tool_call_id)
                item = observation_item(chunk_to_observation(snapshot))
            self.tally.add(context, "onChunk")
            self.enqueue(subs, item, context, True)

    def broadcast(self, subs: list[ExtensionRuntime], obs: pb.Observation, context: CallContext | None,
                  is_chunk: bool) -> None:
        """Enqueue one observation on every subscriber's connection (never blocks; the per-chunk path).

        It is serialized once for all of them, and so is its context (kept while the context stays the same).
        """
        self.enqueue(subs, observation_item(obs), context, is_chunk)

    def enqueue(self, subs: list[ExtensionRuntime], item: bytes, context: CallContext | None, is_chunk: bool) -> None:
        """Enqueue one serialized observation record (`_frames.observation_item`) on every subscriber's connection."""
        if context is not self._ctx_of_record:
            key = None if context is None else (context.session_id, context.request_id)
            if key != self._ctx_record_key:
                self._ctx_record_key = key
                self._ctx_record = context_field(context_to_proto(context))
                self.ledger.note_context(self._ctx_record, context)
            self._ctx_of_record = context
        ctx = self._ctx_record
        ledger = self.ledger
        if ledger.any_detached:  # a stalled observer is detached for the rest of the turn (counted)
            subs = [ext for ext in subs if not ledger.skip(ext.name, ctx)]
        for ext in subs:
            conn = ext.conn
            if conn is not None:
                conn.observe(ctx, item, is_chunk)
            else:  # restarting (or quarantined): counted, reported by the turn's flush
                ledger.add_lost(ext.name, {ctx: 1})

    def send_observations(self) -> None:
        """Start delivering every queued observation now, without waiting (a later `flush()` waits for the acks)."""
        for ext in self._registry.exts.values():
            if ext.conn is not None:
                ext.conn.request_flush()

    async def flush(self, context: CallContext | None) -> None:
        """Wait until every extension handled the observations enqueued so far (bounded by hook deadlines).

        The end of the turn `context`: an observer detached from it (stalled) is not waited for, and the
        observations of the turn a broken connection lost are reported (host/extensions/_observer_ledger.py)."""
        record = context_field(context_to_proto(context))
        counts = self.tally.take(context)
        waits: list[tuple[ExtensionRuntime, ExtensionConnection]] = []
        for ext in self._registry.exts.values():
            skipped, lost = self.ledger.end_turn(ext.name, record)
            if lost:
                self._report_lost(ext, lost, context)
            if skipped is not None:
                if skipped:
                    self._trace("observe", ext.name, "skipped", context=context, reason="timeout",
                                detail=f"{skipped} later observation(s) of this turn not sent (detached: stalled)")
                continue
            conn = ext.conn
            if conn is not None:
                waits.append((ext, conn))
        self.ledger.forget(record)
        if waits:  # one wait for all of them (host/extensions/_flush_group.py): no task per extension
            marks = [(conn.enqueued, conn.dropped) for _, conn in waits]
            outcomes = await flush_all([(conn, ext.manifest.timeouts.hook_ms / 1000) for ext, conn in waits])
            for (ext, conn), (sent, dropped), done in zip(waits, marks, outcomes):
                self._flushed(ext, conn, context, record, counts, sent, dropped, done)

    def context_of(self, record: bytes) -> CallContext | None:
        """The turn a context record names (its observations' acknowledgement may come as the turn's flush ends)."""
        known = self.ledger.context(record)
        if known is not None:
            return known
        try:
            ctx = pb.ObservationBatch.FromString(record).context
        except Exception:  # noqa: BLE001 - a record this host made; be safe anyway
            return None
        return CallContext(session_id=ctx.session_id, request_id=ctx.request_id) if ctx.request_id else None

    def _report_lost(self, ext: ExtensionRuntime, lost: int, context: CallContext | None) -> None:
        detail = (f"{lost} observation(s) of this turn lost: its connection broke before they were handled, "
                  "or it was not running")
        log.warning("extension %r: %s", ext.name, detail)
        self._trace("observe", ext.name, "failed_open", detail=detail, context=context,
                    reason=reason_of_state(unavailable_state(ext)) if ext.conn is None else "error")

    def observer_stalled(self, ext: ExtensionRuntime, waited_s: float) -> None:
        """The connection saw no acknowledgement for timeouts.hookMs: detach the observer from the turns waiting."""
        conn = ext.conn
        if conn is None:
            return
        ms = ext.manifest.timeouts.hook_ms
        for record in conn.pending_contexts():
            if self.ledger.active(record) and self.ledger.detach(ext.name, record):
                self._trace("observe", ext.name, "failed_open", context=self.ledger.context(record), reason="timeout",
                            detail=f"stalled: observations not acknowledged within {ms} ms (timeouts.hookMs); "
                                   "detached for the rest of this turn")

    def _flushed(self, ext: ExtensionRuntime, conn: ExtensionConnection, context: CallContext | None,
                 record: bytes, counts: dict[str, int] | None, sent: int, dropped: int, done: FlushOutcome) -> None:
        """Trace what one extension's flush came to: a row per observed hook, or why it failed open."""
        timeout = ext.manifest.timeouts.hook_ms / 1000
        last_sent, last_dropped = self._flush_marks.get(ext.name, (0, 0))
        outcome, ms = done.outcome, done.ms
        if outcome == "lost":
            lost = conn.lost.pop(record, 0) + self.ledger.end_turn(ext.name, record)[1]
            if lost:
                self._report_lost(ext, lost, context)
            return
        if outcome != "ok":
            why = (f"stalled: observations not acknowledged within {timeout * 1000:.0f} ms (timeouts.hookMs)"
                   if outcome == "stalled" else f"observations not acknowledged within {timeout * 1000:.0f} ms")
            log.warning("extension %r: %s; the turn goes on without it", ext.name, why)
            self._trace("observe", ext.name, "failed_open", latency_ms=ms, detail=why, context=context, reason="timeout")
            return
        self._flush_marks[ext.name] = (sent, dropped)
        unhandled, why = unhandled_since(self._unhandled_marks, ext.name, conn.acks)
        if unhandled > 0:  # the extension said so (ObservationAck.handled), or Observe failed
            detail = bounded(f"{unhandled} of {sent - last_sent} observation(s) not handled: {why}")
            self._trace("observe", ext.name, "failed_open", latency_ms=ms,
                        detail=detail, context=context)
            return
        subscribed = set(ext.hooks) - {"beforeToolCall"} if ext.deciders else set(ext.hooks)
        rows = hook_rows(counts or {}, subscribed, sent - last_sent, dropped - last_dropped) if sent > last_sent else None
        if rows:  # a row per hook (afterToolCall, onStepFinish, onChunk ...), sharing the batch's latency
            if dropped > last_dropped:
                telemetry.observations_dropped(ext.name, dropped - last_dropped)
            for hook, detail in rows:
                self._trace(hook, ext.name, "ok", latency_ms=ms, detail=detail, context=context)
        elif sent > last_sent:
            detail = f"{sent - last_sent} observation(s) delivered in order"
            if dropped > last_dropped:
                detail += f", {dropped - last_dropped} oldest onChunk dropped (extension too slow)"
                telemetry.observations_dropped(ext.name, dropped - last_dropped)
            self._trace("observe", ext.name, "ok", latency_ms=ms, detail=detail,
                        context=context)


# _phases builds on this module's rules (Reply, Failure, fail_decision ...): imported once they exist, not per call
from ._phases import ask_decider, decide_in_phases  # noqa: E402
