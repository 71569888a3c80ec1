"""guard — a read-only guard: blocks tools whose names look destructive (beforeToolCall decisions).

Configured from the environment (GUARD_DESTRUCTIVE_WORDS, GUARD_ALLOW_TOOLS; the manifest allowlists
both) and per turn from the request body (`{"readOnly": false}` or `{"guard": {"allow": [...], "words": [...]}}`),
which it reads in beforeTurn.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from extension_sdk import Extension, current_call

from ._matcher import DEFAULT_DESTRUCTIVE_WORDS, ENV_ALLOW_TOOLS, ENV_EXTRA_WORDS, GuardPolicy, name_words

__all__ = ["DEFAULT_DESTRUCTIVE_WORDS", "ENV_ALLOW_TOOLS", "ENV_EXTRA_WORDS", "GuardPolicy", "ext", "name_words"]

ext = Extension("guard", "1.0.0", description="Blocks destructive tools (delete, write, kill, ...) in read-only mode")


class _TurnPolicies:
    """The policy of each turn in progress, keyed by request id (`current_call()`), so interleaved sessions
    never see each other's body overrides. The environment's policy is the floor either way."""

    def __init__(self) -> None:
        self.base = GuardPolicy.from_env(os.environ)
        self.by_request: dict[str, GuardPolicy] = {}

    def start(self, body: dict[str, Any] | None) -> None:
        if len(self.by_request) > 1000:  # turns that never called a tool: forget the oldest
            self.by_request.pop(next(iter(self.by_request)))
        self.by_request[current_call().request_id] = self.base.with_body(body)

    def current(self) -> GuardPolicy:
        return self.by_request.get(current_call().request_id, self.base)


_policies = _TurnPolicies()


@ext.hook("beforeTurn")
def read_turn_body(snapshot: dict[str, Any]) -> None:
    body = snapshot.get("body")
    _policies.start(body if isinstance(body, dict) else None)


@ext.hook("beforeToolCall")
def block_destructive(snapshot: dict[str, Any]) -> dict[str, Any] | None:
    tool_name = str(snapshot.get("toolName", ""))
    reason = _policies.current().block_reason(tool_name)
    if reason is None:
        return None
    print(f"[guard] blocked {tool_name} (call {snapshot.get('toolCallId', '?')})", file=sys.stderr, flush=True)
    return {"action": "block", "reason": reason}
