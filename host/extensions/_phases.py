"""Two-phase beforeToolCall decisions and shadow mode: who is asked when, with which input, and what stands.

Phases (manifest `hooks.beforeToolCall.phase`, default `validate`; only deciders have one):

- **mutate**: asked one after another, in load order, each with the input the mutators before it left. A mutator
  may allow with a new input (the next one sees it), substitute, block or just allow.
- **validate**: asked all at once, after every mutator, with the **final** input. A validator may allow, block or
  substitute (a verdict: the tool then does not run at all, whatever its input). A validator
  that answers allow-with-input is refused: its change is dropped (logged, and traced as "input change refused"),
  its answer counts as a plain allow. So no validator ever judged an input that a later decider changed.

Every decider is asked, whatever the ones before it answered; then block wins, else the first substitute (mutators
first, then validators, each in load order), else allow with the final input when a mutator changed it. The
decision names, in `input_changed_by`, every mutator whose change stands.

Shadow (`mode: shadow` on the extension or on this hook): the decider is asked like the others, in its phase, but
nothing it answers is applied: its block, substitute or input change is traced as "shadow: would block / would
substitute / would change the input", its failure never blocks (even with `failure: closed`: "would fail closed"),
and the mutators after it see the input as if it were absent.

Every trace event of a decider carries its `phase` and `mode` (the decision journal reads them from the event).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from extension_sdk.proto import extension_pb2 as pb

from ._convert import context_to_proto, decision_from_proto, tool_call_to_proto
from ._dispatch import Failure, HookCall, Reply, fail_decision, first_by_precedence
from ._reply_bounds import bounded_substitute
from ._snapshots import CallContext, ExtensionDecision, ToolCallSnapshot
from ._state import ExtensionRuntime
from ._trace import Tracer, bounded

log = logging.getLogger("hookwire.extensions")

HOOK = "beforeToolCall"


async def ask_decider(ext: ExtensionRuntime, ctx: pb.CallContext | None, snap: pb.ToolCallSnapshot,
                      context: CallContext | None, deadline: float | None, call: HookCall,
                      trace: Tracer, phase: str, frame: pb.HostFrame | None = None) -> ExtensionDecision | None:
    """One decider's beforeToolCall, in its phase and mode: the decision to apply, or None.

    `frame`: the request already built (its context and snapshot `snap` filled in, `ctx` then unused); None: built
    here from `ctx` and `snap`. A shadow decider's answer is traced as what it would have done, and None is returned."""
    mode = ext.tool_hook.mode
    shadow = mode == "shadow"
    if frame is None:
        frame = pb.HostFrame()  # filled in place: the same bytes as nested keyword construction, one copy less
        request = frame.before_tool_call
        if ctx is not None:  # None: no context (call_hook sets the context's deadline, so it is there anyway)
            request.context.CopyFrom(ctx)
        request.snapshot.CopyFrom(snap)
        request.want_decision = True
    answer = await call(ext, HOOK, frame, context, deadline)
    if isinstance(answer, Reply):
        resp = answer.frame.before_tool_call  # read once (each read of a submessage field makes a new wrapper)
        if resp.HasField("error"):
            e = resp.error
            answer = Failure("error", f"{e.name}: {e.message}", answer.ms)
    if isinstance(answer, Failure):
        return fail_decision(ext, snap.tool_name, answer.outcome, answer.detail, answer.ms, context, trace,
                             answer.reason, mode=mode, phase=phase)
    ms = answer.ms
    outcome, detail, decision = "ok", "", None
    if resp.HasField("decision"):
        action, fields, problems = decision_from_proto(resp.decision)
        for p in problems:
            log.warning("extension %r beforeToolCall: invalid decision field %s: %s (ignored)", ext.name, p.field,
                        p.reason)
        serious = [p for p in problems if p.field in ("action", "input", "output")]
        if serious and action in (None, "allow") and "input" not in fields:
            return fail_decision(ext, snap.tool_name, "error", "; ".join(str(p) for p in serious), ms, context,
                                 trace, mode=mode, phase=phase)
        if action == "block":
            outcome, reason = "denied", fields.get("reason", "")
            if shadow:
                detail = bounded(f"shadow: would block: {reason}" if reason else "shadow: would block")
            else:
                detail = reason
                decision = ExtensionDecision(action="block", reason=reason or f"blocked by extension {ext.name!r}",
                                             extension=ext.name)
        elif action == "substitute":
            output, detail = bounded_substitute(ext.manifest, resp.decision.output_json, fields["output"])
            if shadow:
                detail = "; ".join(t for t in ("shadow: would substitute the output", detail) if t)
            else:
                decision = ExtensionDecision(action="substitute", output=output, reason=fields.get("reason"),
                                             extension=ext.name)
        elif action == "allow" and "input" in fields:
            if phase == "validate":
                log.warning("extension %r beforeToolCall: input change refused: a validator (hooks.beforeToolCall."
                            "phase: validate, the default) cannot change the input; set phase: mutate in %s",
                            ext.name, ext.manifest_file)
                detail = ("shadow: " if shadow else "") + "input change refused (phase: validate); counted as allow"
            elif shadow:
                detail = "shadow: would change the input"
            else:
                detail = "changed the input"
                decision = ExtensionDecision(action="allow", input=fields["input"], has_input=True,
                                             extension=ext.name)
    trace(HOOK, ext.name, outcome, latency_ms=ms, detail=detail, context=context, mode=mode, phase=phase)
    return decision


async def decide_in_phases(deciders: Sequence[ExtensionRuntime], snapshot: ToolCallSnapshot,
                           snap: pb.ToolCallSnapshot, context: CallContext | None, deadline: float | None,
                           call: HookCall, trace: Tracer) -> ExtensionDecision | None:
    """beforeToolCall on the deciders: mutators in load order, then validators at once on the final input."""
    ctx = None if context is None else context_to_proto(context)
    if len(deciders) == 1 and deciders[0].tool_hook.phase == "validate":
        # the common case: one validator (no mutator, so no input change to name): its decision is the final one
        return first_by_precedence((await ask_decider(deciders[0], ctx, snap, context, deadline, call, trace,
                                                      "validate"),))
    mutators: list[ExtensionRuntime] = []
    validators: list[ExtensionRuntime] = []
    for ext in deciders:
        (mutators if ext.tool_hook.phase == "mutate" else validators).append(ext)
    decisions: list[ExtensionDecision | None] = []
    changed_by: list[str] = []
    current: Any = snapshot.input
    for ext in mutators:
        decision = await ask_decider(ext, ctx, snap, context, deadline, call, trace, "mutate")
        decisions.append(decision)
        if decision is not None and decision.action == "allow" and decision.has_input:
            current = decision.input
            changed_by.append(ext.name)
            snap = tool_call_to_proto(snapshot.model_copy(update={"input": current}))
    if len(validators) == 1:  # the common case: no task of its own
        decisions.append(await ask_decider(validators[0], ctx, snap, context, deadline, call, trace, "validate"))
    elif validators:
        decisions.extend(await asyncio.gather(*(ask_decider(ext, ctx, snap, context, deadline, call, trace, "validate")
                                                for ext in validators)))
    final = first_by_precedence(decisions)
    if final is None or not changed_by:
        return final
    if final.action == "allow":  # the final input, whoever changed it last
        return ExtensionDecision(action="allow", input=current, has_input=True, extension=changed_by[-1],
                                 input_changed_by=changed_by)
    return final.model_copy(update={"input_changed_by": changed_by})
