"""Per-session counters of streamed text: chunks and characters per step, and running totals."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

CONTEXT_LABEL = "token_meter.usage"  # its own namespace: `<sanitized name>.<label>`


class StepUsage(BaseModel):
    step_number: int
    chunks: int
    chars: int
    output_tokens: int | None = None


class SessionMeter(BaseModel):
    """Counts for one session: the step in progress, and every finished step."""

    chunks: int = 0
    chars: int = 0
    steps: list[StepUsage] = Field(default_factory=list)

    def on_chunk(self, snapshot: dict[str, Any]) -> None:
        if snapshot.get("type") == "text-delta":
            self.chunks += 1
            self.chars += len(snapshot.get("text") or "")

    def on_step_finish(self, snapshot: dict[str, Any]) -> StepUsage:
        usage = snapshot.get("usage") or {}
        step = StepUsage(
            step_number=int(snapshot.get("stepNumber", len(self.steps))),
            chunks=self.chunks,
            chars=self.chars,
            output_tokens=usage.get("outputTokens"),
        )
        self.steps.append(step)
        self.chunks = self.chars = 0
        return step

    def report(self) -> dict[str, Any]:
        """The context block's content (as a dict): totals and the last step."""
        last = self.steps[-1] if self.steps else None
        return {
            "steps": len(self.steps),
            "chunks": sum(s.chunks for s in self.steps),
            "chars": sum(s.chars for s in self.steps),
            "lastStep": None
            if last is None
            else {"stepNumber": last.step_number, "chunks": last.chunks, "chars": last.chars, "outputTokens": last.output_tokens},
        }


class Meters:
    """One SessionMeter per session id (bounded: the oldest sessions are forgotten first)."""

    def __init__(self, max_sessions: int = 1000) -> None:
        self._by_session: dict[str, SessionMeter] = {}
        self._max = max_sessions

    def get(self, session_id: str) -> SessionMeter:
        meter = self._by_session.get(session_id)
        if meter is None:
            if len(self._by_session) >= self._max:
                self._by_session.pop(next(iter(self._by_session)))
            meter = self._by_session[session_id] = SessionMeter()
        return meter
