"""Count a turn's observations per hook, so its trace shows one row per hook per extension (issue 14 §3).

Observations (afterToolCall, onStepFinish, onChunk, observe-only beforeToolCall) travel batched on one stream and
are acknowledged together at the turn's flush, so their latency is one figure per extension. What a reader of the
trace wants is which hooks ran: `ObservationTally.add` counts each observation under its hook and turn (one dict
increment; the per-chunk path), `take` hands the turn's counts to the flush, and `hook_rows` turns one extension's
delivered observations into a (hook, detail) row per hook it subscribes to. A count the tally can't attribute
(observations of another turn acknowledged by this flush) falls back to the one merged `observe` row.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

#: The observed hooks, in the order a turn fires them (the trace lists them so).
OBSERVED_HOOKS = ("beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")


class ObservationTally:
    """Observations sent per turn (session id, request id) and hook, until the turn's flush takes them."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str] | None, dict[str, int]] = {}
        self._last_context: Any = None
        self._last: dict[str, int] | None = None

    @staticmethod
    def _key(context: Any) -> tuple[str, str] | None:
        return None if context is None else (context.session_id, context.request_id)

    def add(self, context: Any, hook: str) -> None:
        """One observation of `hook` sent for the turn `context` (a CallContext or None)."""
        counts = self._last
        if counts is None or context is not self._last_context:
            counts = self._counts.setdefault(self._key(context), {})
            self._last, self._last_context = counts, context
        counts[hook] = counts.get(hook, 0) + 1

    def take(self, context: Any) -> dict[str, int]:
        """The counts of the turn `context` so far, forgotten here (its flush reports them)."""
        counts = self._counts.pop(self._key(context), {})
        if counts is self._last:
            self._last, self._last_context = None, None
        return counts


def hook_rows(counts: dict[str, int], subscribed: Collection[str], sent: int,
              dropped: int) -> list[tuple[str, str]] | None:
    """(hook, detail) per observed hook of one extension whose `sent` observations were all delivered; None when
    the counts don't account for `sent` (the caller keeps one merged `observe` row)."""
    mine = {hook: counts[hook] for hook in OBSERVED_HOOKS if counts.get(hook) and hook in subscribed}
    if sum(mine.values()) != sent:
        return None
    rows = []
    for hook, n in mine.items():
        detail = f"{n} observation(s) delivered in order"
        if hook == "onChunk" and dropped:
            detail += f", {dropped} oldest dropped (extension too slow)"
        rows.append((hook, detail))
    return rows
