"""`hookwire --log-format json` / HOOKWIRE_LOG_FORMAT: log lines on stderr as one JSON object each (host/_logging.py),
an extension's stderr line naming the extension. (A line written during a call, tagged with its hook, session,
request and trace: tests/observability/test_otel_traces.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOOKWIRE = str(Path(sys.executable).parent / "hookwire")
TALKER = str(Path(__file__).parent / "fixtures" / "talker" / "manifest.yaml")


def hookwire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOOKWIRE, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})


def json_records(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def test_an_extension_stderr_line_is_one_json_object_naming_the_extension() -> None:
    proc = hookwire("--debug", "--log-format", "json", "ext", "list", "-e", TALKER, "--sandbox", "off")
    assert proc.returncode == 0, proc.stderr
    assert not [line for line in proc.stderr.splitlines() if " hookwire." in line and not line.startswith("{")]
    (serving,) = [r for r in json_records(proc.stderr) if r["logger"] == "hookwire.ext.talker"
                  and "serving talker 1.0.0 on unix:" in r["message"]]
    assert list(serving) == ["time", "level", "logger", "message", "extension"]  # no call in flight: no hook, no ids
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", serving["time"])
    assert (serving["level"], serving["extension"]) == ("INFO", "talker")
    (loaded,) = [r for r in json_records(proc.stderr) if r["message"].startswith("loaded extension 'talker'")]
    assert (loaded["logger"], loaded["level"]) == ("hookwire.extensions", "INFO")


def test_an_unknown_log_format_in_the_environment_is_a_usage_error() -> None:
    proc = hookwire("ext", "schema", env={"HOOKWIRE_LOG_FORMAT": "xml"})
    assert proc.returncode == 2
    assert proc.stderr.strip() == "hookwire: error: HOOKWIRE_LOG_FORMAT='xml': expected one of text, json"


def test_log_format_after_the_subcommand_applies_too() -> None:
    proc = hookwire("--debug", "ext", "list", "-e", TALKER, "--sandbox", "off", "--log-format", "json")
    assert proc.returncode == 0, proc.stderr
    (loaded,) = [r for r in json_records(proc.stderr) if r["message"].startswith("loaded extension 'talker'")]
    assert loaded["logger"] == "hookwire.extensions"


def test_an_unknown_log_format_after_the_subcommand_is_a_usage_error_naming_the_choices() -> None:
    proc = hookwire("ext", "schema", "--log-format", "xml")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == ("hookwire: error: argument --log-format: invalid choice: 'xml' "
                                            "(choose from 'text', 'json')")


def test_the_log_format_flag_wins_over_the_environment_once_extensions_start() -> None:
    proc = hookwire("--debug", "ext", "list", "-e", TALKER, "--sandbox", "off", "--log-format", "text",
                    env={"HOOKWIRE_LOG_FORMAT": "json"})
    assert proc.returncode == 0, proc.stderr
    assert json_records(proc.stderr) == []  # the manager the command made did not switch its log to JSON
    assert any(line.startswith("INFO hookwire.extensions: loaded extension 'talker'") for line in proc.stderr.splitlines())
