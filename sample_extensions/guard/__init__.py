"""guard — a read-only guard: blocks tools whose names look destructive (beforeToolCall decisions).

Configured from the environment (GUARD_DESTRUCTIVE_WORDS, GUARD_ALLOW_TOOLS; the manifest allowlists
both) and per turn from the request body (`{"readOnly": false}` or `{"guard": {"allow": [...], "words": [...]}}`),
which it reads in beforeTurn.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from extension_sdk import Extension

from ._matcher import DEFAULT_DESTRUCTIVE_WORDS, ENV_ALLOW_TOOLS, ENV_EXTRA_WORDS, GuardPolicy, name_words

__all__ = ["DEFAULT_DESTRUCTIVE_WORDS", "ENV_ALLOW_TOOLS", "ENV_EXTRA_WORDS", "GuardPolicy", "ext", "name_words"]

ext = Extension("guard", "1.0.0", description="Blocks destructive tools (delete, write, kill, ...) in read-only mode")


class _TurnPolicy:
    """The policy of the turn in progress. Hooks without bridge access do not learn the session id, so this
    is the policy of the most recent beforeTurn: with several sessions interleaving turns, a body override
    applies to whichever turn started last (the environment's policy is the floor either way)."""

    def __init__(self) -> None:
        self.base = GuardPolicy.from_env(os.environ)
        self.current = self.base


_state = _TurnPolicy()


@ext.hook("beforeTurn")
def read_turn_body(snapshot: dict[str, Any]) -> None:
    body = snapshot.get("body")
    _state.current = _state.base.with_body(body if isinstance(body, dict) else None)


@ext.hook("beforeToolCall")
def block_destructive(snapshot: dict[str, Any]) -> dict[str, Any] | None:
    tool_name = str(snapshot.get("toolName", ""))
    reason = _state.current.block_reason(tool_name)
    if reason is None:
        return None
    print(f"[guard] blocked {tool_name} (call {snapshot.get('toolCallId', '?')})", file=sys.stderr, flush=True)
    return {"action": "block", "reason": reason}
