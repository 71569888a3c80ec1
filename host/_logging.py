"""Logs as JSON lines: `configure_logging(format="json")`, `hookwire --log-format json`, `HOOKWIRE_LOG_FORMAT=json`.

One JSON object per line, keys in this order:

    time        ISO 8601 UTC with milliseconds ("2026-12-03T09:41:07.123Z")
    level       "DEBUG" / "INFO" / "WARNING" / "ERROR" / "CRITICAL"
    logger      the logger's name ("hookwire.ext.guard" for the lines an extension wrote on its stderr)
    message     the formatted message
    extension, hook, session_id, request_id, trace_id, span_id   where known (absent otherwise)
    trace_ids   an extension's stderr line read while calls of several traces were in flight on it
    exception   the traceback, when the record has one

Where the optional keys come from, first found wins:
1. the record itself (`extra={"extension": ...}`; the host's audit lines and extension stderr lines set them, and a
   record that sets one to None says "unknown here": the key is left out rather than taken from 2 or 3);
2. the log context the host sets while a turn runs (session, request) and while a hook or tool call is in flight
   (extension, hook) — `log_context` below, a context variable, so concurrent turns never mix;
3. the current OpenTelemetry span (trace_id, span_id), when a tracer provider is configured.

The output is plain ASCII (`ensure_ascii`): no control character of an extension's line reaches the terminal, and a
line separator inside a message cannot split a record.

Who decides the format, first one wins:
1. the app, explicitly: `configure_logging(...)` (the `hookwire` command calls it, with --log-format or the variable);
   or the app configured the `hookwire` logger itself (gave it a handler);
2. the environment, for an app that did neither: `HOOKWIRE_LOG_FORMAT=json` is applied once per process, when the
   first Agent starts or ExtensionManager is made (`apply_env_format`): hookwire's records (the `hookwire` logger
   and its children) go to stderr as JSON lines through a handler of their own, and no longer also propagate to the
   root logger's handlers (no line twice, once as text). The app's own loggers are left alone; the level is the
   root's as usual. `text` (or no variable) changes nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import IO, Any, Literal

from opentelemetry import trace

LogFormat = Literal["text", "json"]
FORMATS: tuple[str, ...] = ("text", "json")
ENV_VAR = "HOOKWIRE_LOG_FORMAT"
CONTEXT_KEYS: tuple[str, ...] = ("extension", "hook", "session_id", "request_id", "trace_id", "span_id", "trace_ids")
TEXT_FORMAT = "%(levelname)s %(name)s: %(message)s"

# (session_id, request_id, extension, hook): what the host is doing in this task; "" for not known
log_context: contextvars.ContextVar[tuple[str, str, str, str]] = contextvars.ContextVar(
    "hookwire_log_context", default=("", "", "", ""))
_UNSET = object()


@contextlib.contextmanager
def turn_scope(session_id: str, request_id: str) -> Iterator[None]:
    """Log records made while one turn runs carry its session id and request id."""
    token = log_context.set((session_id, request_id, "", ""))
    try:
        yield
    finally:
        log_context.reset(token)


def call_scope(extension: str, hook: str, session_id: str, request_id: str) -> contextvars.Token[Any]:
    """Log records made from here on in this task carry `extension` and `hook`; end with `log_context.reset`."""
    turn = log_context.get()
    return log_context.set((session_id or turn[0], request_id or turn[1], extension, hook))


def _utc(created: float) -> str:
    t = time.gmtime(created)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', t)}.{int(created % 1 * 1000):03d}Z"


# Whether anything reads the log context: set once a JsonFormatter exists. Until then the hook path skips keeping it
# (host/extensions/_call_tags.py), so text logs cost the hook nothing.
_structured = [False]


def structured() -> bool:
    return _structured[0]


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module doc for the keys)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _structured[0] = True

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": _utc(record.created), "level": record.levelname, "logger": record.name,
                               "message": record.getMessage()}
        session, request, extension, hook = log_context.get()
        known = {"extension": extension, "hook": hook, "session_id": session, "request_id": request}
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            known["trace_id"] = format(span.trace_id, "032x")
            known["span_id"] = format(span.span_id, "016x")
        for key in CONTEXT_KEYS:
            value = record.__dict__.get(key, _UNSET)
            if value is _UNSET:
                value = known.get(key)
            if value:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=True, default=str)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of a log format name ("text": terminal-safe text lines, "json": JsonFormatter)."""
    if fmt == "json":
        return JsonFormatter()
    if fmt == "text":
        from ._terminal_text import TerminalSafeFormatter

        return TerminalSafeFormatter(TEXT_FORMAT)
    raise ValueError(f"log format {fmt!r}: expected one of {', '.join(FORMATS)}")


