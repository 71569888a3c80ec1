"""An Agent's decision journal: turns the tap's hook records into entries and appends them to the store, in order.

`attach(agent)` (at start) gives the agent's session a `SessionJournal` as the extension manager's journal sink
(host/extensions/_journal_tap.py). Records are converted and written by one background task per session, so the
hook path never waits for the store; `flush(agent)` (at the end of each turn) waits until the turn's entries are
stored. A store write that fails is logged with the session and the entries are lost (the turn goes on). The task
gathers records until none came for QUIET_S (a turn's beforeTurn subscribers answer one after another, a call's
deciders at once), at most GATHER_S after the first of a batch, or until the turn says the hook call is over
(`burst_over`: every subscriber answered), and writes them in one transaction — a turn with 5
deciders and 2 tool calls took 8 transactions, each ~0.2 ms of fixed CPU, and takes 3; the batch is written while the
turn goes on to its tool and next step, so the turn's flush seldom waits. A flush writes at once: an entry is stored
at most GATHER_S (plus the write) after its hook answered, and always by the end of its turn.

A resumed durable submission (`expect_submission`) reuses the verdicts journaled by its earlier attempts: a
beforeToolCall decider of the same name and version, shown the same snapshot (the call id aside: a re-run may
number its calls anew), answered allow/block/substitute -> that answer, not asked again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from extension_sdk.proto import extension_pb2 as pb

from ..extensions._convert import camel, decision_from_proto, patch_from_proto
from ..extensions._journal_tap import HookRecord, Reused
from ._journal import DraftFields, JournalEntry, bounded_value, sha256_text
from ._journal_memo import AnswerOutcomes, SnapshotDigests, snapshot_dict

if TYPE_CHECKING:
    from ._agent import Agent

logger = logging.getLogger("hookwire.agent")

#: the journal's task writes the records gathered once none came for QUIET_S, or GATHER_S after the first of them
#: (a flush cuts it short)
QUIET_S = 0.002
GATHER_S = 0.02

MAX_REASON = 1000  # characters of an extension's reason or error text kept in an entry
REUSABLE = ("allow", "block", "substitute")


def match_key(snapshot: dict[str, Any]) -> str:
    """What a resumed call must share with a journaled one to reuse its verdict: the snapshot but its call id."""
    return sha256_text(json.dumps({k: v for k, v in snapshot.items() if k != "toolCallId"}, sort_keys=True))


def outcome_of(hook: str, answer: Any) -> tuple[str, dict[str, Any], str]:
    """(outcome, decision, reason) of an extension's answer (a dispatch Reply or Failure), normalized the way the
    dispatcher reads it. Header values an extension set are kept as their sha256 only (they may be credentials)."""
    frame = getattr(answer, "frame", None)
    if frame is None:
        return str(answer.outcome), {}, str(answer.detail)[:MAX_REASON]
    resp = getattr(frame, frame.WhichOneof("body") or "", None)
    if resp is None:
        return "error", {}, "empty reply"
    if "error" in resp.DESCRIPTOR.fields_by_name and resp.HasField("error"):
        return "error", {}, f"{resp.error.name}: {resp.error.message}"[:MAX_REASON]
    if hook == "beforeToolCall":
        if not resp.HasField("decision"):
            return "allow", {"action": "allow"}, ""
        action, fields, problems = decision_from_proto(resp.decision)
        serious = [p for p in problems if p.field in ("action", "input", "output")]
        if serious and (action in (None, "allow") and "input" not in fields or action == "substitute"
                        and "output" not in fields):
            return "error", {}, "; ".join(str(p) for p in serious)[:MAX_REASON]
        action = action or "allow"
        decision: dict[str, Any] = {"action": action}
        if action == "allow" and "input" in fields:
            decision["input"] = bounded_value(fields["input"])
        if action == "substitute":
            decision["output"] = bounded_value(fields["output"])
        return action, decision, str(fields.get("reason") or "")[:MAX_REASON]
    if hook == "beforeTurn":
        if not resp.HasField("config"):
            return "ok", {"set": {}}, ""
        values, problems = patch_from_proto(resp.config)
        fields_set: dict[str, Any] = {}
        for key, value in values.items():
            if key == "headers" and isinstance(value, dict):
                value = {k: "sha256:" + sha256_text(str(v)) for k, v in value.items()}
            fields_set[camel(key)] = bounded_value(value)
        reason = "; ".join(f"invalid {p.field}: {p.reason}" for p in problems)
        return "ok", {"set": fields_set}, reason[:MAX_REASON]
    return "ok", {}, ""


def _truncated(value: Any) -> bool:
    return isinstance(value, dict) and value.get("truncated") is True and set(value) == {"truncated", "sha256", "chars"}


def verdict_frame(entry: JournalEntry) -> pb.ExtensionFrame | None:
    """The beforeToolCall reply that gives `entry`'s verdict again (None: not reusable)."""
    if entry.hook != "beforeToolCall" or entry.outcome not in REUSABLE:
        return None
    d = entry.decision
    decision = pb.ToolCallDecision()
    if entry.outcome == "allow":
        if "input" not in d:
            return pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse())
        if _truncated(d["input"]):
            return None
        decision.action, decision.input_json = pb.ToolCallDecision.ALLOW, json.dumps(d["input"])
    elif entry.outcome == "block":
        decision.action = pb.ToolCallDecision.BLOCK
    else:
        if _truncated(d.get("output")):
            return None
        decision.action, decision.output_json = pb.ToolCallDecision.SUBSTITUTE, json.dumps(d.get("output"))
    if entry.reason:
        decision.reason = entry.reason
    return pb.ExtensionFrame(before_tool_call=pb.BeforeToolCallResponse(decision=decision))


