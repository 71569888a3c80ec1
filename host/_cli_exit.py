"""The `hookwire` command's conventions: its exit codes, which error maps to which, `--debug` anywhere, quiet pipes.

Exit codes are part of the CLI's contract (README "Exit codes"); a subcommand module registered from host/cli.py
uses them too (raise `CliError(text, code=ExitCode.X)`, or return an ExitCode):

    0   OK               the command did what was asked
    1   FAILED           anything else: a runtime error, a check that found problems (`ext test` FAIL rows)
    2   USAGE            bad command line (argparse's own code)
    3   MANIFEST         a manifest is missing, unreadable or invalid (`ext validate` with any invalid file)
    4   EXTENSION_START  an extension could not be started (spawn, handshake, sandbox required but unavailable)
    5   TURN_FAILED      the turn ran but did not complete (error, aborted, denied ...)
    130 INTERRUPTED      Ctrl-C

Everything here is cheap to import (no rich, no litellm, no gRPC).
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Sequence


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    MANIFEST = 3
    EXTENSION_START = 4
    TURN_FAILED = 5
    INTERRUPTED = 130


class CliError(Exception):
    """An error to show as one line, without a traceback, exiting with `code`."""

    def __init__(self, message: str, *, code: int = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.code = int(code)


def exit_code_for(exc: BaseException) -> int:
    """The exit code of an error that ended a command."""
    from ._errors import ExtensionStartError, ManifestError, SandboxUnavailable

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, ManifestError):
        return ExitCode.MANIFEST
    if isinstance(exc, (ExtensionStartError, SandboxUnavailable)):
        return ExitCode.EXTENSION_START
    if isinstance(exc, BaseExceptionGroup):  # load_all of several: the first one's code decides
        codes = [exit_code_for(e) for e in exc.exceptions]
        return next((c for c in codes if c != ExitCode.FAILED), ExitCode.FAILED)
    return ExitCode.FAILED


def pop_debug(argv: Sequence[str]) -> tuple[list[str], bool]:
    """`argv` without its `--debug` flags (accepted anywhere before a `--`), and whether there was one."""
    out: list[str] = []
    debug = False
    rest = list(argv)
    for i, arg in enumerate(rest):
        if arg == "--":
            out.extend(rest[i:])
            break
        if arg == "--debug":
            debug = True
        else:
            out.append(arg)
    return out, debug


def pop_log_format(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """`argv` without its `--log-format X` / `--log-format=X` (accepted anywhere before a `--`), and the last X.

    The value is not checked here: the caller hands it back to the top-level parser, whose `choices` give the usual
    usage error for a bad one. A `--log-format` with nothing after it is left in place for the parser to report.
    """
    out: list[str] = []
    value: str | None = None
    rest = list(argv)
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            out.extend(rest[i:])
            break
        if arg == "--log-format" and i + 1 < len(rest):
            value = rest[i + 1]
            i += 2
            continue
        if arg.startswith("--log-format="):
            value = arg.split("=", 1)[1]
        else:
            out.append(arg)
        i += 1
    return out, value


def quiet_broken_pipe() -> int:
    """stdout's reader went away (`hookwire doctor | head -1`): leave quietly, as a pipeline expects.

    Python would print "Exception ignored ... BrokenPipeError" when it flushes stdout at exit; pointing stdout at
    /dev/null first makes that flush a no-op. Exit status 141 is what a shell reports for SIGPIPE; `head` callers
    ignore it, `set -o pipefail` scripts see it, as with any Unix tool.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141
