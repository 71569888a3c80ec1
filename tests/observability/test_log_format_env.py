"""HOOKWIRE_LOG_FORMAT=json for a host app embedding hookwire (host/_logging.py, "Who decides the format"): applied
when the first Agent starts, even without extensions, to hookwire's own records only; never over the app's own
configuration. The first test is a real app process (the rule acts once per process); the others call the rule
in process with its once-per-process state reset."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from host import _logging

APP = textwrap.dedent("""
    import asyncio, logging, sys
    from host import Agent

    async def main():
        async with Agent(session_id="s1", store=sys.argv[1]) as agent:  # no extensions, no manager
            await agent.chat("/error rate_limit")  # a failed turn: hookwire.agent logs a warning
        logging.getLogger("app").warning("the app's own line")

    asyncio.run(main())
""")


def test_an_app_that_configured_no_logging_gets_hookwires_lines_as_json_from_the_environment(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", APP, str(tmp_path / "s.db")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HOOKWIRE_LOG_FORMAT": "json",
                                            "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stderr
    first, *rest = proc.stderr.splitlines()
    record = json.loads(first)
    assert (record["logger"], record["level"], record["session_id"]) == ("hookwire.agent", "WARNING", "s1")
    assert record["message"].startswith("chat:request:failed session=s1 ")
    assert record["request_id"].startswith("req_")
    assert rest == ["the app's own line"]  # the app's own logger is left as it was (Python's last-resort handler)


@pytest.fixture
def fresh_rule(monkeypatch: pytest.MonkeyPatch) -> Iterator[logging.Logger]:
    """The rule as in a new process, with HOOKWIRE_LOG_FORMAT=json; the `hookwire` logger restored afterwards."""
    monkeypatch.setenv("HOOKWIRE_LOG_FORMAT", "json")
    monkeypatch.setattr(_logging, "_env_done", [False])
    monkeypatch.setattr(_logging, "_explicit", [False])
    monkeypatch.setattr(_logging, "_installed", None)
    logger = logging.getLogger("hookwire")
    handlers, propagate = list(logger.handlers), logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.propagate = propagate


def test_the_environment_is_not_applied_over_a_handler_the_app_gave_the_hookwire_logger(
        fresh_rule: logging.Logger) -> None:
    mine = logging.StreamHandler(sys.stderr)
    fresh_rule.addHandler(mine)
    _logging.apply_env_format()
    assert fresh_rule.handlers[-1] is mine and not isinstance(mine.formatter, _logging.JsonFormatter)
    assert fresh_rule.propagate


def test_the_environment_is_not_applied_after_configure_logging(fresh_rule: logging.Logger) -> None:
    root = logging.getLogger()
    root_handlers, before = list(root.handlers), list(fresh_rule.handlers)
    try:
        handler = _logging.configure_logging("text")
        _logging.apply_env_format()
        assert not isinstance(handler.formatter, _logging.JsonFormatter)
        assert fresh_rule.handlers == before and fresh_rule.propagate
    finally:
        root.handlers[:] = root_handlers


def test_an_unknown_format_in_the_environment_is_an_error_naming_the_variable(
        fresh_rule: logging.Logger, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKWIRE_LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match=r"HOOKWIRE_LOG_FORMAT='xml': expected one of text, json"):
        _logging.apply_env_format()