class SessionJournal:
    """One session's journal sink: ordered background appends, and verdict reuse for resumed submissions."""

    def __init__(self, store: Any, session_id: str) -> None:
        self._store = store
        self._sid = session_id
        self._pending: list[tuple[HookRecord, float]] = []
        self._task: asyncio.Task[None] | None = None
        self._submissions: dict[str, str] = {}  # request id -> the durable submission it runs
        self._reuse: dict[str, asyncio.Task[dict[tuple[str, str, str], Reused]]] = {}
        self._snapshots = SnapshotDigests()  # one digest per distinct snapshot (every decider of a call got it)
        self._outcomes = AnswerOutcomes(outcome_of)  # one normalization per distinct answer
        self._hurry = 0  # flushes waiting: write at once
        self._burst_over = False  # the hook call whose records are gathering is done: write them now
        self._last = 0.0  # loop time of the last record
        self._wake: asyncio.Future[None] | None = None  # the gathering's wait, while it waits

    # -- the sink ------------------------------------------------------------------------------------------

    def record(self, record: HookRecord) -> None:
        self._pending.append((record, time.time()))
        self._last = asyncio.get_running_loop().time()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def wants_reuse(self, request_id: str) -> bool:
        return request_id in self._submissions

    async def reusable(self, ext: str, version: str, hook: str, request_id: str, snapshot: Any) -> Reused | None:
        task = self._reuse.get(request_id)
        if task is None:
            task = self._reuse[request_id] = asyncio.ensure_future(self._load_reusable(request_id))
        verdicts = await asyncio.shield(task)
        return verdicts.get((ext, version, match_key(snapshot_dict(snapshot))))

    # -- the agent's side ----------------------------------------------------------------------------------

    def expect_submission(self, request_id: str, submission_id: str) -> None:
        self._submissions[request_id] = submission_id

    def burst_over(self) -> None:
        """A hook call's subscribers have all answered (beforeTurn's, one beforeToolCall's deciders): no more of its
        records will come, so what gathered is written now, not after QUIET_S. The write then overlaps the turn's
        next work instead of the store round trips at its end (the answer's upsert waited behind it)."""
        if self._pending:
            self._burst_over = True
            _wake(self._wake)

    async def flush(self) -> None:
        """Wait until every record so far is stored (or its write failed and was logged)."""
        self._hurry += 1
        try:
            _wake(self._wake)
            while self._task is not None and not self._task.done():
                await asyncio.shield(self._task)
        finally:
            self._hurry -= 1

    def end_request(self, request_id: str) -> None:
        self._submissions.pop(request_id, None)
        self._reuse.pop(request_id, None)

    # -- internals -----------------------------------------------------------------------------------------

    def _draft(self, record: HookRecord, at: float) -> tuple[DraftFields, str | None]:
        snap = self._snapshots.of(record.snapshot)
        outcome, decision, reason = self._outcomes.of(record.hook, record.answer)
        ctx = record.context
        draft: DraftFields = {  # every JournalDraft field: our own values, no model built on the way to the store
            "session_id": ctx.session_id, "request_id": ctx.request_id,
            "submission_id": self._submissions.get(ctx.request_id, ""),
            "call_id": str(snap.fields.get("toolCallId", "")) if record.hook == "beforeToolCall" else "",
            "extension": record.extension, "extension_version": record.extension_version, "hook": record.hook,
            "mode": record.mode, "phase": record.phase, "snapshot_sha256": snap.sha256, "outcome": outcome,
            "decision": decision, "reason": reason, "latency_ms": round(float(record.answer.ms), 3),
            "at": round(at, 6), "reused_from": record.reused_from,
        }
        return draft, snap.kept

    async def _gather(self) -> None:
        """Let more records come until none came for QUIET_S (at most GATHER_S), unless a flush is waiting or the hook
        call they came from is over."""
        loop = asyncio.get_running_loop()
        until = loop.time() + GATHER_S
        while not self._hurry and not self._burst_over:
            at = min(until, self._last + QUIET_S)
            if loop.time() >= at:
                return
            self._wake = wake = loop.create_future()
            timer = loop.call_at(at, _wake, wake)
            try:
                await wake
            finally:
                timer.cancel()
                self._wake = None

    async def _drain(self) -> None:
        while self._pending:
            await self._gather()
            self._burst_over = False
            batch, self._pending = self._pending, []
            drafts = []
            for record, at in batch:
                try:
                    drafts.append(self._draft(record, at))
                except Exception:  # noqa: BLE001 - one odd answer must not lose the others
                    logger.exception("journal: cannot record %s of extension %r (session %s)", record.hook,
                                     record.extension, self._sid)
            if not drafts:
                continue
            try:
                await self._store.append_journal(self._sid, drafts)
            except Exception:  # noqa: BLE001 - the journal must not break the turn; say so loudly
                logger.exception("journal: %d entr%s of session %s could not be stored", len(drafts),
                                 "y" if len(drafts) == 1 else "ies", self._sid)

    async def _load_reusable(self, request_id: str) -> dict[tuple[str, str, str], Reused]:
        submission = self._submissions.get(request_id, "")
        verdicts: dict[tuple[str, str, str], Reused] = {}
        for row in await self._store.journal(self._sid, submission) if submission else []:
            if row.snapshot is None:
                continue
            entry = row.parsed()
            if entry.submission_id != submission or entry.request_id == request_id:
                continue
            frame = verdict_frame(entry)
            if frame is None:
                continue
            key = (entry.extension, entry.extension_version, match_key(json.loads(row.snapshot)))
            verdicts.setdefault(key, Reused(frame=frame, seq=entry.seq if entry.reused_from is None
                                            else entry.reused_from))
        return verdicts


