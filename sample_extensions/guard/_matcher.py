"""Which tool names the guard treats as destructive: a word match on the tool name's parts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_DESTRUCTIVE_WORDS: frozenset[str] = frozenset(
    {
        "delete", "remove", "drop", "rm", "rmdir", "unlink", "write", "overwrite", "kill", "truncate",
        "destroy", "erase", "purge", "wipe", "shred", "shutdown", "terminate", "edit",
    }
)  # fmt: skip

ENV_EXTRA_WORDS = "GUARD_DESTRUCTIVE_WORDS"  # comma-separated words added to the defaults
ENV_ALLOW_TOOLS = "GUARD_ALLOW_TOOLS"  # comma-separated tool names that are never blocked

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def name_words(tool_name: str) -> list[str]:
    """The lower-case words of a tool name: `fs_deleteFile` -> ['fs', 'delete', 'file'], `rm-rf` -> ['rm', 'rf']."""
    words: list[str] = []
    for part in _SEPARATORS.split(tool_name):
        words.extend(w.lower() for w in _CAMEL_BOUNDARY.split(part) if w)
    return words


def _csv(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


class GuardPolicy(BaseModel):
    """What the guard blocks. Built from the environment, then adjusted per turn by the body's `guard` key."""

    model_config = ConfigDict(frozen=True)

    read_only: bool = True
    destructive_words: frozenset[str] = DEFAULT_DESTRUCTIVE_WORDS
    allow_tools: frozenset[str] = Field(default_factory=frozenset)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> GuardPolicy:
        extra = {w.lower() for w in _csv(environ.get(ENV_EXTRA_WORDS))}
        return cls(
            destructive_words=DEFAULT_DESTRUCTIVE_WORDS | extra,
            allow_tools=frozenset(_csv(environ.get(ENV_ALLOW_TOOLS))),
        )

    def with_body(self, body: Mapping[str, Any] | None) -> GuardPolicy:
        """Apply a turn body: `{"readOnly": false}` turns the guard off for the turn;
        `{"guard": {"readOnly": bool, "words": [...], "allow": [...]}}` adds words / allowed tool names."""
        if not body:
            return self
        update: dict[str, Any] = {}
        section = body.get("guard") if isinstance(body.get("guard"), Mapping) else {}
        read_only = section.get("readOnly", body.get("readOnly"))
        if isinstance(read_only, bool):
            update["read_only"] = read_only
        words = section.get("words")
        if isinstance(words, list):
            update["destructive_words"] = self.destructive_words | {str(w).lower() for w in words}
        allow = section.get("allow")
        if isinstance(allow, list):
            update["allow_tools"] = self.allow_tools | {str(t) for t in allow}
        return self.model_copy(update=update) if update else self

    def matched_word(self, tool_name: str) -> str | None:
        """The destructive word that makes `tool_name` blocked, or None when it may run."""
        if not self.read_only or tool_name in self.allow_tools:
            return None
        return next((w for w in name_words(tool_name) if w in self.destructive_words), None)

    def block_reason(self, tool_name: str) -> str | None:
        word = self.matched_word(tool_name)
        if word is None:
            return None
        return (
            f"guard: '{tool_name}' looks destructive (its name contains '{word}') and this session is "
            f"read-only, so the call was blocked. Use a read-only tool instead, or ask the user to "
            f"allow it (turn body {{\"guard\": {{\"allow\": [\"{tool_name}\"]}}}})."
        )

