"""The streaming step loop of one turn: litellm.acompletion(stream=True), deltas assembled into text, reasoning
and tool calls, tools executed with the before/after decisions, steps bounded by max_steps and stop_when.

The loop knows nothing of subclasses or extensions: it calls the ``LoopHooks`` the agent hands it, and builds the
assistant message (UI shape) in place, so whatever streamed before an error or an abort is still there.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .. import _telemetry as telemetry  # noqa: E402
from .._errors import ChatStreamStallError  # noqa: E402
from ._chat_errors import TurnAborted  # noqa: E402
from ._hook_messages import copied, sharing  # noqa: E402
from ._litellm_work import quiet_context, quiet_flag  # noqa: E402
from ._session import maybe_await  # noqa: E402
from ._stall_watch import StallWatch  # noqa: E402
from ._stream_fields import stream_field  # noqa: E402
from ._tools import Tool, ToolInputError  # noqa: E402
from ._types import (  # noqa: E402
    Chunk,
    ChunkContext,
    PrepareStepContext,
    StepConfig,
    StepContext,
    ToolCallContext,
    ToolCallDecision,
    ToolCallRecord,
    ToolCallRepairContext,
    ToolCallResultContext,
    ToolResultRecord,
    Usage,
)
from ._ui_messages import tool_part  # noqa: E402

logger = logging.getLogger("hookwire.agent")

# A model stream whose chunks are all ready (a fast local model, a burst buffered by the network, a replay) never
# suspends: litellm's stream wrapper hands them over without waiting. Without a yield the turn would then hold the
# event loop until its stream ends — other sessions, the extensions' senders and an abort from another task all
# waiting (a 20,000-chunk answer: ~3 s). The chunk loop yields once whenever this long passed since it last did.
YIELD_EVERY_S = 0.002

_NO_STEP_CONFIG = StepConfig()  # before_step's answer when it changes nothing (read only, never changed)
_FINISH = {"tool_calls": "tool-calls", "function_call": "tool-calls", "content_filter": "content-filter"}


class LoopHooks(Protocol):
    async def before_step(self, ctx: PrepareStepContext) -> StepConfig | None: ...
    async def decide(self, ctx: ToolCallContext, tool: Tool) -> ToolCallDecision: ...
    async def execute(self, tool: Tool, input: Any, ctx: ToolCallContext, on_preliminary: Callable[[Any], Any]) -> Any: ...
    async def after_tool_call(self, ctx: ToolCallResultContext) -> None: ...
    async def on_step_finish(self, ctx: StepContext) -> None: ...
    async def on_chunk(self, ctx: ChunkContext) -> None: ...
    # optional: def chunks_observed(self) -> bool — False: nobody sees the chunks (no on_chunk calls are made)
    # optional: def chunk_sink(self) -> Callable | None — when only it sees the chunks: it takes each delta's fields
    # (type, text, tool_name, tool_call_id), and no Chunk is made for a delta when no transform needs one either
    # optional: def wants(self, hook: str) -> bool — False: the hook would ignore its context ("before_step",
    # "after_tool_call"): the loop neither builds it nor calls the hook


@dataclass
class TurnPlan:
    """Everything the loop needs, after before_turn and the extensions' patch."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: dict[str, Tool]
    active_tools: list[str] | None = None
    tool_choice: Any = None
    max_steps: int = 10
    stop_when: list[Callable[..., Any]] = field(default_factory=list)
    send_reasoning: bool = True
    settings: dict[str, Any] = field(default_factory=dict)  # litellm keyword arguments
    stall_timeout_s: float | None = None
    transforms: list[Callable[..., Any]] = field(default_factory=list)
    repair_tool_call: Callable[..., Any] | None = None
    # the proactive mid-turn guard: before a step, when the previous step's input tokens reached this, call
    # compact_history() -> the compacted model messages of the history (None: nothing changed)
    compact_at_input_tokens: int | None = None
    compact_history: Callable[[], Any] | None = None
    # litellm's own per-call cost and success logging (host/turn/_litellm_work.py): None = HOOKWIRE_LITELLM_BOOKKEEPING
    litellm_bookkeeping: bool | None = None


