"""Replay: re-send a session's journaled snapshots to an extension (e.g. its next version) and compare its answers.

`replay(store, session_id, manifest)` starts the manifest's extension, and for every journal entry of that
extension's name (or `as_name`) on a hook it serves (beforeTurn; beforeToolCall when it decides), sends the exact
snapshot the journal kept, under the original session and request ids, and compares the new answer with the
journaled one: same, or what it would now do ("would now block", "would now set maxSteps", "would now
substitute", ...). No model is called and no tool runs. The reason text is shown but not compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf.json_format import ParseDict
from pydantic import BaseModel, Field, computed_field

from extension_sdk.proto import extension_pb2 as pb

from .extensions._dispatch import call_hook
from .extensions._manager import ExtensionManager
from .extensions._manifest import load_manifest
from .extensions._snapshots import CallContext
from .turn._journal import JournalEntry, verify_chain
from .turn._journal_writer import outcome_of

REPLAYED_HOOKS = ("beforeTurn", "beforeToolCall")


class ReplayError(Exception):
    """Replay could not run (no such entries, the extension did not start): one line for the CLI."""


class ReplayItem(BaseModel):
    """One journaled call, sent again."""

    seq: int
    hook: str
    call_id: str = ""
    was: str  # the journaled answer, in words
    now: str  # the new answer, in words
    verdict: str  # "same", or what the extension would now do
    same: bool
    reason: str = ""  # the new answer's reason (or failure), not compared


class ReplayTurn(BaseModel):
    request_id: str
    items: list[ReplayItem] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def same(self) -> bool:
        return all(item.same for item in self.items)


class ReplayReport(BaseModel):
    session_id: str
    extension: str  # whose journaled answers are the baseline
    against: str  # the manifest's extension, name@version
    turns: list[ReplayTurn] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # why some entries were not sent
    chain_broken: str = ""  # the journal's chain does not hold (replayed anyway): where and why

    @computed_field  # type: ignore[prop-decorator]
    @property
    def differs(self) -> int:
        return sum(1 for t in self.turns for i in t.items if not i.same)


def describe(hook: str, outcome: str, decision: dict[str, Any]) -> str:
    """An answer in words ("block", "allow", "allow with a new input", "substitute", "set maxSteps", "error")."""
    if outcome in ("error", "timeout"):
        return f"fail ({outcome})"
    if hook == "beforeToolCall":
        if outcome == "allow" and "input" in decision:
            return "allow with a new input"
        return outcome
    if hook == "beforeTurn":
        fields = sorted((decision.get("set") or {}))
        return "set " + ", ".join(fields) if fields else "set nothing"
    return outcome


def compare(hook: str, was: tuple[str, dict[str, Any]], now: tuple[str, dict[str, Any]]) -> str:
    """"same", or what the extension would now do differently."""
    if was == now:
        return "same"
    (was_outcome, was_decision), (now_outcome, now_decision) = was, now
    if now_outcome in ("error", "timeout"):
        return f"would now fail ({now_outcome})"
    if hook == "beforeTurn" and was_outcome not in ("error", "timeout"):
        before, after = was_decision.get("set") or {}, now_decision.get("set") or {}
        changed = sorted(k for k in after if before.get(k, object()) != after[k])
        dropped = sorted(k for k in before if k not in after)
        parts = []
        if changed:
            parts.append("would now set " + ", ".join(_change(k, before, after) for k in changed))
        if dropped:
            parts.append("would no longer set " + ", ".join(dropped))
        return "; ".join(parts) or "same"
    if hook == "beforeToolCall" and was_outcome == now_outcome:
        return "would now allow with a different input" if now_outcome == "allow" else \
            f"would now {now_outcome} differently (another output)"
    return f"would now {describe(hook, now_outcome, now_decision)}"


def _change(key: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    """`key`, with its new (and old) value when they are short enough to read on one line."""
    new = json.dumps(after[key], ensure_ascii=False)
    if len(new) > 60:
        return key
    if key not in before:
        return f"{key}={new}"
    old = json.dumps(before[key], ensure_ascii=False)
    return f"{key}={new} (was {old})" if len(old) <= 60 else f"{key}={new}"


def _frame(hook: str, snapshot: dict[str, Any], ctx: pb.CallContext) -> pb.HostFrame:
    if hook == "beforeTurn":
        return pb.HostFrame(before_turn=pb.BeforeTurnRequest(context=ctx, snapshot=ParseDict(snapshot,
                                                                                             pb.TurnSnapshot())))
    return pb.HostFrame(before_tool_call=pb.BeforeToolCallRequest(
        context=ctx, snapshot=ParseDict(snapshot, pb.ToolCallSnapshot()), want_decision=True))


async def replay(store: Any, session_id: str, manifest: str | Path, *, as_name: str | None = None,
                 sandbox: str = "auto") -> ReplayReport:
    """Replay the session's journal against `manifest` (see the module doc). Raises ReplayError."""
    rows = await store.journal(session_id)
    if not rows:
        raise ReplayError(f"session {session_id!r} has no journal entries in this store")
    try:
        parsed = load_manifest(manifest)
    except Exception as exc:  # noqa: BLE001 - one line for the CLI (the error names the file and field)
        raise ReplayError(str(exc)) from None
    name = as_name or parsed.name
    entries = [(row, row.parsed()) for row in rows]
    mine = [(row, e) for row, e in entries if e.extension == name]
    if not mine:
        present = ", ".join(sorted({e.extension for _, e in entries}))
        raise ReplayError(f"session {session_id!r} has no journal entries of extension {name!r} (it has "
                          f"entries of: {present}); pass --as NAME to compare with another extension's")
    broken, _ = verify_chain(rows)
    async with ExtensionManager(sandbox=sandbox) as manager:  # type: ignore[arg-type]
        try:
            info = await manager.load(parsed, remember=False)
        except Exception as exc:  # noqa: BLE001 - one line for the CLI
            raise ReplayError(f"cannot start the extension of {manifest}: {exc}") from None
        ext = manager._registry.exts[info.name]  # the runtime itself: replay sends raw frames to it
        serves = {h for h in REPLAYED_HOOKS if h in ext.hooks and (h != "beforeToolCall" or ext.deciders)}
        report = ReplayReport(session_id=session_id, extension=name, against=f"{info.name}@{info.version}")
        if broken is not None:
            report.chain_broken = f"entry {broken.seq}: {broken.problem}"
        turns: dict[str, ReplayTurn] = {}
        not_served: dict[str, int] = {}
        for row, entry in mine:
            if entry.hook not in serves:
                not_served[entry.hook] = not_served.get(entry.hook, 0) + 1
                continue
            if row.snapshot is None:
                report.skipped.append(f"entry {entry.seq}: its snapshot was too large to keep")
                continue
            item = await _replay_one(ext, entry, json.loads(row.snapshot))
            turns.setdefault(entry.request_id, ReplayTurn(request_id=entry.request_id)).items.append(item)
        for hook, count in sorted(not_served.items()):
            report.skipped.append(f"{count} {hook} entr{'y' if count == 1 else 'ies'}: "
                                  f"{info.name} does not {'decide' if hook == 'beforeToolCall' else 'serve'} {hook}")
        report.turns = list(turns.values())
        return report


async def _replay_one(ext: Any, entry: JournalEntry, snapshot: dict[str, Any]) -> ReplayItem:
    ctx = CallContext(session_id=entry.session_id, request_id=entry.request_id)
    frame = _frame(entry.hook, snapshot, pb.CallContext(session_id=ctx.session_id, request_id=ctx.request_id))
    answer = await call_hook(ext, entry.hook, frame, ctx, None)
    now_outcome, now_decision, now_reason = outcome_of(entry.hook, answer)
    was = (entry.outcome, entry.decision)
    verdict = compare(entry.hook, was, (now_outcome, now_decision))
    return ReplayItem(seq=entry.seq, hook=entry.hook, call_id=entry.call_id,
                      was=describe(entry.hook, *was), now=describe(entry.hook, now_outcome, now_decision),
                      verdict=verdict, same=verdict == "same", reason=now_reason)
