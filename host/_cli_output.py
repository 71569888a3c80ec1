"""How the `hookwire` command draws: rich (colour, tables, a spinner) on a terminal, plain text when piped.

`rich_stdout()` decides once per process: stdout is a TTY and TERM is not "dumb" (HOOKWIRE_PLAIN=1 forces plain;
NO_COLOR keeps the tables but drops colour, as rich reads it). The plain forms are the CLI's stable, tested
output; the rich forms show the same facts. rich is imported only when it draws, so `import host` and piped runs
never pay for it.

Untrusted text (extension names and details, model output, manifest fields) reaches rich only as `Text` objects
made from `terminal_safe(...)`: never as markup, so an extension writing "[red]" or an escape sequence prints
it literally.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from ._cli_modes import has_shadow, mark
from ._terminal_text import terminal_safe

_OUTCOME_STYLE = {
    "ok": "green",
    "skipped": "dim",
    "denied": "bold red",
    "error": "bold red",
    "timeout": "bold red",
    "failed_open": "yellow",
    "failed_closed": "bold red",
}


def _tty(stream: Any) -> bool:
    try:
        return bool(stream.isatty()) and os.environ.get("TERM") != "dumb" and os.environ.get("HOOKWIRE_PLAIN") != "1"
    except (AttributeError, ValueError):
        return False


@lru_cache(maxsize=1)
def rich_stdout() -> bool:
    """Whether stdout gets rich output (a terminal) or the plain, stable form (a pipe or file)."""
    return _tty(sys.stdout)


def console(*, stderr: bool = False) -> Any:
    """A rich Console on stdout (or stderr); only call when drawing rich."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def safe_text(value: object, style: str = "") -> Any:
    """Untrusted text as a rich Text: terminal-safe, never parsed as markup."""
    from rich.text import Text

    return Text(terminal_safe(value), style=style)


def trace_table(events: Iterable[Any], provenance: Mapping[str, str] | None = None) -> Any:
    """The hook trace as a rich renderable: a table (one row per hook of each extension) and who set what."""
    from rich.console import Group
    from rich.table import Table

    table = Table(title="hook trace", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("hook", style="cyan", no_wrap=True)
    table.add_column("extension", style="bold", no_wrap=True)
    table.add_column("latency", justify="right", no_wrap=True)
    events = list(events)
    shadow = has_shadow(events)  # a mode column only when a hook ran in shadow mode (host/_cli_modes.py)
    if shadow:
        table.add_column("mode", style="bold yellow", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("detail", overflow="fold")
    rows = 0
    for e in events:
        rows += 1
        table.add_row(safe_text(e.hook), safe_text(e.extension), f"{e.latency_ms:.2f} ms",
                      *([mark(e).lower()] if shadow else []),
                      safe_text(e.outcome.replace("_", " "), _OUTCOME_STYLE.get(e.outcome, "")), safe_text(e.detail))
    parts: list[Any] = [table if rows else safe_text("hook trace: (no extension hooks ran)", "dim")]
    if provenance:
        who = Table(title="turn config set by extensions", title_justify="left", show_edge=False, pad_edge=False)
        who.add_column("field", style="cyan")
        who.add_column("set by", style="bold")
        for field, ext in provenance.items():
            who.add_row(safe_text(field), safe_text(ext))
        parts.append(who)
    return Group(*parts)


def print_trace(events: Iterable[Any], provenance: Mapping[str, str] | None = None) -> None:
    """The trace on stdout: a rich table on a terminal, else the plain form (host._trace_format.format_trace)."""
    if rich_stdout():
        console().print(trace_table(events, provenance))
        return
    from ._trace_format import format_trace

    print(format_trace(events, provenance))


def print_status_line(text: str, *, style: str = "bold red", file: Any = None) -> None:
    """One line of untrusted text (a turn's status, an error): coloured on a terminal."""
    stream = file if file is not None else sys.stdout
    if _tty(stream):
        console(stderr=stream is sys.stderr).print(safe_text(text, style))
    else:
        print(terminal_safe(text), file=stream)


class Progress:
    """A spinner saying what is happening ("importing litellm", "starting extensions: a, b") on stderr when it is
    a terminal; nothing otherwise. `update(text)` changes the words; leaving the context removes it."""

    def __init__(self) -> None:
        self._status: Any = None

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(safe_text(text, "dim"))

    def __enter__(self) -> "Progress":
        if _tty(sys.stderr):
            self._status = console(stderr=True).status(safe_text("starting", "dim"), spinner="dots")
            self._status.start()
            # Drawn once here, in the calling thread: whatever rich imports to draw is imported before the litellm
            # thread (host/_cli_cold.py), which imports some rich modules itself, starts.
            self._status.update(safe_text("starting", "dim"))
        return self

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@contextlib.contextmanager
def progress() -> Iterator[Progress]:
    with Progress() as p:
        yield p


class _TurnErrorShown(logging.Filter):
    """Drops the turn runner's "chat:request:failed" warning: the CLI prints the turn's error itself, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("chat:request:failed")


def show_turn_errors_once() -> None:
    """A failed turn's error is printed once, by the CLI ([turn error: ...]), not also as a log line (--debug keeps
    the log line)."""
    logging.getLogger("hookwire.agent").addFilter(_TurnErrorShown())


def _granted(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_granted(v) for v in value.values())
    return value not in (None, [], "", "none", False)


def extensions_table(infos: Iterable[Mapping[str, Any]]) -> Any:
    """`hookwire ext list` on a terminal: one row per extension (the ExtensionInfo dumps), untrusted text inert."""
    from rich.table import Table

    from ._cli_modes import mode_text, phase_text

    table = Table(title="extensions", title_justify="left")
    for column in ("name", "version", "state", "pid", "hooks", "mode", "phase", "tools", "permissions", "sandbox"):
        table.add_column(column, overflow="fold", style="bold" if column == "name" else "")
    for data in infos:
        tools = [t["name"] if isinstance(t, dict) else t for t in data.get("tools") or []]
        perms = data.get("permissions") or {}
        granted = ", ".join(f"{k}: {json.dumps(v)}" for k, v in perms.items() if _granted(v))
        state = str(data.get("state", "?"))
        table.add_row(safe_text(data.get("name")), safe_text(data.get("version", "")),
                      safe_text(state, "green" if state == "running" else "yellow"), str(data.get("pid") or ""),
                      safe_text(", ".join(data.get("hooks") or [])),
                      safe_text(mode_text(data), "yellow" if "shadow" in mode_text(data) else ""),
                      safe_text(phase_text(data)), safe_text(", ".join(tools)),
                      safe_text(granted), safe_text(", ".join(data.get("sandbox") or [])))
    return table
