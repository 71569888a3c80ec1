"""token_meter — counts streamed text-delta chunks and characters per step (onChunk), and at each
onStepFinish logs the step to stderr and writes the running totals into the context block
`token_meter.usage` through the HostBridge (permissions: context write own)."""

from __future__ import annotations

import json
import sys
from typing import Any

from extension_sdk import Extension

from ._meter import CONTEXT_LABEL, Meters, SessionMeter, StepUsage

__all__ = ["CONTEXT_LABEL", "Meters", "SessionMeter", "StepUsage", "ext"]

ext = Extension("token_meter", "1.0.0", description="Streamed chunks and characters per step, into a context block")
_meters = Meters()


def _session(host: Any) -> str:
    return host.session_id if host is not None else ""


@ext.hook("onChunk")
def count_chunk(snapshot: dict[str, Any], host: Any) -> None:
    _meters.get(_session(host)).on_chunk(snapshot)


@ext.hook("onStepFinish")
async def report_step(snapshot: dict[str, Any], host: Any) -> None:
    meter = _meters.get(_session(host))
    step = meter.on_step_finish(snapshot)
    print(
        f"[token_meter] session={_session(host) or '-'} step={step.step_number} chunks={step.chunks} "
        f"chars={step.chars} outputTokens={step.output_tokens}",
        file=sys.stderr,
        flush=True,
    )
    if host is None:
        raise RuntimeError("token_meter needs the HostBridge: its manifest must grant `context: {write: own}`")
    await host.set_context(CONTEXT_LABEL, json.dumps(meter.report()))