def format_from_env(default: str = "text") -> str:
    """The log format HOOKWIRE_LOG_FORMAT names (default `default`); a value it does not know is an error."""
    value = os.environ.get(ENV_VAR, "").strip().lower() or default
    if value not in FORMATS:
        raise ValueError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r}: expected one of {', '.join(FORMATS)}")
    return value


_installed: logging.Handler | None = None
_explicit = [False]  # configure_logging ran: the environment is not applied on top of the app's choice
_env_done = [False]  # apply_env_format ran (once per process)
HOOKWIRE_LOGGER = "hookwire"


def configure_logging(format: LogFormat | None = None, *, level: int | str | None = None,
                      stream: IO[str] | None = None) -> logging.Handler:
    """Send log records to `stream` (default stderr) as `format` lines ("json" or "text"; default: the
    HOOKWIRE_LOG_FORMAT environment variable, else "text"). Installs one handler on the root logger (a second call
    replaces the first one's); `level` sets the root logger's level when given. The app's explicit choice: after
    this, the variable is not applied again when an Agent or ExtensionManager starts."""
    global _installed
    fmt = format or format_from_env()
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    if _installed is not None:
        root.removeHandler(_installed)
    root.addHandler(handler)
    _installed = handler
    _explicit[0] = True
    if level is not None:
        root.setLevel(level)
    return handler


def apply_env_format() -> None:
    """HOOKWIRE_LOG_FORMAT for a host app that configured nothing itself (see "Who decides" in the module doc): with
    "json", hookwire's records go to stderr as JSON lines, through a handler on the `hookwire` logger that stops
    their propagation. Called when an Agent starts and when an ExtensionManager is made; acts once per process, and
    not at all after configure_logging or when the app gave the `hookwire` logger a handler. A value it does not
    know is a ValueError naming the variable (every time: nothing is applied)."""
    if _env_done[0]:
        return
    fmt = format_from_env()
    _env_done[0] = True
    hookwire = logging.getLogger(HOOKWIRE_LOGGER)
    if fmt != "json" or _explicit[0] or hookwire.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    hookwire.addHandler(handler)
    hookwire.propagate = False


configure_from_env = apply_env_format  # the name ExtensionManager calls


def use_format(handler: logging.Handler, fmt: str) -> None:
    """Give an existing handler the formatter of `fmt`."""
    handler.setFormatter(formatter(fmt))


def configure_cli_logging(flag: str | None, level: int) -> logging.Handler | None:
    """The `hookwire` command's logging: configure_logging with `--log-format`, else HOOKWIRE_LOG_FORMAT, else text,
    on stderr at `level` (a bad variable: a usage error, exit 2). Run inside a process whose root logger already has
    handlers (`host.cli.main` called from a test or an app), it leaves them alone, as `logging.basicConfig` does."""
    try:
        fmt = flag or format_from_env()
    except ValueError as exc:
        print(f"hookwire: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if any(h is not _installed for h in logging.getLogger().handlers):
        _explicit[0] = True  # the embedding process decided; the environment is not applied over it either
        return None
    return configure_logging(fmt, level=level)  # type: ignore[arg-type]
