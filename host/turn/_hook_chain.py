"""The hook chain: for each of the five hooks, the Agent subclass first, then the extensions (Think's order).

    beforeTurn      subclass before_turn -> TurnConfig; extensions' merged patch applied on top (granted scalars);
                    their headers/providerOptions kept apart for the plan (host/turn/_plan.py), host winning
    beforeToolCall  subclass before_tool_call, then the extensions always (they see its substituted input); a
                    subclass block/substitute stands, else the extensions decide (block > substitute > allow);
                    provenance "toolInput.<toolCallId>" names the mutators whose input change stands
    afterToolCall   subclass, then the extensions observe
    onStepFinish    subclass, then the extensions observe
    onChunk         subclass, then the extensions observe (only when one subscribes)

`HookChain` is the loop's `LoopHooks` (host/turn/_loop.py); the loop knows nothing of subclasses or extensions.
What the extensions decide goes through `ExtensionManager` (host/extensions/_dispatch.py); this module only
translates between the subclass's contexts and the extensions' snapshots, and keeps the turn's record.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..extensions._snapshots import (
    CallContext,
    StepSnapshot,
    ToolCallSnapshot,
    ToolResultSnapshot,
    TraceEvent,
    TurnSnapshot,
)
from ..extensions._turn_config_policy import MAP_FIELDS, TurnConfigDenial
from . import _journal_writer
from ._hook_messages import for_hook
from ._plan import coerce, turn_deadline
from ._session import maybe_await
from ._tools import Tool, as_tool
from ._types import (
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

if TYPE_CHECKING:
    from ..extensions._manager import ExtensionManager
    from ._agent import Agent

logger = logging.getLogger("hookwire.agent")


@dataclass
class TurnRecord:
    """One turn's identity and what its hooks recorded: trace, provenance, denials, deadline."""

    session_id: str
    request_id: str
    trace: list[TraceEvent] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)  # TurnConfig field path -> extension that set it
    denied: list[TurnConfigDenial] = field(default_factory=list)
    deadline: float | None = None  # loop time the turn's timeout (totalMs) ends; bounds extension hooks
    chunk_subscribed: bool = False  # an extension observes onChunk (else chunks are not snapshotted at all)
    context: CallContext = field(init=False)  # one object per turn, so consecutive observations batch together

    def __post_init__(self) -> None:
        self.context = CallContext(session_id=self.session_id, request_id=self.request_id)

    def deny(self, extension: str, path: str, reason: str) -> None:
        """An extension's field was refused after the merge (the host's own setting wins): record it."""
        self.provenance.pop(path, None)
        self.denied.append(TurnConfigDenial(extension=extension, field=path, reason=reason))
        logger.warning("extension %r beforeTurn: field %s: denied: %s", extension, path, reason)
        self.trace.append(TraceEvent(hook="beforeTurn", extension=extension, outcome="denied",
                                     detail=f"{path}: {reason}", request_id=self.request_id))


def _error_dict(error: Any) -> dict[str, Any]:
    if isinstance(error, BaseException):
        return {"name": type(error).__name__, "message": str(error), "stack": _stack_text(error)[-4000:]}
    return {"name": "Error", "message": str(error), "stack": ""}


def _stack_text(error: BaseException) -> str:
    """The traceback's frames and the exception line, without source lines: reading those (linecache stats and reads
    every file of the stack) is file I/O on the event loop, which stalled it 100+ ms on a busy disk (issue 19)."""
    lines = ["Traceback (most recent call last):\n"]
    for frame, lineno in traceback.walk_tb(error.__traceback__):
        lines.append(f'  File "{frame.f_code.co_filename}", line {lineno}, in {frame.f_code.co_name}\n')
    return "".join(lines + traceback.format_exception_only(type(error), error))


