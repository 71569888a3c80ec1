"""`host.preload()` (host/turn/_preload.py): litellm's import and its first call's set-up, done before the event loop
serves. Without it, the first Agent start imports litellm on the loop (~3 s) and the first turn ~85 modules more.

The first two tests are fresh app processes (what is imported, and when, is once per process); the others call
preload in this process, with its once-per-process state reset where the test needs it."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger

from host import preload
from host.turn import _litellm_work, _preload, _scripted_model

#: A host app whose loop runs another task beside the agent (as a server's does), one two-step turn with a host
#: tool; it prints what it saw, among it the modules first imported from the Agent start to the turn's end
APP = Path(__file__).resolve().parents[2] / "bench" / "first_session_app.py"

WARNING = re.compile(
    r"importing litellm held the event loop for \d+\.\d s at this process's first Agent start \(1 other task "
    r"waited\); call host\.preload\(\) at start-up, before the loop serves, to do it \(and set up the first model "
    r"call\) beforehand\n")


def _run_app(tmp_path: Path, mode: str) -> tuple[dict[str, Any], str]:
    proc = subprocess.run([sys.executable, str(APP), mode], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr


def test_after_preload_the_first_agent_start_and_turn_import_nothing(tmp_path: Path) -> None:
    out, stderr = _run_app(tmp_path, "preload")
    report = out["preload"]
    assert (report["imported"], report["warmed"]) == (True, True)
    assert report["import_s"] > 0 and report["warm_s"] > 0
    assert (out["status"], out["text"]) == ("completed", "echo: done")
    assert out["imported"] == []  # without the warm-up call: ~85 of litellm's modules, on the loop
    assert stderr == ""  # no warning: nothing waited for an import


def test_the_first_agent_start_without_preload_warns_that_the_loop_was_held_and_how_to_avoid_it(
        tmp_path: Path) -> None:
    out, stderr = _run_app(tmp_path, "none")
    assert (out["status"], out["text"]) == ("completed", "echo: done")
    assert "litellm" in out["imported"]
    assert WARNING.fullmatch(stderr), stderr


def test_a_second_preload_has_nothing_left_to_do() -> None:
    preload()
    report = preload()
    assert (report.imported, report.warmed, report.warm_s) == (False, False, 0.0)


def test_preload_makes_no_warm_up_call_when_the_app_registered_a_litellm_callback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_preload, "_warmed", False)
    monkeypatch.setattr(litellm, "callbacks", [CustomLogger()])  # the app's: it would hear of the warm-up call
    requests_before = list(_scripted_model.last_requests)
    report = preload()
    assert list(_scripted_model.last_requests) == requests_before  # no model call was made
    assert (report.imported, report.warmed, report.warm_s) == (False, False, 0.0)
    assert _preload._warmed is False


def test_a_warm_up_call_that_fails_is_logged_and_preload_still_returns(monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_preload, "_warmed", False)
    monkeypatch.setitem(_preload._WARM_REQUEST, "messages", [{"role": "user", "content": "/error rate_limit"}])
    monkeypatch.setattr(logging.getLogger("hookwire"), "propagate", True)  # whatever an earlier test configured
    for name in _litellm_work._CALLBACK_LISTS:  # no litellm callback left registered by an earlier test's calls
        monkeypatch.setattr(litellm, name, [])
    with caplog.at_level(logging.WARNING, logger="hookwire"):
        report = preload()
    assert report.warmed is False
    assert _preload._warmed is False  # the next preload() tries again
    (record,) = [r for r in caplog.records if r.name == "hookwire"]
    message = record.getMessage()
    # litellm reports an error raised mid-stream as a MidStreamFallbackError carrying the model's own
    assert message.startswith("preload: the warm-up call on hookwire/scripted failed (MidStreamFallbackError: "), message
    assert "RateLimitError: scripted model: rate limit (scripted by /error rate_limit)" in message, message
    assert message.endswith("); the first turn will set up litellm's model call itself"), message