def _wake(future: asyncio.Future[None] | None) -> None:
    if future is not None and not future.done():
        future.set_result(None)


# -- the Agent's few calls ---------------------------------------------------------------------------------


def attach(agent: Agent) -> None:
    """Give the agent's session a journal, when it has extensions, a store that keeps one, and `journal` on."""
    manager, store = agent._manager, agent.store.raw if agent.store is not None else None
    tap = getattr(manager, "journal", None)
    if tap is None or not agent.journal or not hasattr(store, "append_journal"):
        return
    journal = SessionJournal(store, agent.session_id)
    tap.attach(agent.session_id, journal)
    agent._journal = journal  # type: ignore[attr-defined]


async def detach(agent: Agent) -> None:
    journal: SessionJournal | None = getattr(agent, "_journal", None)
    if journal is None:
        return
    agent._journal = None  # type: ignore[attr-defined]
    tap = getattr(agent._manager, "journal", None)
    if tap is not None:
        tap.detach(agent.session_id, journal)
    await journal.flush()


async def flush(agent: Agent, request_id: str) -> None:
    """The end of a turn: its entries are stored when this returns."""
    journal: SessionJournal | None = getattr(agent, "_journal", None)
    if journal is not None:
        await journal.flush()
        journal.end_request(request_id)


def burst_over(agent: Agent) -> None:
    """The turn's awaited hook call is done (every subscriber answered): write its entries now (never waits)."""
    journal: SessionJournal | None = getattr(agent, "_journal", None)
    if journal is not None:
        journal.burst_over()


def expect_submission(agent: Agent, request_id: str, submission_id: str) -> None:
    """The turn `request_id` runs durable submission `submission_id`: journal it so, and reuse its verdicts."""
    journal: SessionJournal | None = getattr(agent, "_journal", None)
    if journal is not None:
        journal.expect_submission(request_id, submission_id)