def litellm_tool_choice(choice: Any) -> Any:
    """Think's ToolChoice ("auto" | "none" | "required" | {type: "tool", toolName}) -> OpenAI's."""
    if isinstance(choice, dict):
        name = choice.get("toolName") or choice.get("tool_name")
        if choice.get("type") == "tool" and name:
            return {"type": "function", "function": {"name": name}}
    return choice


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()

    def get(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)

    details = get(raw, "completion_tokens_details")
    prompt_details = get(raw, "prompt_tokens_details")
    return Usage(
        input_tokens=get(raw, "prompt_tokens"),
        output_tokens=get(raw, "completion_tokens"),
        total_tokens=get(raw, "total_tokens"),
        reasoning_tokens=get(details, "reasoning_tokens") if details is not None else None,
        cached_input_tokens=get(prompt_details, "cached_tokens") if prompt_details is not None else None,
    )


@dataclass
class _PendingCall:
    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""  # joined from `pieces` when the stream ends (not concatenated per chunk: quadratic)
    pieces: list[str] = field(default_factory=list)


class TurnLoop:
    def __init__(
        self,
        plan: TurnPlan,
        hooks: LoopHooks,
        assistant: dict[str, Any],
        abort: asyncio.Event,
    ) -> None:
        self.plan = plan
        self.hooks = hooks
        self.assistant = assistant
        self.abort = abort
        self.steps: list[StepContext] = []
        self.messages: list[dict[str, Any]] = list(plan.messages)
        self._history_len = len(plan.messages)  # self.messages[:_history_len] is the history; the rest, this turn's
        self._abort_task: asyncio.Task[Any] | None = None
        self._watch: StallWatch | None = None  # the abort and stall watchdog of the loop's waits (run())
        self._chat: telemetry.ChatSpan | None = None  # the model call in flight (its span)
        # the text or reasoning part the stream is writing into, and its pieces so far: joined into its "text" once,
        # when the stream ends or fails (_flush_text), not concatenated per chunk (quadratic in the answer's length)
        self._open_part: dict[str, Any] | None = None
        self._open_pieces: list[str] = []
        # no transform and no on_chunk listener: the stream's deltas go straight into the message, no Chunk is made
        observed = getattr(hooks, "chunks_observed", None)
        self._unobserved = not plan.transforms and observed is not None and not observed()
        # only the extensions see the chunks and no transform changes them: each delta's fields go to them as they
        # are (the per-chunk path), no Chunk or ChunkContext model made
        sink = getattr(hooks, "chunk_sink", None)
        self._chunk_fields: Callable[[str, str | None, str | None, str | None], None] | None = (
            sink() if sink is not None and not plan.transforms else None)
        wants = getattr(hooks, "wants", None)
        self._wants_before_step = wants is None or bool(wants("before_step"))
        self._wants_after_tool_call = wants is None or bool(wants("after_tool_call"))

    # ----------------------------------------------------------------------------------------- plumbing

    def _ended(self, reason: str, what: str) -> BaseException:
        """The error that ends a wait the watch cut short: the turn's abort, or the stall watchdog's."""
        if reason == "abort" or self.abort.is_set():
            return TurnAborted()
        return ChatStreamStallError(
            f"model stream stalled: no chunk for {int((self.plan.stall_timeout_s or 0) * 1000)} ms ({what}); "
            "raise chat_stream_stall_timeout_ms or set it to 0 to disable the watchdog"
        )

    async def _race(self, aw: Any, stall: bool, what: str, context: contextvars.Context | None = None) -> Any:
        """Await ``aw`` unless the turn is aborted first or (``stall``) the stall watchdog fires. ``context``: the
        contextvars a coroutine ``aw`` runs in (a model call with litellm's bookkeeping off). A coroutine runs in a
        task of its own (its contextvars stay its own), awaited in this task under the loop's StallWatch
        (host/turn/_stall_watch.py), which cancels this wait on the abort or a stall (no asyncio.wait, no
        asyncio.timeout: no waiter, set or done callbacks, no timer per wait)."""
        task = (asyncio.ensure_future(aw) if context is None
                else asyncio.get_running_loop().create_task(aw, context=context.copy()))
        watch = self._watch
        assert watch is not None
        if not watch.arm(stall):  # aborted already: don't start waiting
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise TurnAborted()
        me = asyncio.current_task()
        cancels = me.cancelling() if me is not None else 0
        try:
            result = await task  # a cancellation of this task (the caller's, the watch's) cancels `task` too
        except asyncio.CancelledError:
            reason = watch.claim()
            if reason is None:
                raise
        else:
            reason = None
        finally:
            late = watch.disarm()  # the watch fired but `task` swallowed the cancellation and returned
        if reason is None:
            if me is not None and me.cancelling() > cancels:  # the caller cancelled, and `task` ignored it
                raise asyncio.CancelledError()
            if late is None:
                return result
            reason = late
        if not task.done():  # `task` was cancelled with this task's wait; let it finish unwinding
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        raise self._ended(reason, what)

    async def _chunks(self, stream: Any, context: contextvars.Context | None = None) -> AsyncIterator[Any]:
        """The stream's chunks, each awaited in this task (no task per chunk, unlike `_race`) under the loop's
        StallWatch: the stall watchdog, and the turn's abort ending the wait at once. With a quiet `context`
        (litellm's bookkeeping off), its flag is set only while litellm produces the chunk, never while the caller
        handles it."""
        it = stream.__aiter__()
        quiet = context is not None and context.get(quiet_flag, False)
        watch = self._watch
        assert watch is not None
        what = "waiting for the next chunk"
        loop = asyncio.get_running_loop()
        due = loop.time() + YIELD_EVERY_S
        while True:
            if not watch.arm(True):
                raise TurnAborted()
            token = quiet_flag.set(True) if quiet else None
            try:
                chunk = await it.__anext__()
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                reason = watch.claim()
                if reason is None:
                    raise
                raise self._ended(reason, what) from None
            finally:
                late = watch.disarm()
                if token is not None:
                    quiet_flag.reset(token)
            if late is not None:  # the stream swallowed the watch's cancellation and produced a chunk
                raise self._ended(late, what)
            if loop.time() >= due:  # a stream whose chunks are all ready never suspends: let the loop run
                await asyncio.sleep(0)
                due = loop.time() + YIELD_EVERY_S
            yield chunk

    async def _emit(self, chunk: Chunk) -> Chunk | None:
        if self._unobserved:
            return chunk
        for transform in self.plan.transforms:
            result = await maybe_await(transform(chunk))
            if result is None:
                return None
            chunk = result if isinstance(result, Chunk) else Chunk.model_validate(result)
        await self.hooks.on_chunk(ChunkContext(chunk=chunk))
        return chunk

    def _append_text(self, kind: str, text: str) -> None:
        """Add a streamed piece to the assistant message's parts: to the open part of the same kind, else to a new
        part. The open part's "text" is joined from its pieces once, by `_flush_text` when its step's stream ends
        (or fails): concatenating per chunk copied the whole text each time (a 32,000-chunk answer: ~0.2 s of the
        event loop). Nor is the message's derived ``content`` refreshed here: every path that persists or returns
        the message calls ``finalize`` first."""
        part = self._open_part
        if part is not None and part["type"] == kind:
            self._open_pieces.append(text)
            return
        self._flush_text()
        parts = self.assistant["parts"]
        if parts and parts[-1].get("type") == kind:
            part = parts[-1]
            self._open_pieces = [part.get("text", ""), text]
        else:
            part = {"type": kind, "text": text}
            parts.append(part)
            self._open_pieces = [text]
        self._open_part = part

    def _flush_text(self) -> None:
        """Join the open part's pieces into its "text" (see `_append_text`)."""
        part = self._open_part
        if part is not None:
            part["text"] = "".join(self._open_pieces)
            self._open_part = None
            self._open_pieces = []

    # ----------------------------------------------------------------------------------------- the loop

    async def run(self) -> list[StepContext]:
        self._abort_task = asyncio.ensure_future(self.abort.wait())
        self._watch = watch = StallWatch(self.abort, self.plan.stall_timeout_s)
        self._abort_task.add_done_callback(watch.on_abort)
        try:
            for step_number in range(max(1, self.plan.max_steps)):
                if self.abort.is_set():
                    raise TurnAborted()
                await self._guard_input_size()
                try:
                    more = await self._step(step_number)
                except BaseException as exc:  # the model call failed, stalled or was aborted: end its span
                    self._flush_text()  # what streamed before it is in the message (the runner keeps it)
                    if self._chat is not None:
                        self._chat, chat = None, self._chat
                        chat.end(response_model=chat.model, response_id="", finish_reason=None, input_tokens=None,
                                 output_tokens=None, error=exc)
                    raise
                if not more or step_number + 1 >= self.plan.max_steps:
                    break
                if await self._stop_requested():
                    break
            return self.steps
        finally:
            watch.close()
            self._abort_task.cancel()
            with contextlib.suppress(BaseException):
                await self._abort_task

    async def _guard_input_size(self) -> None:
        """Think's proactive guard: compact the history mid-turn when the last step's input was near the limit;
        what this turn produced so far (assistant and tool messages) is kept after the compacted history."""
        limit, compact = self.plan.compact_at_input_tokens, self.plan.compact_history
        if not self.steps or limit is None or compact is None:
            return
        used = self.steps[-1].usage.input_tokens or 0
        if used < limit:
            return
        history = await maybe_await(compact())
        if history is None:
            return
        produced = self.messages[self._history_len:]
        self.messages = list(history) + produced
        self._history_len = len(history)

    async def _stop_requested(self) -> bool:
        for condition in self.plan.stop_when:
            if await maybe_await(condition(self.steps)):
                return True
        return False

    def _request(self, step_cfg: StepConfig) -> dict[str, Any]:
        plan = self.plan
        system: Any = step_cfg.system if step_cfg.system is not None else plan.system
        msgs = step_cfg.messages if step_cfg.messages is not None else self.messages
        sys_msgs: list[dict[str, Any]]
        if isinstance(system, str):
            sys_msgs = [{"role": "system", "content": system}] if system else []
        elif isinstance(system, dict):
            sys_msgs = [system]
        else:
            sys_msgs = list(system or [])
        active = step_cfg.active_tools if step_cfg.active_tools is not None else plan.active_tools
        names = [n for n in plan.tools if active is None or n in active]
        kwargs: dict[str, Any] = dict(plan.settings)
        if step_cfg.provider_options:
            kwargs.update(step_cfg.provider_options)
        kwargs.update(
            model=step_cfg.model or plan.model,
            messages=sys_msgs + list(msgs),
            stream=True,
            stream_options={"include_usage": True},
        )
        if names:
            kwargs["tools"] = [plan.tools[n].openai_schema() for n in names]
            choice = step_cfg.tool_choice if step_cfg.tool_choice is not None else plan.tool_choice
            if choice is not None:
                kwargs["tool_choice"] = litellm_tool_choice(choice)
        return kwargs

    async def _step(self, step_number: int) -> bool:
        plan = self.plan
        step_cfg: StepConfig | None = None
        if self._wants_before_step:
            prep = sharing(PrepareStepContext(steps=list(self.steps), step_number=step_number, model=plan.model),
                           self.messages)
            step_cfg = await self.hooks.before_step(prep)
        if step_cfg is None:
            step_cfg = _NO_STEP_CONFIG
        request = self._request(step_cfg)
        active = step_cfg.active_tools if step_cfg.active_tools is not None else plan.active_tools
        self.assistant["parts"].append({"type": "step-start"})

        import litellm  # imported on first use: it takes ~2 s, and `import host` must stay cheap

        self._chat = chat = telemetry.ChatSpan(request["model"])  # ended below, or by run() if this step raises
        quiet = quiet_context(plan.litellm_bookkeeping, request)  # None: litellm prices and logs the call as usual
        stream = await self._race(litellm.acompletion(**request), True, "waiting for the response", quiet)
        text, reasoning = "", ""
        calls: dict[int, _PendingCall] = {}
        finish_raw: str | None = None
        usage = Usage()
        response_id = ""
        unobserved = self._unobserved
        fields = self._chunk_fields
        async for raw in self._chunks(stream, quiet):
            response_id = getattr(raw, "id", "") or response_id
            raw_usage = stream_field(raw, "usage")  # deleted from most chunks (host/turn/_stream_fields.py)
            if raw_usage is not None:
                usage = _usage(raw_usage)
            for choice in getattr(raw, "choices", None) or []:
                delta = stream_field(choice, "delta")  # litellm keeps it outside __dict__: no pydantic __getattr__
                piece = stream_field(delta, "reasoning_content")
                if piece:
                    if fields is not None:
                        fields("reasoning-delta", piece, None, None)
                    elif not unobserved:
                        out = await self._emit(Chunk(type="reasoning-delta", text=piece))
                        piece = out.text if out is not None else None
                    if piece:
                        reasoning += piece
                        if plan.send_reasoning:
                            self._append_text("reasoning", piece)
                piece = stream_field(delta, "content")
                if piece:
                    if fields is not None:
                        fields("text-delta", piece, None, None)
                    elif not unobserved:
                        out = await self._emit(Chunk(type="text-delta", text=piece))
                        piece = out.text if out is not None else None
                    if piece:
                        text += piece
                        self._append_text("text", piece)
                for tc in stream_field(delta, "tool_calls") or []:
                    index = tc.index if tc.index is not None else len(calls)
                    pending = calls.get(index)
                    if pending is None:
                        pending = calls[index] = _PendingCall(index=index)
                    if tc.id:
                        pending.id = tc.id
                    fn = tc.function
                    if fn is not None and fn.name and not pending.name:
                        pending.name = fn.name
                        if fields is not None:
                            fields("tool-input-start", None, pending.name, pending.id)
                        elif not unobserved:
                            await self._emit(Chunk(type="tool-input-start", tool_name=pending.name,
                                                   tool_call_id=pending.id, id=pending.id))
                    if fn is not None and fn.arguments:
                        pending.pieces.append(fn.arguments)
                        if fields is not None:
                            fields("tool-input-delta", fn.arguments, None, pending.id)
                        elif not unobserved:
                            await self._emit(Chunk(type="tool-input-delta", text=fn.arguments,
                                                   tool_call_id=pending.id, id=pending.id))
                finish = stream_field(choice, "finish_reason")
                if finish:
                    finish_raw = finish
        self._flush_text()
        for pending in calls.values():
            pending.arguments = "".join(pending.pieces)
        self._chat = None
        chat.end(response_model=request["model"], response_id=response_id, finish_reason=finish_raw,
                 input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)

        # ------------------------------------------------------------------ tool calls of this step
        ordered = [calls[i] for i in sorted(calls)]
        records: list[ToolCallRecord] = []
        results: list[ToolResultRecord | None] = []
        parts: list[dict[str, Any]] = []
        runnable: list[tuple[int, _PendingCall, Any, Tool]] = []
        for call in ordered:
            call.id = call.id or f"call_{step_number}_{call.index}"
            tool, value, error = self._resolve(call, active)
            if error is not None and plan.repair_tool_call is not None:
                tool, value, error = await self._repair(call, active, error)
            dynamic = bool(tool and tool.dynamic)
            records.append(ToolCallRecord(tool_call_id=call.id, tool_name=call.name, input=value, dynamic=dynamic or None))
            part = tool_part(tool_name=call.name, tool_call_id=call.id, input=value, dynamic=dynamic)
            self.assistant["parts"].append(part)
            parts.append(part)
            results.append(None)
            if not self._unobserved:
                await self._emit(Chunk(type="tool-call", tool_name=call.name, tool_call_id=call.id, input=value,
                                       dynamic=dynamic or None))
            if error is not None:
                part.update(state="output-error", errorText=error)
                results[-1] = ToolResultRecord(
                    tool_call_id=call.id, tool_name=call.name, input=value, error=error, success=False
                )
            elif tool is not None and (tool.execute is not None or tool.dynamic):
                runnable.append((len(results) - 1, call, value, tool))
            # else: a client-side tool; stays input-available until add_tool_result

        if runnable:
            outcomes = await self._race(
                asyncio.gather(*(self._run_tool(c, v, t, step_number, parts[i]) for i, c, v, t in runnable)),
                False,
                "tools",
            )
            for (i, _c, _v, _t), outcome in zip(runnable, outcomes):
                results[i] = outcome

        finished_results = [r for r in results if r is not None]
        step = StepContext(
            step_number=step_number,
            text=text,
            reasoning=[{"type": "reasoning", "text": reasoning}] if reasoning else [],
            reasoning_text=reasoning or None,
            tool_calls=records,
            tool_results=finished_results,
            finish_reason=_FINISH.get(finish_raw or "", finish_raw or "unknown"),
            raw_finish_reason=finish_raw,
            usage=usage,
            request={"model": request["model"], "messageCount": len(request["messages"])},
            response={"id": response_id, "model": request["model"]},
        )
        self.steps.append(step)
        self._extend_model_messages(text, parts)
        await self.hooks.on_step_finish(step)
        pending_client = any(p.get("state") == "input-available" for p in parts)
        return bool(ordered) and not pending_client

    def _resolve(self, call: _PendingCall, active: list[str] | None) -> tuple[Tool | None, Any, str | None]:
        """The call's tool and parsed input, and why it can't run (unknown tool, bad JSON, invalid input)."""
        tool = self.plan.tools.get(call.name)
        try:
            value: Any = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError:
            value = call.arguments
        error: str | None = None
        if tool is None or (active is not None and call.name not in active):
            error = f'Model tried to call unavailable tool "{call.name}".'
        elif isinstance(value, str):
            error = f'Invalid JSON input for tool "{call.name}": {value!r}'
        else:
            try:
                tool.validate_input(value)
            except ToolInputError as exc:
                error = str(exc)
        return tool, value, error

    async def _repair(self, call: _PendingCall, active: list[str] | None,
                      error: str) -> tuple[Tool | None, Any, str | None]:
        """TurnConfig.repair_tool_call gets one try at a failing call; its fix is checked like the model's call."""
        names = [n for n in self.plan.tools if active is None or n in active]
        ctx = copied(ToolCallRepairContext(
            tool_call_id=call.id, tool_name=call.name, input=call.arguments, error=error,
            tools={n: self.plan.tools[n].parameters for n in names},
            system=self.plan.system if isinstance(self.plan.system, str) else "",
        ), self.messages)
        try:
            fixed = await maybe_await(self.plan.repair_tool_call(ctx))  # type: ignore[misc]
        except Exception:
            logger.exception("repair_tool_call raised for tool call %s (%s); the call fails", call.id, call.name)
            fixed = None
        if isinstance(fixed, BaseModel):
            fixed = fixed.model_dump(by_alias=True)
        if fixed is not None and not isinstance(fixed, dict):
            logger.error("repair_tool_call must return a dict {toolName?, input} or None, got %s",
                         type(fixed).__name__)
            fixed = None
        if fixed is None:
            tool, value, _ = self._resolve(call, active)
            return tool, value, error
        call.name = str(fixed.get("toolName") or fixed.get("tool_name") or call.name)
        raw = fixed.get("input", call.arguments)
        call.arguments = raw if isinstance(raw, str) else json.dumps(raw)
        return self._resolve(call, active)

    def _extend_model_messages(self, text: str, parts: list[dict[str, Any]]) -> None:
        done = [p for p in parts if p.get("state") in ("output-available", "output-error")]
        if not text and not done:
            return
        msg: dict[str, Any] = {"role": "assistant", "content": text or None}
        if done:
            msg["tool_calls"] = [
                {
                    "id": p["toolCallId"],
                    "type": "function",
                    "function": {"name": p["toolName"], "arguments": json.dumps(p.get("input"), default=str)},
                }
                for p in done
            ]
        self.messages.append(msg)
        for p in done:
            if p["state"] == "output-error":
                content = str(p.get("errorText"))
            else:
                out = p.get("output")
                content = out if isinstance(out, str) else json.dumps(out, default=str)
            self.messages.append({"role": "tool", "tool_call_id": p["toolCallId"], "name": p["toolName"], "content": content})

    async def _run_tool(
        self, call: _PendingCall, value: Any, tool: Tool, step_number: int, part: dict[str, Any]
    ) -> ToolResultRecord:
        ctx = sharing(ToolCallContext(
            tool_call_id=call.id,
            tool_name=call.name,
            input=value,
            dynamic=tool.dynamic or None,
            step_number=step_number,
            abort_signal=self.abort,
        ), self.messages)

        async def preliminary(output: Any) -> None:
            await self._emit(
                Chunk(type="tool-result", tool_name=call.name, tool_call_id=call.id, input=value, output=output,
                      preliminary=True, dynamic=tool.dynamic or None)
            )

        success, output, error = True, None, None
        started = time.perf_counter()
        span = telemetry.ToolSpan(call.name, call.id, bool(tool.dynamic))  # current while decided and run
        try:
            decision = await self.hooks.decide(ctx, tool)
            started = time.perf_counter()
            if decision.action == "block":
                output = decision.reason or f'Tool "{call.name}" was blocked by beforeToolCall.'
            elif decision.action == "substitute":
                output = decision.output
            else:
                run_input = decision.input if decision.has_input else value
                output = await self.hooks.execute(tool, run_input, ctx, preliminary)
            if decision.action != "allow" and tool.streaming:
                await preliminary(output)  # Think: a blocked/substituted streaming tool surfaces one preliminary
        except (TurnAborted, asyncio.CancelledError) as exc:
            span.end(exc)
            raise
        except Exception as exc:  # an execute failure, or a raising before_tool_call: a tool error
            success, error = False, exc
        span.end(error)
        duration_ms = (time.perf_counter() - started) * 1000.0
        if success:
            part.update(state="output-available", output=output)
            if not self._unobserved:
                await self._emit(Chunk(type="tool-result", tool_name=call.name, tool_call_id=call.id, input=value,
                                       output=output, dynamic=tool.dynamic or None))
        else:
            part.update(state="output-error", errorText=str(error) or type(error).__name__)
        if self._wants_after_tool_call:
            await self._after_tool_call(call, value, tool, step_number, duration_ms, success, output, error)
        return ToolResultRecord(
            tool_call_id=call.id, tool_name=call.name, input=value, output=output if success else None,
            error=None if success else str(error), success=success, dynamic=tool.dynamic or None,
        )

    async def _after_tool_call(self, call: _PendingCall, value: Any, tool: Tool, step_number: int,
                               duration_ms: float, success: bool, output: Any, error: BaseException | None) -> None:
        await self.hooks.after_tool_call(
            sharing(ToolCallResultContext(
                tool_call_id=call.id,
                tool_name=call.name,
                input=value,
                dynamic=tool.dynamic or None,
                step_number=step_number,
                duration_ms=duration_ms,
                success=success,
                output=output if success else None,
                error=error,
            ), self.messages)
        )
