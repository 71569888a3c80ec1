"""The `--json` shapes of the `hookwire` command (one documented shape per command: README "The CLI").

- `run --json`: `RunReport` (below): the turn's outcome, answer, error, who failed open, provenance, refusals
  and its trace (a row per hook per extension). Nothing else reaches stdout: the stream is not echoed.
- `ext list --json`: a list of `ExtensionInfo` (host.ExtensionInfo, by alias).
- `ext validate --json`: `host._cli_validate.ValidateReport`.
- `ext schema --json`: the manifest JSON Schema (the same with or without the flag: it is JSON already).
- `doctor --json`: `host._cli_doctor.DoctorReport`.

`print_json` writes one indented JSON document and a newline. A subcommand registered from another module
(journal, replay) follows the same pattern: a pydantic model for its shape, `print_json(model)`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field


class TraceRow(BaseModel):
    hook: str
    extension: str
    outcome: str
    latency_ms: float
    detail: str = ""
    reason: str = ""
    mode: str = Field(default="enforce", description="shadow: the hook ran live but nothing it returned was applied")
    phase: str = Field(default="", description="a beforeToolCall decider's phase: mutate or validate ('' otherwise)")


class RunReport(BaseModel):
    """`hookwire run --json`."""

    status: str = Field(description="completed, error, aborted ... (exit 0 only for completed)")
    session_id: str
    request_id: str
    text: str = Field(description="the assistant's answer text ('' if none)")
    error: str | None = None
    failed_open: list[str] = Field(default_factory=list)
    provenance: dict[str, str] = Field(default_factory=dict, description="TurnConfig field -> extension that set it")
    denied: list[dict[str, Any]] = Field(default_factory=list, description="{extension, hook, field, reason} each")
    trace: list[TraceRow] = Field(default_factory=list)


def run_report(result: Any, session_id: str) -> RunReport:
    message = result.message or {}
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    return RunReport(
        status=result.status, session_id=session_id, request_id=result.request_id, text=text or "",
        error=result.error, failed_open=list(result.failed_open), provenance=dict(result.provenance),
        denied=[d.model_dump(mode="json") for d in result.denied],
        trace=[TraceRow(hook=e.hook, extension=e.extension, outcome=e.outcome, latency_ms=round(e.latency_ms, 3),
                        detail=e.detail, reason=e.reason, mode=e.mode, phase=e.phase) for e in result.trace],
    )


def print_json(value: Any) -> None:
    """One JSON document on stdout (a pydantic model is dumped in JSON mode)."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    print(json.dumps(value, indent=2))  # \\u escapes: no raw control or bidi character reaches a terminal
