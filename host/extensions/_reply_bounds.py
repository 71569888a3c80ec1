"""What one extension tool call may cost the host: its output is bounded in bytes, its preliminaries in number and rate.

Invariants:
- A tool's output (and each preliminary) over the extension's `limits.toolOutputKb` never becomes a big Python
  value: a JSON string is cut to the cap and ends with "…[truncated N bytes]"; any other JSON value is replaced,
  without being decoded, by {"$truncated": true, "bytes": N, "preview": "<its first 2 KiB of JSON>"} (the same
  markers the snapshots use: host/extensions/_convert.py). What the transcript keeps is therefore bounded by the cap.
- Preliminary results reach the caller in order and always before the final output; a flood is thinned: a burst
  of PRELIMINARY_BURST goes through as is, then at most PRELIMINARY_RATE per second, the latest one pending
  replacing the older (coalesced); after `limits.toolPreliminaries` delivered, the rest are dropped. A
  preliminary is JSON-decoded only when it is delivered. The final output is always delivered.
"""

from __future__ import annotations

from typing import Any

from ._convert import Budget, truncation_marker
from ._manifest import Manifest
from ._untrusted_json import Converted, loads_untrusted

PRELIMINARY_BURST = 64  # preliminaries delivered at once before the rate applies (small streams pass untouched)
PRELIMINARY_RATE = 20.0  # preliminaries per second after the burst (the latest pending one wins)


def utf8_size(text: str) -> int:
    """The UTF-8 size of `text` without copying it when it is ASCII (the common case for JSON)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def decode_bounded(text: str, cap: int, seen: Converted | None = None) -> tuple[Any, int | None]:
    """(value, None) for JSON text within `cap` bytes, decoded once; (truncated value, original size) over it.

    Decoded as untrusted (host/extensions/_untrusted_json.py): NaN/Infinity become null, lone surrogates U+FFFD,
    counted in `seen`."""
    size = utf8_size(text)
    if size <= cap:
        return (loads_untrusted(text, seen)[0] if text else None), None
    if text.lstrip()[:1] == '"':  # a JSON string: keep its first `cap` bytes, visibly cut
        value = loads_untrusted(text, seen)[0]
        if isinstance(value, str):
            cut = Budget(cap).text(value, cap)
            return cut, (size if cut is not value else None)  # escapes may make the JSON bigger than the text
    return truncation_marker(text, size), size


class ToolReplyBounds:
    """The bounds of one tool call, and what they did (read by the manager for the trace).

    `offer(text, now)` says whether a preliminary goes out now; one that can't is kept as the pending one
    (replacing an older pending one) until `due_in(now)` says its turn came; `take(now)` hands it out.
    """

    __slots__ = ("output_cap", "max_preliminaries", "received", "delivered", "dropped_over_cap", "truncated",
                 "converted", "_tokens", "_stamp", "_pending")

    def __init__(self, output_cap: int, max_preliminaries: int) -> None:
        self.output_cap = output_cap
        self.max_preliminaries = max_preliminaries
        self.received = 0  # preliminaries the extension sent
        self.delivered = 0  # preliminaries handed to the caller
        self.dropped_over_cap = 0  # preliminaries dropped because max_preliminaries were delivered
        self.truncated: int | None = None  # the original size of a truncated output
        self.converted = Converted()  # non-finite numbers and lone surrogates converted in what was decoded
        self._tokens = float(PRELIMINARY_BURST)
        self._stamp: float | None = None
        self._pending: str | None = None

    def _refill(self, now: float) -> None:
        if self._stamp is not None:
            self._tokens = min(float(PRELIMINARY_BURST), self._tokens + (now - self._stamp) * PRELIMINARY_RATE)
        self._stamp = now

    def offer(self, text: str, now: float) -> str | None:
        """The preliminary to deliver now (`text`), or None: kept pending (coalesced) or dropped (over the count)."""
        self.received += 1
        if self.delivered >= self.max_preliminaries:
            self.dropped_over_cap += 1
            self._pending = None
            return None
        self._refill(now)
        if self._tokens >= 1.0:  # (a pending one is older: superseded)
            self._pending = None
            self._tokens -= 1.0
            self.delivered += 1
            return text
        self._pending = text
        return None

    def due_in(self, now: float) -> float | None:
        """Seconds until the pending preliminary may go out (0: now); None when none is pending."""
        if self._pending is None:
            return None
        self._refill(now)
        return max(0.0, (1.0 - self._tokens) / PRELIMINARY_RATE)

    def take(self, now: float) -> str | None:
        """The pending preliminary if its turn came (counted as delivered), else None."""
        if self._pending is None or (self.due_in(now) or 0.0) > 0.0:
            return None
        text, self._pending = self._pending, None
        self._tokens -= 1.0
        self.delivered += 1
        return text

    def discard_pending(self) -> None:
        """The final output arrived: a pending preliminary is superseded by it."""
        self._pending = None

    def output(self, text: str) -> Any:
        """The final output, decoded within the cap (records the original size when it was truncated)."""
        value, size = decode_bounded(text, self.output_cap, self.converted)
        self.truncated = size
        return value

    def preliminary(self, text: str) -> Any:
        return decode_bounded(text, self.output_cap, self.converted)[0]

    def summary(self) -> str:
        """What the bounds did, for the tool call's trace ("" when they did nothing)."""
        parts = []
        if self.converted:
            parts.append(self.converted.describe())
        if self.truncated is not None:
            parts.append(f"output of {self.truncated} bytes truncated to limits.toolOutputKb "
                         f"({self.output_cap // 1024} KiB)")
        held = self.received - self.delivered
        if held:
            text = f"{self.received} preliminary results: {self.delivered} delivered, {held} coalesced or dropped"
            if self.dropped_over_cap:
                text += f" ({self.dropped_over_cap} over limits.toolPreliminaries={self.max_preliminaries})"
            parts.append(text)
        return "; ".join(parts)


def tool_reply_bounds(manifest: Manifest) -> ToolReplyBounds:
    """The bounds of one call of a tool of the extension `manifest` declares (its `limits`)."""
    return ToolReplyBounds(manifest.limits.tool_output_kb * 1024, manifest.limits.tool_preliminaries)


def bounded_substitute(manifest: Manifest, text: str, value: Any) -> tuple[Any, str]:
    """A beforeToolCall substitute output (`value`, decoded from `text`) within the extension's toolOutputKb: it
    takes the tool output's place in the transcript, so it gets the same cap. (output, trace detail)."""
    cap = manifest.limits.tool_output_kb * 1024
    if len(text) <= cap // 4:  # at most 4 bytes per character: surely within the cap
        return value, "substitute"
    bounded, size = decode_bounded(text, cap)  # (`value` was decoded by _convert, non-finite numbers refused)
    if size is None:
        return value, "substitute"
    return bounded, f"substitute; output of {size} bytes truncated to limits.toolOutputKb ({cap // 1024} KiB)"