class HookChain:
    """The five hooks of one turn: the subclass, then the extensions."""

    def __init__(self, agent: Agent, manager: ExtensionManager | None, turn: TurnRecord) -> None:
        from ._agent import noop_hooks

        self.a = agent
        self.m = manager
        self.turn = turn
        self.skip = noop_hooks(agent)  # the subclass's hooks that are Agent's no-ops: not called this turn

    async def before_turn(self, ctx: TurnContext, tools: dict[str, Tool], continuation: bool,
                          body: dict[str, Any] | None) -> tuple[TurnConfig, dict[str, Any]]:
        """The turn's TurnConfig (subclass, then the extensions' granted fields) and the extensions' maps
        (headers/providerOptions) for the plan. Adds the config's own tools to `tools`."""
        cfg: TurnConfig = (TurnConfig() if "before_turn" in self.skip else
                           coerce(TurnConfig, await maybe_await(self.a.before_turn(ctx)), "before_turn") or TurnConfig())
        for name, value in (cfg.tools or {}).items():
            tools[name] = as_tool(name, value)
        if self.m is None:
            return cfg, {}
        turn = self.turn
        snapshot = TurnSnapshot(
            system=cfg.system if cfg.system is not None else ctx.system,
            tool_names=list(tools),
            message_count=len(cfg.messages if cfg.messages is not None else ctx.messages),
            continuation=continuation,
            body=body,
            model_id=cfg.model or ctx.model,
        )
        started = asyncio.get_running_loop().time()
        turn.deadline = turn_deadline(cfg.timeout, started)
        merged = await self.m.before_turn(snapshot, turn.context, deadline=turn.deadline)
        _journal_writer.burst_over(self.a)  # its entries are written now, while the turn goes on
        turn.provenance = dict(merged.provenance)
        turn.denied = list(merged.denied)
        patch = merged.patch.set_fields()
        ext_maps = {key: patch.pop(key) for key in MAP_FIELDS if key in patch}
        for key, value in patch.items():
            setattr(cfg, key, value)
        turn.chunk_subscribed = bool(self.m.subscribers("onChunk"))
        turn.deadline = turn_deadline(cfg.timeout, started)  # an extension may have set the timeout
        return cfg, ext_maps

    def options_refused(self, refused: list[tuple[str, str]]) -> None:
        """The plan refused these extension headers/options (the host set them): denied, not credited."""
        for path, reason in refused:
            self.turn.deny(self.turn.provenance.get(path, ""), path, reason)

    async def before_step(self, ctx: PrepareStepContext) -> StepConfig | None:
        if "before_step" in self.skip:
            return None
        return coerce(StepConfig, await maybe_await(self.a.before_step(for_hook(self.a, "before_step", ctx))),
                      "before_step")

    async def decide(self, ctx: ToolCallContext, tool: Tool) -> ToolCallDecision:
        decision = None if "before_tool_call" in self.skip else coerce(ToolCallDecision, await maybe_await(
            self.a.before_tool_call(for_hook(self.a, "before_tool_call", ctx))), "before_tool_call")
        decision = decision or ToolCallDecision()
        if self.m is None:
            return decision
        # Think's order: the extensions are dispatched even after a subclass block/substitute, and they see the
        # input the subclass substituted (the one that would run), not the model's original.
        substituted = decision.action == "allow" and decision.has_input
        snapshot = ToolCallSnapshot(tool_name=ctx.tool_name, tool_call_id=ctx.tool_call_id,
                                    input=decision.input if substituted else ctx.input,
                                    step_number=ctx.step_number, dynamic=ctx.dynamic)
        ext = await self.m.before_tool_call(snapshot, self.turn.context, deadline=self.turn.deadline)
        _journal_writer.burst_over(self.a)
        if decision.action != "allow":
            return decision  # the subclass's block/substitute stands; the extensions were told of the call
        if ext is not None and ext.input_changed_by:  # provenance: the mutators whose input change stands
            self.turn.provenance[f"toolInput.{ctx.tool_call_id}"] = ", ".join(ext.input_changed_by)
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
            return await self.m.execute_tool(tool.name, input, context=self.turn.context,
                                             tool_call_id=ctx.tool_call_id, on_preliminary=preliminary)
        finally:
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    async def after_tool_call(self, ctx: ToolCallResultContext) -> None:
        if "after_tool_call" not in self.skip:
            await maybe_await(self.a.after_tool_call(for_hook(self.a, "after_tool_call", ctx)))
        if self.m is not None:
            self.m.after_tool_call(
                ToolResultSnapshot(
                    tool_name=ctx.tool_name, tool_call_id=ctx.tool_call_id, input=ctx.input,
                    step_number=ctx.step_number, duration_ms=ctx.duration_ms, success=ctx.success,
                    output=ctx.output if ctx.success else None,
                    error=None if ctx.success else _error_dict(ctx.error), dynamic=ctx.dynamic,
                ),
                self.turn.context,
            )

    async def on_step_finish(self, ctx: StepContext) -> None:
        if "on_step_finish" not in self.skip:
            await maybe_await(self.a.on_step_finish(ctx))
        if self.m is not None:
            self.m.on_step_finish(
                StepSnapshot(
                    step_number=ctx.step_number, finish_reason=ctx.finish_reason, text=ctx.text,
                    reasoning_text=ctx.reasoning_text, tool_call_count=len(ctx.tool_calls),
                    tool_result_count=len(ctx.tool_results), usage=ctx.usage,
                    provider_metadata=ctx.provider_metadata,
                ),
                self.turn.context,
            )

    def wants(self, hook: str) -> bool:
        """Whether the loop need build `hook`'s context at all: the subclass overrides the hook or, for an
        observation, extensions may see it (before_step is the subclass's alone)."""
        if hook == "before_step":
            return hook not in self.skip
        return hook not in self.skip or self.m is not None

    def chunks_observed(self) -> bool:
        """Whether anyone sees this turn's chunks: an ``on_chunk`` of the Agent subclass (or one set on the instance),
        or an extension that observes onChunk (known once beforeTurn ran). If not, the loop makes no chunks."""
        if "on_chunk" not in self.skip:
            return True
        return self.m is not None and self.turn.chunk_subscribed

    def chunk_sink(self) -> Callable[[str, str | None, str | None, str | None], None] | None:
        """When only extensions see this turn's chunks (no ``on_chunk`` of the subclass's): what takes each delta's
        fields (type, text, tool name, tool call id) for them, bound to the turn's context — the loop then makes no
        Chunk for a delta. None otherwise."""
        if "on_chunk" not in self.skip or self.m is None or not self.turn.chunk_subscribed:
            return None
        return functools.partial(self.m.on_chunk_fields, context=self.turn.context)

    async def on_chunk(self, ctx: ChunkContext) -> None:
        if "on_chunk" not in self.skip:
            await maybe_await(self.a.on_chunk(ctx))
        if self.m is not None and self.turn.chunk_subscribed:
            c = ctx.chunk  # the per-chunk path: no snapshot model (host/extensions/_chunk_item.py)
            self.m.on_chunk_fields(c.type, c.text, c.tool_name, c.tool_call_id, self.turn.context)
