"""host.Agent: Think's chat-turn lifecycle on litellm, with out-of-process extensions wired into every hook.

Subclass it and override hooks (sync or async). One turn runs at a time per agent (FIFO); every entry path —
chat(), save_messages(), submit_messages(), continue_last_turn(), add_tool_result() auto-continuation, and
follow-ups queued by extensions — runs the same lifecycle:

    before_turn -> [extensions beforeTurn] -> steps: before_step, on_chunk*, before_tool_call ->
    [ext beforeToolCall] -> execute -> after_tool_call -> [ext afterToolCall], on_step_finish ->
    [ext onStepFinish] -> (persist, while the last observations go out) -> [wait until the extensions
    handled every observation of the turn] -> on_chat_response
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import inspect
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ._chat_errors import NestedTurnError, TurnAborted, default_context_overflow_classifier, error_message
from ._session import Session, maybe_await
from ._store_backends import claim_submission, turn_lease
from ._submission_resume import earlier_answer
from ._snapshots import (
    CallContext,
    ChunkSnapshot,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnSnapshot,
)
from ._tool_names import ToolNameCollision, collision_message, host_collisions, withhold_shadowing
from ._tools import Tool, as_tool
from ._turn_config_policy import MAP_FIELDS, TurnConfigDenial, apply_extension_options, provider_of
from ._turn_loop import TurnLoop, TurnPlan
from ._turn_types import (
    ChatErrorClassification,
    ChatErrorContext,
    ChatErrorStage,
    ChatResponseResult,
    ChunkContext,
    PrepareStepContext,
    StepConfig,
    StepContext,
    ToolCallContext,
    ToolCallDecision,
    ToolCallResultContext,
    TurnConfig,
    TurnContext,
)
from ._ui_messages import (
    MessageParseError,
    finalize,
    for_bridge,
    is_tool_part,
    new_id,
    normalize_incoming,
    pending_tool_parts,
    to_model_messages,
)

logger = logging.getLogger("hookwire.agent")

_active_turn: contextvars.ContextVar["Agent | None"] = contextvars.ContextVar("hookwire_active_turn", default=None)

_TRACE_FAILURES = ("error", "timeout", "failed_open")


class _TurnRequest(BaseModel):
    model_config = {"arbitrary_types_allowed": True}

    request_id: str
    messages: list[dict[str, Any]] = []
    continuation: bool = False
    body: dict[str, Any] | None = None
    abort: asyncio.Event
    entry: str = "chat"


def _coerce(model: type[BaseModel], value: Any, hook: str) -> Any:
    if value is None or isinstance(value, model):
        return value
    if isinstance(value, dict):
        return model.model_validate(value)
    raise TypeError(f"{hook}() must return a {model.__name__}, a dict or None, got {type(value).__name__}")


def _error_dict(error: Any) -> dict[str, Any]:
    if isinstance(error, BaseException):
        import traceback

        stack = "".join(traceback.format_exception(error))[-4000:]
        return {"name": type(error).__name__, "message": str(error), "stack": stack}
    return {"name": "Error", "message": str(error), "stack": ""}


def _deadline(timeout: Any, started: float) -> float | None:
    """Loop time at which a turn with TurnConfig.timeout (ms, or {totalMs}) ends; None without a total."""
    total = timeout.get("totalMs", timeout.get("total_ms")) if isinstance(timeout, dict) else timeout
    return started + float(total) / 1000.0 if isinstance(total, (int, float)) and total > 0 else None


class Agent:
    """A chat agent. Override the hooks you need; ``async with Agent(...) as a: await a.chat("hi")``."""

    model: str = "hookwire/scripted"
    max_steps: int = 10
    chat_stream_stall_timeout_ms: int = 120_000
    # The host app's own model endpoint, credentials and extra litellm keyword arguments (e.g. extra_headers,
    # api_version, organization). They always win over anything an extension returns (issue 10 item 1).
    api_base: str | None = None
    api_key: str | None = None
    model_options: dict[str, Any] | None = None

    def __init__(
        self,
        *,
        session_id: str = "default",
        store: Any = None,
        extensions: Sequence[Any] = (),
        manager: Any = None,
        workspace: str | Path | None = None,
        sandbox: str = "auto",
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        model_options: dict[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self._store_spec = store
        self._extension_specs = list(extensions)
        self._manager = manager
        self._owns_manager = False
        self._workspace = Path(workspace).resolve() if workspace is not None else None
        self._sandbox = sandbox
        if model is not None:
            self.model = model
        if api_base is not None:
            self.api_base = api_base
        if api_key is not None:
            self.api_key = api_key
        if model_options is not None:
            self.model_options = dict(model_options)
        self.store: Any = None
        self._owns_store = False
        self.session: Session = Session()
        self._lock = asyncio.Lock()
        self._aborts: dict[str, asyncio.Event] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._submissions: dict[str, asyncio.Task[ChatResponseResult]] = {}
        self._turn_trace: list[TraceEvent] | None = None
        self._turn_rid = ""
        self._turn_cc: CallContext | None = None  # the turn's CallContext, one object per turn (see _cc)
        self._turn_provenance: dict[str, str] = {}
        self._turn_denied: list[TurnConfigDenial] = []
        self._turn_deadline: float | None = None  # loop time the turn's timeout (totalMs) ends; bounds extension hooks
        self._chunk_subscribed = False
        self._started = False

    # ================================================================================= overridable API

    def get_model(self) -> str:
        return self.model

    def get_system_prompt(self) -> str:
        return "You are a helpful assistant."

    def get_tools(self) -> dict[str, Any]:
        return {}

    def configure_session(self, session: Session) -> Session | None:
        return session

    def before_turn(self, ctx: TurnContext) -> TurnConfig | dict[str, Any] | None:
        return None

    def before_step(self, ctx: PrepareStepContext) -> StepConfig | dict[str, Any] | None:
        return None

    def before_tool_call(self, ctx: ToolCallContext) -> ToolCallDecision | dict[str, Any] | None:
        return None

    def after_tool_call(self, ctx: ToolCallResultContext) -> None:
        return None

    def on_step_finish(self, ctx: StepContext) -> None:
        return None

    def on_chunk(self, ctx: ChunkContext) -> None:
        return None

    def on_chat_response(self, result: ChatResponseResult) -> None:
        return None

    def on_chat_error(self, error: Any, ctx: ChatErrorContext | None = None) -> Any:
        return error

    def classify_chat_error(self, error: Any, ctx: ChatErrorContext | None = None) -> ChatErrorClassification | None:
        return None

    # ================================================================================= lifecycle

    @property
    def manager(self) -> Any:
        return self._manager

    @property
    def workspace_root(self) -> Path | None:
        return self._workspace

    async def __aenter__(self) -> "Agent":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        if self._started:
            return
        try:
            await self._start()
        except BaseException:
            # A failed start closes what it started (manager, zygote, runtime dir, extensions, store).
            with contextlib.suppress(Exception):
                await asyncio.shield(self.close())
            raise

    def _private_paths(self) -> list[Path]:
        """Host-private paths no extension may read, even inside its cwd tree: the store file, the workspace."""
        paths = [self._workspace] if self._workspace is not None else []
        store_path = getattr(self.store.raw, "path", None) if self.store is not None else None
        if store_path and store_path != ":memory:" and not str(store_path).startswith("file:"):
            paths.append(Path(store_path).resolve())
        return paths

    async def _start(self) -> None:
        from ._scripted_model import register_scripted_model
        from ._store_backends import is_store, open_store

        register_scripted_model()
        if is_store(self._store_spec):
            raw, self._owns_store = self._store_spec, False
        else:
            raw = open_store(self._store_spec)  # a SQLite path, or a postgresql:// URL (host/_store_backends.py)
            self._owns_store = True
        self.store = _SessionStore(raw, self.session_id)
        if hasattr(raw, "open"):
            await raw.open()  # a store that connects (PostgreSQL): a bad URL fails the start, not the first turn
        if self._workspace is not None:
            self._workspace.mkdir(parents=True, exist_ok=True)
        if self._manager is None and self._extension_specs:
            from . import ExtensionManager  # type: ignore[attr-defined]

            self._manager = ExtensionManager(sandbox=self._sandbox)  # type: ignore[arg-type]
            self._owns_manager = True
            await self._manager.__aenter__()
            self._manager.protect_paths(self._private_paths())
            await self._manager.load_all(self._extension_specs)
        if self._manager is not None:
            if not self._owns_manager and hasattr(self._manager, "protect_paths"):
                self._manager.protect_paths(self._private_paths())  # for what it starts from now on
            self._manager.register_session(self.session_id, self)
            self._manager.add_trace_listener(self._on_trace)
        configured = await maybe_await(self.configure_session(self.session))
        if isinstance(configured, Session):
            self.session = configured
        if self._manager is not None:
            await self._refuse_tool_collisions()
        self._started = True
        for sub in await self.store.pending_submissions():
            self._resume_submission(sub)

    async def close(self) -> None:
        for task in list(self._background) + list(self._submissions.values()):
            task.cancel()
        for task in list(self._background) + list(self._submissions.values()):
            with contextlib.suppress(BaseException):
                await task
        if self._manager is not None:
            with contextlib.suppress(Exception):
                self._manager.remove_trace_listener(self._on_trace)
            with contextlib.suppress(Exception):
                self._manager.unregister_session(self.session_id)
            if self._owns_manager:
                try:
                    await self._manager.close()
                except Exception:  # close always finishes: the store below must still be closed
                    logger.exception("closing the extension manager failed")
        if self.store is not None and self._owns_store:
            await self.store.raw.close()
        self._started = False

    def _ensure_started(self) -> None:
        if not self._started:
            raise RuntimeError(f"Agent(session_id={self.session_id!r}) is not started: use 'async with' or await start()")

    # ================================================================================= entry paths

    async def chat(
        self,
        message: str | dict[str, Any],
        *,
        body: dict[str, Any] | None = None,
        signal: asyncio.Event | None = None,
        request_id: str | None = None,
    ) -> ChatResponseResult:
        """Send one user message and run a turn."""
        return await self._entry([message], body=body, signal=signal, request_id=request_id, entry="chat")

    async def save_messages(
        self,
        messages: Sequence[str | dict[str, Any]] | str | dict[str, Any],
        *,
        body: dict[str, Any] | None = None,
        signal: asyncio.Event | None = None,
        request_id: str | None = None,
    ) -> ChatResponseResult:
        """Persist messages (server-initiated) and run a turn on them."""
        items = [messages] if isinstance(messages, (str, dict)) else list(messages)
        return await self._entry(items, body=body, signal=signal, request_id=request_id, entry="save_messages")

    async def submit_messages(
        self,
        messages: Sequence[str | dict[str, Any]] | str | dict[str, Any],
        *,
        body: dict[str, Any] | None = None,
        submission_id: str | None = None,
    ) -> str:
        """Durable: record the submission in the store, then run it in the background. Returns its id;
        ``await agent.wait_for_submission(id)`` gives the result. A host restart resumes it."""
        self._ensure_started()
        items = [messages] if isinstance(messages, (str, dict)) else list(messages)
        normalized = [normalize_incoming(m) for m in items]
        sid = submission_id or new_id("sub")
        await self.store.record_submission(sid, {"messages": normalized, "body": body})
        # The same id submitted again (a client retrying on another host): run what was recorded first, whose
        # message ids the transcript may already hold.
        recorded = next((p for p in await self.store.pending_submissions() if p["submission_id"] == sid), None)
        self._resume_submission(recorded or {"submission_id": sid, "payload": {"messages": normalized, "body": body}})
        return sid

    async def resume_pending(self) -> list[str]:
        """Resume the session's unfinished submissions that this agent is not running (on a shared store: those of a
        host process that died). Each is claimed first, so none runs twice; returns the ids taken up."""
        self._ensure_started()
        taken: list[str] = []
        for sub in await self.store.pending_submissions():
            task = self._submissions.get(sub["submission_id"])
            if task is None or task.done():
                self._resume_submission(sub)
                taken.append(sub["submission_id"])
        return taken

    async def wait_for_submission(self, submission_id: str) -> ChatResponseResult:
        task = self._submissions.get(submission_id)
        if task is None:
            raise KeyError(f"no running submission {submission_id!r} in session {self.session_id!r}")
        return await asyncio.shield(task)

    async def continue_last_turn(
        self, *, body: dict[str, Any] | None = None, signal: asyncio.Event | None = None, request_id: str | None = None
    ) -> ChatResponseResult:
        """Continue the last assistant message (continuation=True); status "skipped" when there is none."""
        self._ensure_started()
        self._refuse_nested("continue_last_turn")
        messages = await self.store.messages()
        rid = request_id or new_id("req")
        if not messages or messages[-1].get("role") != "assistant":
            return ChatResponseResult(status="skipped", request_id=rid, continuation=True)
        return await self._run(self._request(rid, [], True, body, signal, "continue_last_turn"))

    async def add_tool_result(
        self, tool_call_id: str, output: Any, *, error: str | None = None, auto_continue: bool = True
    ) -> ChatResponseResult | None:
        """Complete a client-side tool call; when no call of that message is pending any more, continue the turn."""
        self._ensure_started()
        self._refuse_nested("add_tool_result")
        for message in reversed(await self.store.messages()):
            for part in message.get("parts", []):
                if is_tool_part(part) and part.get("toolCallId") == tool_call_id:
                    if error is not None:
                        part.update(state="output-error", errorText=error)
                    else:
                        part.update(state="output-available", output=output)
                    await self.store.upsert(finalize(message))
                    if auto_continue and not pending_tool_parts(message):
                        return await self._run(self._request(new_id("req"), [], True, None, None, "auto_continue"))
                    return None
        raise KeyError(f"no tool call {tool_call_id!r} in session {self.session_id!r}")

    def cancel_chat(self, request_id: str) -> bool:
        """Abort a running or queued turn: the partial assistant message is kept, status "aborted"."""
        event = self._aborts.get(request_id)
        if event is None:
            return False
        event.set()
        return True

    async def wait_idle(self) -> None:
        """Wait for queued follow-ups (bridge sendMessage) and background submissions."""
        while True:
            tasks = [t for t in list(self._background) + list(self._submissions.values()) if not t.done()]
            if not tasks:
                return
            await asyncio.gather(*tasks, return_exceptions=True)

    async def messages(self) -> list[dict[str, Any]]:
        self._ensure_started()
        return await self.store.messages()

    async def set_context(self, label: str, content: str) -> None:
        await self.store.set_context(label, content)
        self.session.invalidate_prompt()

    async def get_context(self, label: str) -> str | None:
        return await self.bridge_get_context(label)

    # ================================================================================= turn plumbing

    def _refuse_nested(self, entry: str) -> None:
        if _active_turn.get() is self:
            raise NestedTurnError(
                f"{type(self).__name__}.{entry}() was called from inside a running turn of session "
                f"{self.session_id!r} (a hook or a tool); that would deadlock. Start follow-up turns from "
                "on_chat_response, or let an extension queue one with sendMessage."
            )

    def _request(
        self,
        rid: str,
        messages: list[dict[str, Any]],
        continuation: bool,
        body: dict[str, Any] | None,
        signal: asyncio.Event | None,
        entry: str,
    ) -> _TurnRequest:
        abort = signal if signal is not None else asyncio.Event()
        self._aborts[rid] = abort
        return _TurnRequest(
            request_id=rid, messages=messages, continuation=continuation, body=body, abort=abort, entry=entry
        )

    async def _entry(
        self,
        items: list[Any],
        *,
        body: dict[str, Any] | None,
        signal: asyncio.Event | None,
        request_id: str | None,
        entry: str,
    ) -> ChatResponseResult:
        self._ensure_started()
        self._refuse_nested(entry)
        rid = request_id or new_id("req")
        try:
            messages = [normalize_incoming(m) for m in items]
        except MessageParseError as exc:
            result = await self._fail(exc, "parse", rid=rid, persisted=False, assistant=None, continuation=False)
            await self._respond(result)
            return result
        return await self._run(self._request(rid, messages, False, body, signal, entry))

    async def _run(self, req: _TurnRequest) -> ChatResponseResult:
        try:
            async with self._lock, turn_lease(self.store.raw, self.session_id):  # across host processes too
                token = _active_turn.set(self)
                self._turn_trace, self._turn_rid = [], req.request_id
                self._turn_provenance, self._turn_denied = {}, []
                try:
                    try:
                        result = await self._execute(req)
                    except Exception as exc:  # a bug or a store failure outside the staged paths
                        result = await self._fail(exc, "turn", rid=req.request_id, persisted=True, assistant=None,
                                                  continuation=req.continuation)
                    if self._manager is not None:
                        try:
                            await self._manager.flush(self._cc())
                        except Exception:
                            logger.exception("flushing extension observations failed (session %s)", self.session_id)
                    result.trace = list(self._turn_trace or [])
                    result.failed_open = sorted(
                        {e.extension for e in result.trace if e.outcome in _TRACE_FAILURES}
                    )
                    result.provenance = dict(self._turn_provenance)
                    result.denied = list(self._turn_denied)
                finally:
                    self._turn_trace, self._turn_rid = None, ""
                    _active_turn.reset(token)
        finally:
            self._aborts.pop(req.request_id, None)
        await self._respond(result)
        return result

    async def _respond(self, result: ChatResponseResult) -> None:
        try:
            await maybe_await(self.on_chat_response(result))
        except Exception:
            logger.exception("on_chat_response raised (session %s, request %s)", self.session_id, result.request_id)

    def _cc(self) -> CallContext:
        """The current turn's CallContext: one object per turn, so consecutive observations batch together."""
        cc = self._turn_cc
        if cc is None or cc.request_id != self._turn_rid or cc.session_id != self.session_id:
            cc = self._turn_cc = CallContext(session_id=self.session_id, request_id=self._turn_rid)
        return cc

    def _on_trace(self, event: TraceEvent) -> None:
        if self._turn_trace is not None and event.request_id in ("", self._turn_rid):
            self._turn_trace.append(event)

    async def _execute(self, req: _TurnRequest) -> ChatResponseResult:
        rid = req.request_id
        try:
            for message in req.messages:
                await self.store.upsert(message)
        except Exception as exc:
            return await self._fail(exc, "persist", rid=rid, persisted=False, assistant=None,
                                    continuation=req.continuation)
        await self._maybe_compact_proactively()
        attempts = 0
        while True:
            assistant = await self._start_assistant(req.continuation)
            if req.abort.is_set():
                return await self._aborted(req, assistant)
            try:
                plan = await self._prepare(req)
            except Exception as exc:
                return await self._fail(exc, "turn", rid=rid, persisted=True, assistant=None,
                                        continuation=req.continuation)
            loop = TurnLoop(plan, _Hooks(self), assistant, req.abort)
            try:
                await loop.run()
                break
            except TurnAborted:
                return await self._aborted(req, assistant)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                classification = await self._classify(exc, rid)
                if classification == "context_overflow":
                    if attempts < self.session.overflow_max_attempts:
                        attempts += 1
                        try:
                            changed = await self._compact()
                        except Exception as cexc:
                            return await self._fail(cexc, "recovery", rid=rid, persisted=True, assistant=assistant,
                                                    continuation=req.continuation, classification="context_overflow")
                        if changed:
                            logger.info("context overflow: compacted, retrying (attempt %d, request %s)", attempts, rid)
                            continue
                    return await self._fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                            continuation=req.continuation, classification="context_overflow")
                return await self._fail(exc, "stream", rid=rid, persisted=True, assistant=assistant,
                                        continuation=req.continuation)
        if self._manager is not None:
            self._manager.send_observations()  # extensions handle the last step while the message is persisted
        try:
            await self.store.upsert(finalize(assistant))
        except Exception as exc:
            return await self._fail(exc, "transcript", rid=rid, persisted=True, assistant=None,
                                    continuation=req.continuation)
        return ChatResponseResult(status="completed", message=assistant, request_id=rid, continuation=req.continuation)

    async def _start_assistant(self, continuation: bool) -> dict[str, Any]:
        if continuation:
            messages = await self.store.messages()
            if messages and messages[-1].get("role") == "assistant":
                return copy.deepcopy(messages[-1])
        return {"id": new_id(), "role": "assistant", "parts": [], "content": "", "createdAt": time.time()}

    async def _persist_partial(self, assistant: dict[str, Any] | None) -> dict[str, Any] | None:
        if assistant is None or not any(p.get("type") != "step-start" for p in assistant.get("parts", [])):
            return None
        try:
            await self.store.upsert(finalize(assistant))
        except Exception:
            logger.exception("could not persist the partial assistant message (session %s)", self.session_id)
            return None
        return assistant

    async def _aborted(self, req: _TurnRequest, assistant: dict[str, Any]) -> ChatResponseResult:
        kept = await self._persist_partial(assistant)
        return ChatResponseResult(status="aborted", message=kept, request_id=req.request_id,
                                  continuation=req.continuation)

    async def _fail(
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
        kept = await self._persist_partial(assistant)
        ctx = ChatErrorContext(request_id=rid, stage=stage, messages_persisted=persisted, classification=classification)
        logger.warning("chat:request:failed session=%s request=%s stage=%s persisted=%s: %s",
                       self.session_id, rid, stage, persisted, error_message(error))
        try:
            returned = self.on_chat_error(error, ctx)
            returned = await maybe_await(returned)
        except Exception:
            logger.exception("on_chat_error raised (session %s, request %s)", self.session_id, rid)
            returned = error
        final = error if returned is None else returned
        return ChatResponseResult(status="error", message=kept, request_id=rid, continuation=continuation,
                                  error=error_message(final))

    async def _classify(self, error: BaseException, rid: str) -> ChatErrorClassification | None:
        if not self.session.overflow_recovery:
            return None
        ctx = ChatErrorContext(request_id=rid, stage="stream", messages_persisted=True)
        fn = inspect.getattr_static(type(self), "classify_chat_error")
        try:
            if inspect.isfunction(fn) and next(iter(inspect.signature(fn).parameters), "") != "self":
                result = fn(error, ctx)  # e.g. classify_chat_error = default_context_overflow_classifier
            else:
                result = self.classify_chat_error(error, ctx)
            return await maybe_await(result)
        except Exception:
            logger.exception("classify_chat_error raised (session %s)", self.session_id)
            return None

    async def _compact(self) -> bool:
        """Run the session's compaction; True when it changed the transcript."""
        if self.session.compaction is None:
            return False
        before = await self.store.messages()
        after = await maybe_await(self.session.compaction(copy.deepcopy(before)))
        if after is None:
            return False
        after = [normalize_incoming(m) for m in after]
        if after == before:
            return False
        await self.store.replace_all(after)
        return True

    async def _maybe_compact_proactively(self) -> None:
        limit = self.session.compact_after_tokens
        if limit is None or self.session.compaction is None:
            return
        size = sum(len(json.dumps(m, default=str)) for m in await self.store.messages()) // 4
        if size > limit:
            try:
                await self._compact()
            except Exception:
                logger.exception("compaction before the turn failed (session %s)", self.session_id)

    # ================================================================================= assembling the turn

    async def _system(self) -> str:
        if self.session.context_blocks:
            return await self.session.build_system(self.store.get_context)
        return await maybe_await(self.get_system_prompt())

    async def _refuse_tool_collisions(self) -> None:
        """Host tools are never replaced: an extension tool named like one of get_tools() fails start()."""
        owners = {t.name: (t.extension, t.tool) for t in self._manager.tools()}
        try:
            host_tools = await maybe_await(self.get_tools()) or {}
        except Exception:  # get_tools() may need a turn's state: then each turn checks (_prepare)
            logger.warning("get_tools() failed at start; tool names are checked each turn", exc_info=True)
            return
        clashes = host_collisions(host_tools.keys(), owners)
        if clashes:
            await self.close()
            raise ToolNameCollision(f"Agent {type(self).__name__}: {collision_message(*clashes[0])}",
                                    extension=owners[clashes[0][0]][0])

    def _extension_tools(self) -> dict[str, Tool]:
        if self._manager is None:
            return {}
        out: dict[str, Tool] = {}
        for ext_tool in self._manager.tools():
            out[ext_tool.name] = Tool(
                name=ext_tool.name,
                description=ext_tool.description,
                parameters=ext_tool.input_schema or {"type": "object", "properties": {}},
                execute=None,
                dynamic=True,
                streaming=bool(getattr(ext_tool, "streaming", False)),
            )
        return out

    async def _prepare(self, req: _TurnRequest) -> TurnPlan:
        tools: dict[str, Tool] = {}
        for name, value in (await maybe_await(self.get_tools()) or {}).items():
            tools[name] = as_tool(name, value)
        if self._manager is not None:  # an extension never replaces a host tool (host._tool_names)
            owners = {t.name: (t.extension, t.tool) for t in self._manager.tools()}
            for event in withhold_shadowing(tools, self._extension_tools(), owners, self._turn_rid):
                logger.error("session %s: %s: withheld from this turn", self.session_id, event.detail)
                self._on_trace(event)
        history = await self.store.messages()
        ctx = TurnContext(
            system=await self._system(),
            messages=to_model_messages(history),
            tools=dict(tools),
            model=await maybe_await(self.get_model()),
            continuation=req.continuation,
            body=req.body,
        )
        cfg: TurnConfig = _coerce(TurnConfig, await maybe_await(self.before_turn(ctx)), "before_turn") or TurnConfig()
        for name, value in (cfg.tools or {}).items():
            tools[name] = as_tool(name, value)
        if self._manager is not None:
            snapshot = TurnSnapshot(
                system=cfg.system if cfg.system is not None else ctx.system,
                tool_names=list(tools),
                message_count=len(cfg.messages if cfg.messages is not None else ctx.messages),
                continuation=req.continuation,
                body=req.body,
                model_id=cfg.model or ctx.model,
            )
            started = asyncio.get_running_loop().time()
            self._turn_deadline = _deadline(cfg.timeout, started)
            merged = await self._manager.before_turn(snapshot, self._cc(), deadline=self._turn_deadline)
            self._turn_provenance = dict(merged.provenance) if merged is not None else {}
            self._turn_denied = list(merged.denied) if merged is not None else []
            patch = merged.patch.set_fields() if merged is not None else {}
            # headers/providerOptions of extensions stay apart from the host's: _plan adds them, host winning
            ext_maps = {key: patch.pop(key) for key in MAP_FIELDS if key in patch}
            for key, value in patch.items():
                setattr(cfg, key, value)
            self._chunk_subscribed = bool(self._manager.subscribers("onChunk"))
            self._turn_deadline = _deadline(cfg.timeout, started)
            return self._plan(ctx, cfg, tools, ext_maps)
        return self._plan(ctx, cfg, tools)

    def _plan(self, ctx: TurnContext, cfg: TurnConfig, tools: dict[str, Tool],
              ext_maps: dict[str, Any] | None = None) -> TurnPlan:
        # the host's own litellm kwargs first; TurnConfig fields (host's before_turn, then granted extension
        # scalars) override them; endpoint and credentials of the Agent last; extensions' maps only add to it all
        settings: dict[str, Any] = dict(self.model_options or {})
        host_headers = {**(settings.get("extra_headers") or {}), **(cfg.headers or {})}
        direct = {
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "top_k": cfg.top_k,
            "presence_penalty": cfg.presence_penalty,
            "frequency_penalty": cfg.frequency_penalty,
            "seed": cfg.seed,
            "max_tokens": cfg.max_output_tokens,
            "stop": cfg.stop_sequences,
            "num_retries": cfg.max_retries,
            "extra_headers": host_headers or None,
        }
        settings.update({k: v for k, v in direct.items() if v is not None})
        chunk_ms: float | None = None
        if isinstance(cfg.timeout, dict):
            total = cfg.timeout.get("totalMs", cfg.timeout.get("total_ms"))
            chunk_ms = cfg.timeout.get("chunkMs", cfg.timeout.get("chunk_ms"))
            if total is not None:
                settings["timeout"] = float(total) / 1000.0
        elif cfg.timeout is not None:
            settings["timeout"] = float(cfg.timeout) / 1000.0
        model = cfg.model or ctx.model
        if cfg.provider_options:  # the host app's own before_turn: trusted, taken as given
            provider = model.split("/", 1)[0] if "/" in model else ""
            scoped = cfg.provider_options.get(provider)
            settings.update(scoped if isinstance(scoped, dict) else cfg.provider_options)
        if cfg.output is not None:
            if isinstance(cfg.output, dict):
                settings["response_format"] = {
                    "type": "json_schema", "json_schema": {"name": "output", "schema": cfg.output}
                }
            else:
                settings["response_format"] = cfg.output
        if self.api_base is not None:
            settings["api_base"] = self.api_base
        if self.api_key is not None:
            settings["api_key"] = self.api_key
        if ext_maps:
            settings = self._add_extension_options(settings, ext_maps, provider_of(model))
        stall_ms: float | None
        if cfg.chat_stream_stall_timeout_ms is not None:
            stall_ms = cfg.chat_stream_stall_timeout_ms
        elif chunk_ms is not None:
            stall_ms = chunk_ms
        elif self.session.chat_stream_stall_timeout_ms is not None:
            stall_ms = self.session.chat_stream_stall_timeout_ms
        else:
            stall_ms = self.chat_stream_stall_timeout_ms
        stop_when = cfg.stop_when if isinstance(cfg.stop_when, list) else [cfg.stop_when] if cfg.stop_when else []
        transforms = (
            cfg.experimental_transform
            if isinstance(cfg.experimental_transform, list)
            else [cfg.experimental_transform] if cfg.experimental_transform else []
        )
        return TurnPlan(
            model=cfg.model or ctx.model,
            system=cfg.system if cfg.system is not None else ctx.system,
            messages=cfg.messages if cfg.messages is not None else ctx.messages,
            tools=tools,
            active_tools=cfg.active_tools,
            tool_choice=cfg.tool_choice,
            max_steps=cfg.max_steps if cfg.max_steps is not None else self.max_steps,
            stop_when=stop_when,
            send_reasoning=cfg.send_reasoning if cfg.send_reasoning is not None else True,
            settings=settings,
            stall_timeout_s=(stall_ms / 1000.0) if stall_ms else None,
            transforms=transforms,
        )

    def _add_extension_options(self, settings: dict[str, Any], ext_maps: dict[str, Any],
                               provider: str) -> dict[str, Any]:
        """The extensions' screened headers/providerOptions added to the host's settings; a key the host set wins,
        and the extension's value is reported denied (log, trace, result) instead of credited in the provenance."""
        settings, refused = apply_extension_options(settings, ext_maps.get("headers"), ext_maps.get("provider_options"),
                                                    provider)
        for path, reason in refused:
            ext = self._turn_provenance.pop(path, "")
            denial = TurnConfigDenial(extension=ext, field=path, reason=reason)
            self._turn_denied.append(denial)
            logger.warning("extension %r beforeTurn: field %s: denied: %s", ext, path, reason)
            if self._turn_trace is not None:
                self._turn_trace.append(TraceEvent(hook="beforeTurn", extension=ext, outcome="denied",
                                                   detail=f"{path}: {reason}", request_id=self._turn_rid))
        return settings

    # ================================================================================= submissions, follow-ups

    def _resume_submission(self, sub: dict[str, Any]) -> None:
        sid: str = sub["submission_id"]
        running = self._submissions.get(sid)
        if running is not None and not running.done():
            return  # already on its way here (resumed at start, then submitted again)
        payload = sub.get("payload") or {}
        messages = list(payload.get("messages") or [])
        body = payload.get("body")

        async def run() -> ChatResponseResult:
            rid = new_id("req")
            if not await claim_submission(self.store.raw, sid):  # another host process runs (or ran) it
                return ChatResponseResult(status="skipped", request_id=rid,
                                          error=f"submission {sid!r} is claimed by another host process, or finished")
            answer = earlier_answer(await self.store.messages(), messages)
            if answer is not None:  # its host died after answering, before marking it done: not run twice
                await self.store.set_submission_status(sid, "completed")
                return ChatResponseResult(status="completed", message=answer, request_id=rid)
            await self.store.set_submission_status(sid, "running")
            result = await self._run(self._request(rid, messages, False, body, None, "submit_messages"))
            await self.store.set_submission_status(sid, result.status, result.error)
            return result

        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._submissions[sid] = task

    # ================================================================================= SessionServices (HostBridge)

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        messages = await self.store.messages()
        if limit:
            messages = messages[-limit:]
        return [for_bridge(m) for m in messages]

    async def bridge_get_context(self, label: str) -> str | None:
        block = self.session.context_blocks.get(label)
        stored = await self.store.get_context(label)
        if block is not None:
            return await block.read(stored)
        return stored

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        logger.info("extension %s set context block %r (session %s)", extension, label, self.session_id)
        await self.set_context(label, content)

    async def bridge_send_message(self, text: str, role: str) -> str:
        message = normalize_incoming({"role": role or "user", "content": text})
        task = asyncio.get_running_loop().create_task(
            self._run(self._request(new_id("req"), [message], False, None, None, "send_message")),
            context=contextvars.Context(),
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return str(message["id"])

    async def bridge_session_info(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "messageCount": len(await self.store.messages()),
            "modelId": await maybe_await(self.get_model()),
            "metadata": {"agent": type(self).__name__, "workspace": str(self._workspace or "")},
        }


class _SessionStore:
    """The store, bound to one session."""

    def __init__(self, raw: Any, session_id: str) -> None:
        self.raw = raw
        self.sid = session_id

    async def upsert(self, message: dict[str, Any]) -> None:
        await self.raw.upsert(self.sid, message)

    async def messages(self) -> list[dict[str, Any]]:
        return await self.raw.messages(self.sid)

    async def replace_all(self, messages: list[dict[str, Any]]) -> None:
        await self.raw.replace_all(self.sid, messages)

    async def record_submission(self, submission_id: str, payload: dict[str, Any]) -> None:
        await self.raw.record_submission(self.sid, submission_id, payload)

    async def set_submission_status(self, submission_id: str, status: str, error: str | None = None) -> None:
        await self.raw.set_submission_status(submission_id, status, error)

    async def pending_submissions(self) -> list[dict[str, Any]]:
        return await self.raw.pending_submissions(self.sid)

    async def get_context(self, label: str) -> str | None:
        return await self.raw.get_context(self.sid, label)

    async def set_context(self, label: str, content: str) -> None:
        await self.raw.set_context(self.sid, label, content)


class _Hooks:
    """The loop's view of the agent: subclass hook first, then the extensions (Think's order)."""

    def __init__(self, agent: Agent) -> None:
        self.a = agent
        self.m = agent._manager

    async def before_step(self, ctx: PrepareStepContext) -> StepConfig | None:
        return _coerce(StepConfig, await maybe_await(self.a.before_step(ctx)), "before_step")

    async def decide(self, ctx: ToolCallContext, tool: Tool) -> ToolCallDecision:
        decision = _coerce(ToolCallDecision, await maybe_await(self.a.before_tool_call(ctx)), "before_tool_call")
        decision = decision or ToolCallDecision()
        if decision.action != "allow" or self.m is None:
            return decision  # a subclass block/substitute short-circuits the extensions
        snapshot = ToolCallSnapshot(tool_name=ctx.tool_name, tool_call_id=ctx.tool_call_id, input=ctx.input,
                                    step_number=ctx.step_number, dynamic=ctx.dynamic)
        ext = await self.m.before_tool_call(snapshot, self.a._cc(), deadline=self.a._turn_deadline)
        if ext is None or ext.action == "allow" and not ext.has_input:
            return decision
        if ext.action == "block":
            return ToolCallDecision(action="block", reason=ext.reason)
        if ext.action == "substitute":
            return ToolCallDecision(action="substitute", output=ext.output)
        return ToolCallDecision(action="allow", input=ext.input, has_input=True)

    async def execute(self, tool: Tool, input: Any, ctx: ToolCallContext, on_preliminary: Any) -> Any:
        if tool.execute is not None or self.m is None:
            return await tool.run(input, on_preliminary)
        pending: list[asyncio.Future[Any]] = []

        def preliminary(value: Any) -> Any:
            fut = asyncio.ensure_future(on_preliminary(value))
            pending.append(fut)
            return fut

        try:
            return await self.m.execute_tool(tool.name, input, context=self.a._cc(), tool_call_id=ctx.tool_call_id,
                                             on_preliminary=preliminary)
        finally:
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def after_tool_call(self, ctx: ToolCallResultContext) -> None:
        await maybe_await(self.a.after_tool_call(ctx))
        if self.m is not None:
            self.m.after_tool_call(
                ToolResultSnapshot(
                    tool_name=ctx.tool_name, tool_call_id=ctx.tool_call_id, input=ctx.input,
                    step_number=ctx.step_number, duration_ms=ctx.duration_ms, success=ctx.success,
                    output=ctx.output if ctx.success else None,
                    error=None if ctx.success else _error_dict(ctx.error), dynamic=ctx.dynamic,
                ),
                self.a._cc(),
            )

    async def on_step_finish(self, ctx: StepContext) -> None:
        await maybe_await(self.a.on_step_finish(ctx))
        if self.m is not None:
            self.m.on_step_finish(
                StepSnapshot(
                    step_number=ctx.step_number, finish_reason=ctx.finish_reason, text=ctx.text,
                    reasoning_text=ctx.reasoning_text, tool_call_count=len(ctx.tool_calls),
                    tool_result_count=len(ctx.tool_results),
                    usage=ctx.usage,
                    provider_metadata=ctx.provider_metadata,
                ),
                self.a._cc(),
            )

    async def on_chunk(self, ctx: ChunkContext) -> None:
        await maybe_await(self.a.on_chunk(ctx))
        if self.m is not None and self.a._chunk_subscribed:
            c = ctx.chunk
            self.m.on_chunk(ChunkSnapshot(type=c.type, text=c.text, tool_name=c.tool_name, tool_call_id=c.tool_call_id),
                            self.a._cc())


__all__ = ["Agent", "default_context_overflow_classifier"]
