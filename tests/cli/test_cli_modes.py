"""Shadow mode and the beforeToolCall phase as operators see them (host/_cli_modes.py): `hookwire ext list` (plain,
rich, --json) and the trace's mode column."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from host import parse_manifest
from host._trace_format import format_trace
from host.extensions._snapshots import TraceEvent
from host.extensions._state import ExtensionRuntime

ROOT = Path(__file__).resolve().parents[2]
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")
GUARD = {"name": "guard", "version": "1.0.0", "command": ["python", "-m", "sample_extensions.guard"], "cwd": str(ROOT)}
TRIAL = {**GUARD, "mode": "shadow", "hooks": {"beforeToolCall": {"decisions": True, "phase": "mutate",
                                                                  "mode": "enforce"}}}


def test_ext_list_prints_each_extensions_mode_with_the_hooks_that_differ_and_its_phase(tmp_path: Path) -> None:
    trial, plain = tmp_path / "trial.yaml", tmp_path / "plain.yaml"
    trial.write_text(yaml.safe_dump(TRIAL))
    plain.write_text(yaml.safe_dump({**GUARD, "name": "watcher"}))
    proc = subprocess.run([HOOKWIRE, "ext", "list", "-e", str(trial), "-e", str(plain), "--sandbox", "off"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOOKWIRE_PLAIN": "1"})
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("watcher 1.0.0")
    assert "\n  mode             shadow (beforeToolCall: enforce)\n  phase            mutate\n" in blocks[0]
    assert "\n  mode             enforce\n" in blocks[1] and "phase" not in blocks[1]  # no decisions, no phase


def test_ext_list_json_has_mode_hook_modes_and_phase() -> None:
    info = ExtensionRuntime(parse_manifest(TRIAL)).info().model_dump(mode="json", by_alias=True)  # --json's dump
    assert (info["mode"], info["hook_modes"], info["phase"]) == ("shadow", {"beforeToolCall": "enforce"}, "mutate")
    watcher = ExtensionRuntime(parse_manifest({**GUARD, "hooks": {"onChunk": {"mode": "shadow"}}})).info()
    assert (watcher.mode, watcher.hook_modes, watcher.phase) == ("enforce", {"onChunk": "shadow"}, None)


def test_the_rich_extension_table_shows_mode_and_phase() -> None:
    from rich.console import Console

    from host._cli_output import extensions_table

    console = Console(record=True, force_terminal=True, width=250)
    console.print(extensions_table([ExtensionRuntime(parse_manifest(TRIAL)).info().model_dump(mode="json")]))
    text = console.export_text()
    header = next(line for line in text.splitlines() if "name" in line and "mode" in line)
    assert header.index("hooks") < header.index("mode") < header.index("phase") < header.index("tools")
    assert "shadow (beforeToolCall: enforce)" in text and "mutate" in text


EVENTS = [
    TraceEvent(hook="beforeTurn", extension="router", outcome="ok", latency_ms=0.5, detail="set temperature"),
    TraceEvent(hook="beforeToolCall", extension="trial", outcome="denied", latency_ms=1.25, mode="shadow",
               phase="validate", detail="shadow: would block: no"),
]


def test_a_shadow_rows_mode_has_its_own_column_in_the_plain_trace() -> None:
    assert format_trace(EVENTS).splitlines() == [
        "hook trace:",
        "  beforeTurn      router      0.50 ms          ok  set temperature",
        "  beforeToolCall  trial       1.25 ms  SHADOW  DENIED  shadow: would block: no",
    ]


def test_a_trace_without_shadow_rows_prints_as_before() -> None:
    assert format_trace(EVENTS[:1]).splitlines() == ["hook trace:", "  beforeTurn  router      0.50 ms  ok  set temperature"]


def test_the_rich_trace_table_has_a_mode_column_for_shadow_rows() -> None:
    from rich.console import Console

    from host._cli_output import trace_table

    console = Console(record=True, force_terminal=True, width=200)
    console.print(trace_table(EVENTS))
    lines = console.export_text().splitlines()
    rows = {line.split()[0]: line for line in lines if line.startswith("before")}
    header = next(line for line in lines if "outcome" in line)
    assert header.index("latency") < header.index("mode") < header.index("outcome")
    assert rows["beforeToolCall"][header.index("mode"):].startswith("shadow")
    assert rows["beforeTurn"][header.index("mode"):header.index("outcome")].strip(" │") == ""


def test_run_json_trace_rows_carry_mode_and_phase() -> None:
    from host._cli_json import run_report

    class Result:
        status, request_id, error, failed_open, provenance, denied, trace = (
            "completed", "req_1", None, [], {}, [], EVENTS)
        message = {"content": "ok"}

    rows = json.loads(run_report(Result(), "s").model_dump_json())["trace"]
    assert [(r["mode"], r["phase"]) for r in rows] == [("enforce", ""), ("shadow", "validate")]
