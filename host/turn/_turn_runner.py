"""One turn, from its request to its result: prepare, run the loop, persist, recover, respond.

`TurnRunner.run` is the only way a turn runs, whatever the entry path (chat, save_messages, submissions,
continue_last_turn, auto-continuation):

    take the agent's lock (one turn at a time, FIFO) -> TurnRecord + HookChain ->
    persist the incoming messages -> compact proactively (Session.compact_after_tokens) ->
    prepare (tools, history, before_turn + extensions -> TurnPlan) -> TurnLoop ->
    persist the assistant message (while the last observations go out) -> flush the extensions' acks ->
    the result (trace, failed_open, provenance, denied) -> on_chat_response

Failures are staged (`fail`): each names its stage (parse, persist, turn, stream, recovery, transcript), says
whether the messages were persisted, keeps a partial assistant message, and goes through on_chat_error. A
context overflow is classified and, within Session.overflow_max_attempts, compacted and retried.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .. import _telemetry as telemetry
from .._errors import ChatStreamStallError
from ..extensions._tool_names import withhold_shadowing
from . import _journal_writer
from ._attribution import attribute
from ._chat_errors import TurnAborted, error_message
from ._hook_chain import HookChain, TurnRecord
from ._hook_messages import owned
from ._loop import TurnLoop, TurnPlan
from ._plan import HostSettings, plan_turn
from ._session import maybe_await
from ._store_backends import turn_lease
from ._tools import Tool, as_tool
from ._types import (
    ChatErrorClassification,
    ChatErrorContext,
    ChatErrorStage,
    ChatRecoveryContext,
    ChatResponseResult,
    TurnContext,
)
from ._ui_messages import finalize, new_id, normalize_incoming, to_model_messages
from ._workspace_tools import workspace_tools

if TYPE_CHECKING:
    from ._agent import Agent

logger = logging.getLogger("hookwire.agent")

#: The agent whose turn runs in this task (a hook or tool that starts a turn of the same agent would deadlock).
active_turn: contextvars.ContextVar[Agent | None] = contextvars.ContextVar("hookwire_active_turn", default=None)



class TurnRequest(BaseModel):
    """One turn to run: its id, the messages it brings, and how it was asked for."""

    model_config = {"arbitrary_types_allowed": True}

    request_id: str
    messages: list[dict[str, Any]] = []
    continuation: bool = False
    body: dict[str, Any] | None = None
    abort: asyncio.Event
    entry: str = "chat"
    cancelled: bool = False  # the caller cancelled the awaiting task (set by TurnRunner.caller_cancelled)
    # save_messages' function form: current transcript -> the next one, called when the turn starts (in its lock)
    messages_fn: Any = None


class TurnRunner:
    """Runs the turns of one Agent (its hooks, store, session and extension manager)."""

    def __init__(self, agent: Agent) -> None:
        self.a = agent

    async def run(self, req: TurnRequest) -> ChatResponseResult:
        """Run the turn. A caller that cancels the task awaiting this (asyncio cancel, Ctrl-C) ends the turn as
        cancel_chat does — partial message kept, status aborted, on_chat_response fired — and then gets its
        CancelledError."""
        cancelled = False
        try:
            # one turn at a time per session: in this process (the lock) and across host processes (the store's lease)
            async with self.a._lock, turn_lease(self.a.store.raw, self.a.session_id), \
                    telemetry.agent_span(type(self.a).__name__, self.a.session_id, req.request_id) as span:
                token = active_turn.set(self.a)
                turn = self.a._turn = TurnRecord(session_id=self.a.session_id, request_id=req.request_id)
                turn.context.traceparent, turn.context.tracestate = telemetry.traceparent()  # observations
                try:
                    try:
                        result = await self.execute(req, HookChain(self.a, self.a._manager, turn))
                    except asyncio.CancelledError:  # the caller cancelled before the turn got going
                        cancelled = True
                        result = ChatResponseResult(status="aborted", request_id=req.request_id,
                                                    continuation=req.continuation)
                    except Exception as exc:  # a bug or a store failure outside the staged paths
                        result = await self.fail(exc, "turn", rid=req.request_id, persisted=True, assistant=None,
                                                  continuation=req.continuation)
                    if self.a._manager is not None:
                        try:
                            await self.a._manager.flush(turn.context)
                        except Exception:
                            logger.exception("flushing extension observations failed (session %s)", self.a.session_id)
                    await _journal_writer.flush(self.a, turn.request_id)  # the turn's journal entries are stored
                    result.trace = list(turn.trace)
                    result.failed_open, result.failed_open_reasons = attribute(result.trace, turn.request_id)
                    result.provenance = dict(turn.provenance)
                    result.denied = list(turn.denied)
                    telemetry.end_turn(span, result.status, result.error, result.failed_open)
                finally:
                    self.a._turn = None
                    active_turn.reset(token)
        finally:
            self.a._aborts.pop(req.request_id, None)
        cancelled = cancelled or req.cancelled
        await self.respond(result)
        if cancelled:
            raise asyncio.CancelledError()
        return result

    async def respond(self, result: ChatResponseResult) -> None:
        from ._agent import is_noop_hook

        if is_noop_hook(self.a, "on_chat_response"):  # Agent's own: does nothing
            return
        try:
            await maybe_await(self.a.on_chat_response(result))
        except Exception:
            logger.exception("on_chat_response raised (session %s, request %s)", self.a.session_id, result.request_id)

    async def execute(self, req: TurnRequest, chain: HookChain) -> ChatResponseResult:
        rid = req.request_id
        # the transcript as the incoming messages were stored (read in the same store round trip), for the first
        # prepare below; None when it must be read there (nothing came in, a compaction wrote, another attempt)
        stored: list[dict[str, Any]] | None = None
        try:
            if req.messages_fn is not None:
                await self.apply_messages_fn(req)
            else:
                stored = await self.a.store.persist_incoming(req.messages)
        except Exception as exc:
            return await self.fail(exc, "persist", rid=rid, persisted=False, assistant=None,
                                    continuation=req.continuation)
        if await self.maybe_compact_proactively():
            stored = None
        attempts = 0
        recoveries = 0
        while True:
            assistant = await self.start_assistant(req)
            if req.abort.is_set():
                return await self.aborted(req, assistant)
            try:
                plan = await self.prepare(req, chain, stored)
            except asyncio.CancelledError:
                return await self.caller_cancelled(req, assistant)
            except Exception as exc:
                return await self.fail(exc, "turn", rid=rid, persisted=True, assistant=None,
                                        continuation=req.continuation)
            stored = None  # a recovery or overflow attempt reads the transcript again
            loop = TurnLoop(plan, chain, assistant, req.abort)
            try:
                await loop.run()
                break
            except TurnAborted:
                return await self.aborted(req, assistant)
            except asyncio.CancelledError:
                return await self.caller_cancelled(req, assistant)
            except Exception as exc:
                if isinstance(exc, ChatStreamStallError) and await self.recover(exc, rid, recoveries + 1):
                    recoveries += 1
                    logger.warning("chat:recovery session=%s request=%s attempt=%d: %s", self.a.session_id, rid,
                                   recoveries, exc)
                    continue  # the turn runs again; what the stalled attempt streamed is dropped
                try:
                    classification = await self.classify(exc, rid)
                except asyncio.CancelledError:  # the caller cancelled meanwhile: the error surfaces, then
                    req.abort.set()              # run() re-raises the cancellation
                    req.cancelled = True
                    return await self.fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                            continuation=req.continuation)
                if classification == "context_overflow" and req.abort.is_set():
                    # cancelled while the error was classified: no compaction, the error surfaces (Think)
                    return await self.fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                            continuation=req.continuation, classification="context_overflow")
                if classification == "context_overflow":
                    if attempts < self.a.session.overflow_max_attempts:
                        attempts += 1
                        try:
                            changed = await self.compact()
                        except Exception as cexc:
                            return await self.fail(cexc, "recovery", rid=rid, persisted=True, assistant=assistant,
                                                    continuation=req.continuation, classification="context_overflow")
                        if changed:
                            logger.info("context overflow: compacted, retrying (attempt %d, request %s)", attempts, rid)
                            continue
                    return await self.fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                            continuation=req.continuation, classification="context_overflow")
                return await self.fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                        continuation=req.continuation)
        if self.a._manager is not None:
            self.a._manager.send_observations()  # extensions handle the last step while the message is persisted
        try:
            await self.a.store.upsert(finalize(assistant))
        except Exception as exc:
            return await self.fail(exc, "transcript", rid=rid, persisted=True, assistant=None,
                                    continuation=req.continuation)
        return ChatResponseResult(status="completed", message=assistant, request_id=rid, continuation=req.continuation)

    async def apply_messages_fn(self, req: TurnRequest) -> None:
        """save_messages(fn): fn gets a copy of the transcript as the turn starts and returns the next one (Think's
        function form). Kept messages are updated in place, new ones appended; dropping any replaces the whole."""
        current = await self.a.store.messages()
        returned = await maybe_await(req.messages_fn(copy.deepcopy(current)))
        if not isinstance(returned, (list, tuple)):
            raise TypeError(f"save_messages(fn): fn must return a list of messages, got {type(returned).__name__}")
        nxt = [normalize_incoming(m) for m in returned]
        known = {m["id"] for m in current}
        req.messages = [m for m in nxt if m["id"] not in known]
        if known - {m["id"] for m in nxt}:
            await self.a.store.replace_all(nxt)
        else:
            for message in nxt:
                await self.a.store.upsert(message)

    async def start_assistant(self, req: TurnRequest) -> dict[str, Any]:
        """The assistant message the turn streams into: a new one, except that the auto-continuation after client
        tool results finishes the message that holds those tool calls. continue_last_turn saves a new message
        (as Think does)."""
        if req.continuation and req.entry == "auto_continue":
            messages = await self.a.store.messages()
            if messages and messages[-1].get("role") == "assistant":
                return copy.deepcopy(messages[-1])
        return {"id": new_id(), "role": "assistant", "parts": [], "content": "", "createdAt": time.time()}

    async def persist_partial(self, assistant: dict[str, Any] | None) -> dict[str, Any] | None:
        if assistant is None or not any(p.get("type") != "step-start" for p in assistant.get("parts", [])):
            return None
        try:
            await self.a.store.upsert(finalize(assistant))
        except Exception:
            logger.exception("could not persist the partial assistant message (session %s)", self.a.session_id)
            return None
        return assistant

    async def aborted(self, req: TurnRequest, assistant: dict[str, Any]) -> ChatResponseResult:
        """The turn was aborted: keep what streamed. Nothing streamed yet still leaves an (empty) assistant
        message after this turn's user message, so the transcript never holds two user messages in a row."""
        kept = await self.persist_partial(assistant)
        if kept is None and req.messages and req.messages[-1].get("role") == "user":
            try:
                await self.a.store.upsert(finalize(assistant))
                kept = assistant
            except Exception:
                logger.exception("could not persist the aborted assistant message (session %s)", self.a.session_id)
        return ChatResponseResult(status="aborted", message=kept, request_id=req.request_id,
                                  continuation=req.continuation)

    async def caller_cancelled(self, req: TurnRequest, assistant: dict[str, Any]) -> ChatResponseResult:
        """The task awaiting the turn was cancelled: end it as an abort; run() re-raises CancelledError after
        on_chat_response."""
        req.abort.set()
        req.cancelled = True
        return await self.aborted(req, assistant)

    async def fail(
        self,
        error: BaseException,
        stage: ChatErrorStage,
        *,
        rid: str,
        persisted: bool,
        assistant: dict[str, Any] | None,
        continuation: bool,
        classification: ChatErrorClassification | None = None,
    ) -> ChatResponseResult:
        kept = await self.persist_partial(assistant)
        ctx = ChatErrorContext(request_id=rid, stage=stage, messages_persisted=persisted, classification=classification)
        logger.warning("chat:request:failed session=%s request=%s stage=%s persisted=%s: %s",
                       self.a.session_id, rid, stage, persisted, error_message(error))
        try:
            returned = self.a.on_chat_error(error, ctx)
            returned = await maybe_await(returned)
        except Exception:
            logger.exception("on_chat_error raised (session %s, request %s)", self.a.session_id, rid)
            returned = error
        final = error if returned is None else returned
        return ChatResponseResult(status="error", message=kept, request_id=rid, continuation=continuation,
                                  error=error_message(final))

    async def recover(self, error: BaseException, rid: str, attempt: int) -> bool:
        """Whether a stalled stream is run again: within chat_recovery_max_attempts, unless on_chat_recovery
        says False."""
        limit = max(0, int(self.a.chat_recovery_max_attempts))
        if attempt > limit:
            return False
        ctx = ChatRecoveryContext(request_id=rid, attempt=attempt, max_attempts=limit, error=error_message(error))
        try:
            return await maybe_await(self.a.on_chat_recovery(ctx)) is not False
        except Exception:
            logger.exception("on_chat_recovery raised (session %s, request %s); not recovering", self.a.session_id, rid)
            return False

    async def classify(self, error: BaseException, rid: str) -> ChatErrorClassification | None:
        if not self.a.session.overflow_recovery:
            return None
        ctx = ChatErrorContext(request_id=rid, stage="stream", messages_persisted=True)
        fn = inspect.getattr_static(type(self.a), "classify_chat_error")
        try:
            if inspect.isfunction(fn) and next(iter(inspect.signature(fn).parameters), "") != "self":
                result = fn(error, ctx)  # e.g. classify_chat_error = default_context_overflow_classifier
            else:
                result = self.a.classify_chat_error(error, ctx)
            return await maybe_await(result)
        except Exception:
            logger.exception("classify_chat_error raised (session %s)", self.a.session_id)
            return None

    async def compact(self) -> bool:
        """Run the session's compaction; True when it changed the transcript."""
        if self.a.session.compaction is None:
            return False
        before = await self.a.store.messages()
        after = await maybe_await(self.a.session.compaction(copy.deepcopy(before)))
        if after is None:
            return False
        after = [normalize_incoming(m) for m in after]
        if after == before:
            return False
        await self.a.store.replace_all(after)
        return True

    async def maybe_compact_proactively(self) -> bool:
        """Compact before the turn when the transcript is estimated above compact_after_tokens; True when a
        compaction ran (it may have written the transcript, even if it then failed)."""
        limit = self.a.session.compact_after_tokens
        if limit is None or self.a.session.compaction is None:
            return False
        size = sum(len(json.dumps(m, default=str)) for m in await self.a.store.messages()) // 4
        if size <= limit:
            return False
        try:
            await self.compact()
        except Exception:
            logger.exception("compaction before the turn failed (session %s)", self.a.session_id)
        return True

    # ================================================================================= assembling the turn

    async def system(self) -> str:
        if self.a.session.context_blocks:
            return await self.a.session.build_system(self.a.store.get_context)
        return await maybe_await(self.a.get_system_prompt())

    def extension_tools(self) -> dict[str, Tool]:
        if self.a._manager is None:
            return {}
        out: dict[str, Tool] = {}
        for ext_tool in self.a._manager.tools():
            out[ext_tool.name] = Tool(
                name=ext_tool.name,
                description=ext_tool.description,
                parameters=ext_tool.input_schema or {"type": "object", "properties": {}},
                execute=None,
                dynamic=True,
                streaming=bool(getattr(ext_tool, "streaming", False)),
            )
        return out

    async def prepare(self, req: TurnRequest, chain: HookChain,
                      stored: list[dict[str, Any]] | None = None) -> TurnPlan:
        """The turn's plan. ``stored``: the session's transcript as it was read right after the turn's incoming
        messages were stored (None: read it here)."""
        tools: dict[str, Tool] = {}
        if self.a.workspace_root is not None and self.a.workspace_tools:  # Think's built-ins; get_tools() wins
            tools.update(workspace_tools(self.a.workspace_root))
        for name, value in (await maybe_await(self.a.get_tools()) or {}).items():
            tools[name] = as_tool(name, value)
        if self.a._manager is not None:  # an extension never replaces a host tool (host/extensions/_tool_names.py)
            owners = {t.name: (t.extension, t.tool) for t in self.a._manager.tools()}
            for event in withhold_shadowing(tools, self.extension_tools(), owners, chain.turn.request_id):
                logger.error("session %s: %s: withheld from this turn", self.a.session_id, event.detail)
                self.a._on_trace(event)
        history = await self.a.store.model_messages(stored)  # converted only where it changed since the last turn
        ctx = owned(TurnContext(  # the history is the turn's own: not validated message by message
            system=await self.system(),
            tools=dict(tools),
            model=await maybe_await(self.a.get_model()),
            continuation=req.continuation,
            body=req.body,
        ), history)
        cfg, ext_maps = await chain.before_turn(ctx, tools, req.continuation, req.body)
        stall = self.a.session.chat_stream_stall_timeout_ms
        host = HostSettings(model_options=self.a.model_options, api_base=self.a.api_base, api_key=self.a.api_key,
                            max_steps=self.a.max_steps, send_reasoning=bool(self.a.send_reasoning),
                            litellm_bookkeeping=self.a.litellm_bookkeeping,
                            stall_timeout_ms=stall if stall is not None else self.a.chat_stream_stall_timeout_ms)
        plan, refused = plan_turn(ctx, cfg, tools, host, ext_maps)
        chain.options_refused(refused)
        session = self.a.session
        if session.max_input_tokens is not None and session.compaction is not None and cfg.messages is None:
            plan.compact_at_input_tokens = max(1, int(session.max_input_tokens * session.proactive_threshold))
            plan.compact_history = self.compact_mid_turn
        return plan

    async def compact_mid_turn(self) -> list[dict[str, Any]] | None:
        """The proactive guard's compaction: the stored history compacted, as model messages (None: unchanged)."""
        try:
            changed = await self.compact()
        except Exception:
            logger.exception("mid-turn compaction failed (session %s); the turn goes on", self.a.session_id)
            return None
        if not changed:
            return None
        logger.info("context near its limit: compacted mid-turn (session %s)", self.a.session_id)
        return to_model_messages(await self.a.store.messages())

