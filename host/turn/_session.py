"""The Session an agent configures once in ``configure_session``: context blocks, compaction, stall watchdog.

When the session has context blocks, the system prompt is built from them instead of ``get_system_prompt()``.
A block's content comes from its ``provider`` (a callable, or an object with ``get``) or else from the store
(writable through ``Agent.set_context`` and, with permission, by extensions over the HostBridge).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

CompactFunction = Callable[[list[dict[str, Any]]], "list[dict[str, Any]] | None | Awaitable[list[dict[str, Any]] | None]"]


async def maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class ContextBlock(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None  # callable() -> str (sync/async) or an object with .get()
    initial: str | None = None

    async def read(self, stored: str | None) -> str:
        if self.provider is not None:
            getter = getattr(self.provider, "get", None) or self.provider
            content = await maybe_await(getter())
            text = "" if content is None else str(content)
        else:
            text = stored if stored is not None else (self.initial or "")
        if self.max_tokens is not None:
            text = text[: self.max_tokens * 4]  # ~4 characters per token
        return text


class Session:
    """Fluent configuration; every method returns the session."""

    def __init__(self) -> None:
        self.context_blocks: dict[str, ContextBlock] = {}
        self.compaction: CompactFunction | None = None
        self.compact_after_tokens: int | None = None
        self.cached_prompt: bool = False
        self.overflow_recovery: bool = False
        self.overflow_max_attempts: int = 1
        self.chat_stream_stall_timeout_ms: int | None = None
        self.max_input_tokens: int | None = None  # proactive mid-turn guard (with_proactive_compaction)
        self.proactive_threshold: float = 0.9
        self._prompt_cache: str | None = None

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
        initial: str | None = None,
    ) -> "Session":
        self.context_blocks[label] = ContextBlock(
            label=label, description=description, max_tokens=max_tokens, provider=provider, initial=initial
        )
        return self

    def on_compaction(self, fn: CompactFunction) -> "Session":
        """fn(messages) -> the compacted message list (None or the same list: nothing could be compacted)."""
        self.compaction = fn
        return self

    def compact_after(self, tokens: int) -> "Session":
        """Compact before a turn when the transcript is estimated above ``tokens`` (~4 characters per token)."""
        self.compact_after_tokens = tokens
        return self

    def with_cached_prompt(self) -> "Session":
        """Build the system prompt from the context blocks once, and reuse it until a block is written."""
        self.cached_prompt = True
        return self

    def with_context_overflow_recovery(self, *, max_attempts: int = 1) -> "Session":
        """Reactive recovery: when classify_chat_error says context_overflow, compact and retry (bounded)."""
        self.overflow_recovery = True
        self.overflow_max_attempts = max(0, max_attempts)
        return self

    def with_proactive_compaction(self, max_input_tokens: int, *, threshold: float = 0.9) -> "Session":
        """Think's mid-turn guard: before a step, compact when the previous step's input tokens reached
        ``threshold`` of ``max_input_tokens`` (needs on_compaction); the turn goes on with the compacted history."""
        self.max_input_tokens = max(1, int(max_input_tokens))
        self.proactive_threshold = float(threshold)
        return self

    def with_stream_stall_timeout(self, ms: int) -> "Session":
        """Watch the model stream: silent for ``ms`` milliseconds is a stall (recovered, then an error; 0: off)."""
        self.chat_stream_stall_timeout_ms = ms
        return self

    def invalidate_prompt(self) -> None:
        self._prompt_cache = None

    async def build_system(self, get_stored: Callable[[str], Awaitable[str | None]]) -> str:
        if self.cached_prompt and self._prompt_cache is not None:
            return self._prompt_cache
        sections: list[str] = []
        for block in self.context_blocks.values():
            content = await block.read(await get_stored(block.label))
            head = f"## {block.label}" + (f"\n{block.description}" if block.description else "")
            sections.append(f"{head}\n{content}".rstrip())
        prompt = "\n\n".join(sections)
        if self.cached_prompt:
            self._prompt_cache = prompt
        return prompt
