"""host.Agent: Think's chat-turn lifecycle on litellm, with out-of-process extensions wired into every hook.

Subclass it and override hooks (sync or async). One turn runs at a time per agent (FIFO); every entry path —
chat(), save_messages(), submit_messages(), continue_last_turn(), and add_tool_result() auto-continuation — runs
the same lifecycle:

    before_turn -> [extensions beforeTurn] -> steps: before_step, on_chunk*, before_tool_call ->
    [ext beforeToolCall] -> execute -> after_tool_call -> [ext afterToolCall], on_step_finish ->
    [ext onStepFinish] -> (persist, while the last observations go out) -> [wait until the extensions
    handled every observation of the turn] -> on_chat_response
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._heap import freeze_startup_heap
from .._errors import NestedTurnError, ToolNameCollision
from ..extensions._snapshots import TraceEvent
from ..extensions._tool_names import collision_message, host_collisions
from . import _journal_writer
from ._chat_errors import default_context_overflow_classifier
from ._hook_chain import TurnRecord
from ._session import Session, maybe_await
from ._session_bridge import AgentSessionServices
from ._store_backends import claim_submission
from ._submission_resume import earlier_answer, withdraw_interrupted
from ._turn_runner import TurnRequest, TurnRunner, active_turn
from ._types import (
    ChatErrorClassification,
    ChatErrorContext,
    ChatRecoveryContext,
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
    is_tool_part,
    new_id,
    normalize_incoming,
    pending_tool_parts,
)

if TYPE_CHECKING:
    from ..extensions._manager import ExtensionManager
    from ._store import SessionStore

logger = logging.getLogger("hookwire.agent")



class Agent:
    """A chat agent. Override the hooks you need; ``async with Agent(...) as a: await a.chat("hi")``."""

    model: str = "hookwire/scripted"
    max_steps: int = 10
    workspace_tools: bool = True  # Think's built-in read/write/edit/list/find/grep/delete when there is a workspace
    send_reasoning: bool = True  # keep reasoning in the saved message (Think's sendReasoning); TurnConfig overrides
    # Think's stream watchdog: off by default (0); a stalled stream goes into recovery (on_chat_recovery), which
    # runs the turn again up to chat_recovery_max_attempts times before the turn ends with an error.
    chat_stream_stall_timeout_ms: int = 0
    chat_recovery_max_attempts: int = 2
    # The host app's own model endpoint, credentials and extra litellm keyword arguments (e.g. extra_headers,
    # api_version, organization). They always win over anything an extension returns (issue 10 item 1).
    api_base: str | None = None
    api_key: str | None = None
    model_options: dict[str, Any] | None = None
    # Journal every awaited hook outcome in the store, hash-chained (host/turn/_journal_writer.py; README).
    journal: bool = True
    # litellm's own per-call cost calculation and success logging for this agent's model calls: off (None) unless
    # HOOKWIRE_LITELLM_BOOKKEEPING=1 or a litellm callback is registered; True turns it on (host/turn/_litellm_work.py)
    litellm_bookkeeping: bool | None = None

    def __init__(
        self,
        *,
        session_id: str = "default",
        store: Any = None,
        extensions: Sequence[Any] = (),
        manager: ExtensionManager | None = None,
        workspace: str | Path | None = None,
        sandbox: str = "auto",
        model: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        model_options: dict[str, Any] | None = None,
        litellm_bookkeeping: bool | None = None,
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
        if litellm_bookkeeping is not None:
            self.litellm_bookkeeping = litellm_bookkeeping
        self.store: SessionStore = None  # type: ignore[assignment]  # set by start()
        self._owns_store = False
        self.session: Session = Session()
        self._lock = asyncio.Lock()
        self._aborts: dict[str, asyncio.Event] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._submissions: dict[str, asyncio.Task[ChatResponseResult]] = {}
        self._turn: TurnRecord | None = None  # the running turn's record (one turn at a time)
        self._services = AgentSessionServices(self)  # what the HostBridge serves for this session
        self._runner = TurnRunner(self)  # runs each turn: prepare, loop, persist, recover, respond
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

    def on_chat_recovery(self, ctx: ChatRecoveryContext) -> bool | None:
        """A stalled stream is about to be run again (ctx.attempt of ctx.max_attempts); return False to stop."""
        return None

    def on_chat_error(self, error: Any, ctx: ChatErrorContext | None = None) -> Any:
        return error

    def classify_chat_error(self, error: Any, ctx: ChatErrorContext | None = None) -> ChatErrorClassification | None:
        return None

    # ================================================================================= lifecycle

    @property
    def manager(self) -> ExtensionManager | None:
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
        from .._logging import apply_env_format

        apply_env_format()  # HOOKWIRE_LOG_FORMAT=json for an app that configured no logging (host/_logging.py)
        cold = "litellm" not in sys.modules
        waited = _other_tasks() if cold else 0
        t0 = time.perf_counter()
        from ._scripted_model import register_scripted_model  # imports litellm, unless the app or preload() did

        register_scripted_model()
        if cold:  # a warning when something on the loop had to wait for it (host/turn/_preload.py)
            logger.log(logging.WARNING if waited else logging.INFO,
                       "importing litellm held the event loop for %.1f s at this process's first Agent start (%d other "
                       "task%s waited); call host.preload() at start-up, before the loop serves, to do it (and set up "
                       "the first model call) beforehand", time.perf_counter() - t0, waited, "" if waited == 1 else "s")
        from ._store import SessionStore
        from ._store_backends import is_store, open_store

        if is_store(self._store_spec):
            raw, self._owns_store = self._store_spec, False
        else:
            # a SQLite path, or a postgresql:// URL (host/turn/_store_backends.py). Off the loop: SQLite's open waits
            # for the write lock, which other sessions' writes hold (issue 19: it stalled every session)
            raw = await asyncio.to_thread(open_store, self._store_spec)
            self._owns_store = True
        self.store = SessionStore(raw, self.session_id)
        if hasattr(raw, "open"):
            await raw.open()  # a store that connects (PostgreSQL): a bad URL fails the start, not the first turn
        if self._workspace is not None:
            self._workspace.mkdir(parents=True, exist_ok=True)
        if self._manager is None and self._extension_specs:
            from ..extensions._manager import ExtensionManager

            # the agent's store remembers extensions loaded at runtime (agent.manager.load); restored at start
            self._manager = ExtensionManager(sandbox=self._sandbox, store=raw,  # type: ignore[arg-type]
                                             store_key=self.session_id)
            self._owns_manager = True
            await self._manager.__aenter__()
            self._manager.protect_paths(self._private_paths())
            await self._manager.load_all(self._extension_specs, remember=False)
            await self._manager.restore()
        if self._manager is not None:
            if not self._owns_manager and hasattr(self._manager, "protect_paths"):
                self._manager.protect_paths(self._private_paths())  # for what it starts from now on
            self._manager.register_session(self.session_id, self._services)
            self._manager.add_trace_listener(self._on_trace, session_id=self.session_id)  # its own events only
            _journal_writer.attach(self)  # the decision journal (host/turn/_journal_writer.py)
        configured = await maybe_await(self.configure_session(self.session))
        if isinstance(configured, Session):
            self.session = configured
        if self._manager is not None:
            await self._refuse_tool_collisions()
        self._started = True
        freeze_startup_heap()  # once per process: the start-up heap leaves the cyclic GC (host/_heap.py)
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
                self._manager.remove_trace_listener(self._on_trace, session_id=self.session_id)
            with contextlib.suppress(Exception):
                await _journal_writer.detach(self)
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
        messages: Sequence[str | dict[str, Any]] | str | dict[str, Any] | Callable[[list[dict[str, Any]]], Any],
        *,
        body: dict[str, Any] | None = None,
        signal: asyncio.Event | None = None,
        request_id: str | None = None,
    ) -> ChatResponseResult:
        """Persist messages (server-initiated) and run a turn on them. Think's function form: pass a function
        (sync or async) that gets the current transcript when the turn starts and returns the next one."""
        if callable(messages):
            self._ensure_started()
            self._refuse_nested("save_messages")
            request = self._request(request_id or new_id("req"), [], False, body, signal, "save_messages")
            request.messages_fn = messages
            return await self._runner.run(request)
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
        """Run a continuation turn after the last assistant message (continuation=True); it is saved as a new
        assistant message. Status "skipped" with request id "" when the last message is not the assistant's."""
        self._ensure_started()
        self._refuse_nested("continue_last_turn")
        messages = await self.store.messages()
        if not messages or messages[-1].get("role") != "assistant":
            return ChatResponseResult(status="skipped", request_id="", continuation=True)
        rid = request_id or new_id("req")
        return await self._runner.run(self._request(rid, [], True, body, signal, "continue_last_turn"))

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
                        return await self._runner.run(self._request(new_id("req"), [], True, None, None, "auto_continue"))
                    return None
        raise KeyError(f"no tool call {tool_call_id!r} in session {self.session_id!r}")

    def cancel_chat(self, request_id: str) -> bool:
        """Abort a running or queued turn: the partial assistant message is kept, status "aborted"."""
        event = self._aborts.get(request_id)
        if event is None:
            return False
        event.set()
        return True

    def abort_all_requests(self) -> int:
        """Abort every running or queued turn of this agent (Think's abortAllRequests); returns how many."""
        events = [e for e in self._aborts.values() if not e.is_set()]
        for event in events:
            event.set()
        return len(events)

    async def wait_idle(self) -> None:
        """Wait for messages extensions sent (bridge sendMessage) to be appended, and for background submissions."""
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
        """A context block's content: through its provider when the session declares one, else as stored."""
        block = self.session.context_blocks.get(label)
        stored = await self.store.get_context(label)
        if block is not None:
            return await block.read(stored)
        return stored

    # ================================================================================= turn plumbing

    def _refuse_nested(self, entry: str) -> None:
        if active_turn.get() is self:
            raise NestedTurnError(
                f"{type(self).__name__}.{entry}() was called from inside a running turn of session "
                f"{self.session_id!r} (a hook or a tool); that would deadlock. Start follow-up turns from "
                "on_chat_response."
            )

    def _request(
        self,
        rid: str,
        messages: list[dict[str, Any]],
        continuation: bool,
        body: dict[str, Any] | None,
        signal: asyncio.Event | None,
        entry: str,
    ) -> TurnRequest:
        abort = signal if signal is not None else asyncio.Event()
        self._aborts[rid] = abort
        return TurnRequest(
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
            result = await self._runner.fail(exc, "parse", rid=rid, persisted=False, assistant=None,
                                             continuation=False)
            await self._runner.respond(result)
            return result
        return await self._runner.run(self._request(rid, messages, False, body, signal, entry))

    def _on_trace(self, event: TraceEvent) -> None:
        turn = self._turn
        if turn is not None and event.request_id == turn.request_id:  # events of no turn are not this turn's
            turn.trace.append(event)


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
            _journal_writer.expect_submission(self, rid, sid)  # reuse the verdicts its earlier attempts journaled
            req = self._request(rid, messages, False, body, None, "submit_messages")
            try:
                result = await self._runner.run(req)
            except asyncio.CancelledError:
                if req.cancelled:  # interrupted mid-turn (close): its partial message is no answer
                    await withdraw_interrupted(self.store, messages)
                raise
            await self.store.set_submission_status(sid, result.status, result.error)
            return result

        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._submissions[sid] = task

    def _append_for_next_turn(self, message: dict[str, Any]) -> None:
        """An extension's sendMessage: append `message` to the transcript once the running turn (if any) is done,
        without starting a turn; the next turn sees it (Think's sendMessage, which never waits on a turn)."""

        async def append() -> None:
            async with self._lock:
                await self.store.upsert(message)

        task = asyncio.get_running_loop().create_task(append(), context=contextvars.Context())
        self._background.add(task)
        task.add_done_callback(self._background.discard)


#: Agent's own turn hooks as defined above: each does nothing and reads nothing. While an agent's hook is still one of
#: these (the subclass did not override it, nothing was set on the instance or patched on the class), the turn does
#: not call it at all: no context copied for it, no call, no await, no coercion of its None (issue 16 item 2).
_NOOP_HOOKS: dict[str, Any] = {name: Agent.__dict__[name] for name in (
    "before_turn", "before_step", "before_tool_call", "after_tool_call", "on_step_finish", "on_chunk",
    "on_chat_response",
)}


def is_noop_hook(agent: Agent, name: str) -> bool:
    """Whether `agent`'s turn hook `name` is still Agent's own no-op."""
    return getattr(getattr(agent, name), "__func__", None) is _NOOP_HOOKS[name]


def noop_hooks(agent: Agent) -> frozenset[str]:
    """The names of `agent`'s turn hooks that are Agent's own no-ops (checked once per turn, not per event)."""
    return frozenset(name for name in _NOOP_HOOKS if is_noop_hook(agent, name))


def _other_tasks() -> int:
    """How many other unfinished tasks the running loop has (what a blocking step on it makes wait)."""
    me = asyncio.current_task()
    return sum(1 for task in asyncio.all_tasks() if task is not me and not task.done())


__all__ = ["Agent", "default_context_overflow_classifier"]
