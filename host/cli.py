"""The `hookwire` command: run turns with extensions, validate and inspect manifests, diagnose the machine.

    hookwire run "PROMPT" -e MANIFEST... [--model ID] [--session ID] [--store FILE|URL] [--workspace DIR] [--body JSON]
                                         [--json]  (one-shot: a fresh session unless --session names one)
    hookwire chat -e MANIFEST... [--session ID] [--store FILE|URL]  (Ctrl-C aborts the running turn; at the prompt, quits)
    hookwire ext validate FILE... [--json]
    hookwire ext list -e MANIFEST... [--json]
    hookwire ext schema [--json]
    hookwire ext new NAME [--dir DIR]
    hookwire ext test MANIFEST [--json] [--endpoint TARGET] [--tool-input NAME=JSON]... [--sandbox MODE]
    hookwire doctor [--json]
    hookwire completion bash|zsh|fish
    hookwire --version             (--debug is accepted anywhere on the line)

Errors are one clear line on stderr, a traceback only with --debug; exit codes are host._cli_exit.ExitCode
(0 ok, 1 failed, 2 usage, 3 manifest, 4 extension start, 5 turn not completed, 130 Ctrl-C).
On a terminal output is drawn with rich (host._cli_output); piped, it is the plain form the tests pin.
What came from an extension, a manifest or a model is printed through host._terminal_text.terminal_safe (no
terminal escape sequences, no bidi overrides), log lines too.

This module is the parser and the dispatch. A command that lives in its own module registers itself: list the
module in SUBCOMMAND_MODULES; its `register(subparsers)` adds its parser(s) and sets `handler=fn` on each
(`fn(args)` returns an exit code, or a coroutine returning one). host/_cli_completion.py is the example.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import _cli_journal
from ._cli_exit import CliError, ExitCode, exit_code_for, pop_debug, pop_log_format, quiet_broken_pipe

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = "hookwire/scripted"


def _say(text: str, *, file: Any = None) -> None:
    """print() for text that holds untrusted parts (extension, manifest or model output)."""
    from ._terminal_text import terminal_safe

    print(terminal_safe(text), file=file if file is not None else sys.stdout)


#: Modules that add their own subcommands: each has `register(subparsers)` (see the module docstring).
SUBCOMMAND_MODULES: tuple[str, ...] = ("host._cli_completion",)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("hookwire")
    except metadata.PackageNotFoundError:
        return "unknown"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the hookwire version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from extension_sdk.proto import PROTOCOL_VERSION

        print(f"hookwire {_version()} (protocol v{PROTOCOL_VERSION})")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    import importlib

    p = argparse.ArgumentParser(prog="hookwire", description="Run LLM chat turns with out-of-process extensions.",
                                epilog="exit codes: 0 ok, 1 failed, 2 usage, 3 manifest error, "
                                       "4 extension failed to start, 5 turn did not complete, 130 interrupted")
    p.add_argument("--version", action=_VersionAction)
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs (accepted anywhere)")
    p.add_argument("--log-format", choices=("text", "json"), default=None,
                   help="log lines on stderr: text, or one JSON object per line (default: $HOOKWIRE_LOG_FORMAT, "
                        "else text; accepted anywhere)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def turn_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-e", "--extension", action="append", default=[], metavar="MANIFEST", help="load a manifest")
        sp.add_argument("--model", default=DEFAULT_MODEL, help=f"a litellm model id (default {DEFAULT_MODEL})")
        sp.add_argument("--session", default=None,
                        help="session id (run: a fresh session each time unless given; chat: default cli)")
        sp.add_argument("--store", default=os.environ.get("HOOKWIRE_STORE") or ".hookwire/sessions.db",
                        help="where sessions live: a SQLite file, or a postgresql:// URL shared by several hosts "
                        "(default: $HOOKWIRE_STORE, else .hookwire/sessions.db)")
        sp.add_argument("--workspace", default=".hookwire/workspace", help="the workspace root extensions may use")
        sp.add_argument("--body", default=None, help="JSON object sent to beforeTurn as `body`")
        sp.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")
        sp.add_argument("--no-trace", action="store_true", help="do not print the hook trace")

    run = sub.add_parser("run", help="run one turn and print the answer and the hook trace")
    run.add_argument("prompt")
    turn_options(run)
    run.add_argument("--json", action="store_true", help="print the outcome, answer and trace as one JSON object")
    chat = sub.add_parser("chat", help="an interactive chat; history is kept in the store")
    turn_options(chat)
    demo = sub.add_parser("demo", help="a tour: real turns with the sample extensions on the embedded model")
    demo.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")

    ext = sub.add_parser("ext", help="work with extension manifests").add_subparsers(
        dest="ext_command", required=True, metavar="SUBCOMMAND"
    )
    validate = ext.add_parser("validate", help="validate manifest files")
    validate.add_argument("files", nargs="+")
    validate.add_argument("--json", action="store_true", help="machine-readable output")
    lst = ext.add_parser("list", help="start extensions and show their state, hooks, tools and permissions")
    lst.add_argument("-e", "--extension", action="append", default=[], metavar="MANIFEST", required=True)
    lst.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    ext.add_parser("schema", help="print the manifest JSON Schema").add_argument(
        "--json", action="store_true", help="accepted for symmetry: the schema is JSON either way")
    new = ext.add_parser("new", help="scaffold a working extension with its manifest and a test")
    new.add_argument("name")
    new.add_argument("--dir", default=None, help="target directory (default: ./NAME)")

    test = ext.add_parser("test", help="run an extension (any language) through the protocol's clauses: "
                          "one PASS/FAIL/SKIP row per clause of docs/protocol.md; exit 1 on any FAIL")
    test.add_argument("manifest")
    test.add_argument("--json", action="store_true", help="machine-readable output")
    test.add_argument("--endpoint", default=None, metavar="TARGET",
                      help="test an extension already serving at this gRPC target (token: the manifest's `token` "
                           "or $HOOKWIRE_TOKEN); the process clauses are skipped")
    test.add_argument("--tool-input", action="append", default=[], metavar="NAME=JSON",
                      help="the input for tool NAME (default: a small instance of its input schema)")
    test.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")

    sub.add_parser("doctor", help="versions and which sandbox layers this machine can enforce").add_argument(
        "--json", action="store_true", help="machine-readable output")
    _cli_journal.register(sub)  # journal show|verify, replay (host/_cli_journal.py)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return p


# ----------------------------------------------------------------------------------------------- ext


def _cmd_validate(files: Sequence[str], as_json: bool) -> int:
    from ._cli_json import print_json
    from ._cli_validate import print_validate_report, validate_files

    report = validate_files(list(files))
    if as_json:
        print_json(report)
    else:
        print_validate_report(report)
    return ExitCode.OK if report.ok else ExitCode.MANIFEST


def _cmd_schema() -> int:
    from .extensions._manifest import manifest_json_schema

    print(json.dumps(manifest_json_schema(), indent=2))
    return 0


def _cmd_new(name: str, directory: str | None) -> int:
    from ._scaffold import next_step_line, scaffold_extension
    from .extensions._manifest import sanitize_name

    try:
        target = Path(directory or sanitize_name(name))
        written = scaffold_extension(name, target)
    except (ValueError, FileExistsError) as exc:
        raise CliError(str(exc)) from None
    for path in written:
        print(f"wrote {path}")
    print(next_step_line(target))
    return 0


async def _cmd_list(manifests: Sequence[str], sandbox: str, as_json: bool) -> int:
    from .extensions._manager import ExtensionManager

    async with ExtensionManager(sandbox=sandbox) as mgr:  # type: ignore[arg-type]
        infos = await mgr.load_all(manifests)
        if as_json:
            from ._cli_json import print_json

            print_json([i.model_dump(mode="json", by_alias=True) for i in infos])
            return 0
        from ._cli_output import console, extensions_table, rich_stdout

        if rich_stdout():
            console().print(extensions_table(i.model_dump(mode="json", by_alias=True) for i in infos))
            return 0
        for info in infos:
            data = info.model_dump(mode="json", by_alias=True)
            _say(f"{data.get('name')} {data.get('version', '')}  [{data.get('state', '?')}]  pid {data.get('pid')}")
            from ._cli_modes import mode_text, phase_text

            data["mode"], data["phase"] = mode_text(data), phase_text(data) or None  # host/_cli_modes.py
            for key in ("description", "hooks", "mode", "phase", "tools", "features", "permissions", "sandbox",
                        "sandbox_missing"):
                if key in data and data[key] not in (None, [], {}):
                    value = data[key]
                    if key == "tools":
                        value = [t["name"] if isinstance(t, dict) else t for t in value]
                    _say(f"  {key:<16} {json.dumps(value) if not isinstance(value, str) else value}")
    return 0


def _tool_inputs(pairs: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise CliError(f"--tool-input {pair!r}: expected NAME=JSON", code=ExitCode.USAGE)
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CliError(f"--tool-input {name}: not valid JSON: {exc}", code=ExitCode.USAGE) from None
    return out


async def _cmd_test(args: argparse.Namespace) -> int:
    from .conformance import run_conformance
    from .extensions._manifest import ManifestError

    inputs = _tool_inputs(args.tool_input)
    try:
        report = await run_conformance(args.manifest, sandbox=args.sandbox, endpoint=args.endpoint,
                                       tool_inputs=inputs)
    except ManifestError as exc:
        raise CliError(str(exc), code=ExitCode.MANIFEST) from None
    if args.json:
        _say(report.to_json())
    else:
        _say(report.to_text())
    return 0 if report.passed else 1


# ---------------------------------------------------------------------------------------------- turns


def _make_agent(args: argparse.Namespace, manager: Any, *, stream: bool = True, progress: Any = None) -> Any:
    from ._trace_format import render_chunk
    from .turn._agent import Agent

    class CliAgent(Agent):
        def on_chunk(self, ctx: Any) -> None:
            if stream:
                if progress is not None:
                    progress.stop()  # the answer replaces the spinner
                sys.stdout.write(render_chunk(ctx.chunk))
                sys.stdout.flush()

    from .turn._pg_store import is_postgres_url

    if not is_postgres_url(args.store):
        Path(args.store).parent.mkdir(parents=True, exist_ok=True)
    Path(args.workspace).mkdir(parents=True, exist_ok=True)
    return CliAgent(
        session_id=args.session, store=args.store, workspace=args.workspace, manager=manager, model=args.model
    )


def _parse_body(raw: str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"--body is not valid JSON: {exc}", code=ExitCode.USAGE) from None
    if not isinstance(body, dict):
        raise CliError("--body must be a JSON object", code=ExitCode.USAGE)
    return body


def _print_result(result: Any, show_trace: bool) -> None:
    from ._cli_output import print_status_line, print_trace

    print()
    status = getattr(result, "status", "?")
    if status != "completed":
        print_status_line(f"[turn {status}{': ' + result.error if getattr(result, 'error', None) else ''}]")
    failed_open = getattr(result, "failed_open", None)
    if failed_open:
        _say(f"[went on although these extensions failed open: {', '.join(failed_open)}]")
    denied = getattr(result, "denied", None)
    if denied:  # the beforeTurn trust boundary (permissions.turnConfig, request-option policy): see the trace
        _say(f"[refused from extensions' beforeTurn: {', '.join(f'{d.extension}: {d.field}' for d in denied)}]")
    if show_trace:
        print_trace(result.trace, result.provenance)


async def _cmd_run(args: argparse.Namespace) -> int:
    from ._cli_cold import start_extensions
    from ._cli_output import Progress
    from .extensions._manager import ExtensionManager
    from .turn._ui_messages import new_id

    body = _parse_body(args.body)
    if args.session is None:  # one-shot: no earlier turns reach the model unless a session is named
        args.session = new_id("run")
    async with ExtensionManager(sandbox=args.sandbox) as mgr:
        with Progress() as progress:  # a spinner on a terminal while litellm imports and extensions start
            await start_extensions(mgr, args.extension, progress)
            async with _make_agent(args, mgr, stream=not args.json, progress=progress) as agent:
                result = await agent.chat(args.prompt, body=body)
                progress.stop()
                if args.json:
                    from ._cli_json import print_json, run_report

                    print_json(run_report(result, args.session))
                else:
                    _print_result(result, not args.no_trace)
                return ExitCode.OK if result.status == "completed" else ExitCode.TURN_FAILED


async def _cmd_chat(args: argparse.Namespace) -> int:
    from ._cli_chat_input import PromptLines, help_text, resume_notice
    from ._cli_cold import start_extensions
    from ._cli_interrupt import ChatInterrupts, ChatQuit
    from ._cli_output import Progress
    from .extensions._manager import ExtensionManager

    body = _parse_body(args.body)
    args.session = args.session or "cli"
    async with ExtensionManager(sandbox=args.sandbox) as mgr:
        with Progress() as progress:
            await start_extensions(mgr, args.extension, progress)
        async with _make_agent(args, mgr) as agent:
            _say(f"hookwire chat — session {args.session!r}, model {args.model}; /help for help, /quit to leave")
            notice = resume_notice(args.session, len(await agent.messages()))
            if notice:
                _say(notice)
            stdin = PromptLines()
            with ChatInterrupts() as interrupts, contextlib.suppress(ChatQuit), contextlib.closing(stdin):
                while True:
                    line = await interrupts.until_quit(stdin.read("you> "))  # Ctrl-C here: ChatQuit
                    if line is None:
                        print()
                        return 0
                    if line.strip() in ("/quit", "/exit"):
                        return 0
                    if line.strip() in ("/help", "/?"):
                        print(help_text())
                        continue
                    if not line.strip():
                        continue
                    sys.stdout.write("assistant> ")
                    try:  # Ctrl-C now aborts this turn
                        result = await agent.chat(line, body=body, signal=interrupts.turn())
                    finally:
                        interrupts.turn_signal = None
                    _print_result(result, not args.no_trace)
                    if interrupts.quit.is_set():
                        break
            print()
            return 130


async def _cmd_demo(args: argparse.Namespace) -> int:
    from ._demo import run_demo

    return await run_demo(sandbox=args.sandbox)


# ---------------------------------------------------------------------------------------------- doctor


def _cmd_doctor(as_json: bool) -> int:
    from ._cli_doctor import doctor_report, print_doctor
    from ._cli_output import rich_stdout

    report = doctor_report()
    if as_json:
        from ._cli_json import print_json

        print_json(report)
    else:
        print_doctor(report, rich=rich_stdout())
    return 0


# ---------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    from . import _cli_cold

    code = _main(argv)
    try:  # flushed here, not at interpreter exit, so a reader that left (`| head -1`) is met quietly
        sys.stdout.flush()
    except BrokenPipeError:
        code = quiet_broken_pipe()
    if _cli_cold.unfinished():  # leaving while litellm still imports in a thread: no interpreter shutdown under it
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None = None) -> int:
    rest, debug = pop_debug(sys.argv[1:] if argv is None else argv)
    rest, log_format = pop_log_format(rest)
    args = _parser().parse_args(rest if log_format is None else ["--log-format", log_format, *rest])
    args.debug = debug
    from ._logging import configure_cli_logging

    # extension stderr lines and error texts reach the log, on stderr; the format is the CLI's choice (host/_logging.py)
    configure_cli_logging(args.log_format, logging.DEBUG if args.debug else logging.WARNING)
    if not args.debug:
        from ._cli_output import show_turn_errors_once

        show_turn_errors_once()
    try:
        if getattr(args, "handler", None) is not None:  # a command registered by a module (SUBCOMMAND_MODULES)
            outcome = args.handler(args)
            return int(asyncio.run(outcome) if asyncio.iscoroutine(outcome) else outcome)
        if args.command == "ext":
            if args.ext_command == "validate":
                return _cmd_validate(args.files, args.json)
            if args.ext_command == "schema":
                return _cmd_schema()
            if args.ext_command == "new":
                return _cmd_new(args.name, args.dir)
            if args.ext_command == "test":
                return asyncio.run(_cmd_test(args))
            return asyncio.run(_cmd_list(args.extension, args.sandbox, args.json))
        if args.command in _cli_journal.COMMANDS:
            return _cli_journal.run(args)
        if args.command == "doctor":
            return _cmd_doctor(args.json)
        if args.command == "run":
            return asyncio.run(_cmd_run(args))
        if args.command == "chat":
            return asyncio.run(_cmd_chat(args))
        if args.command == "demo":
            return asyncio.run(_cmd_demo(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `hookwire doctor | head -1`: the reader left; so do we, quietly
        return quiet_broken_pipe()
    except Exception as exc:  # one clear line unless --debug
        if args.debug:
            import traceback

            traceback.print_exc()  # the traceback, and still the exit code of the error
        _say(f"hookwire: error: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    return ExitCode.USAGE


if __name__ == "__main__":
    sys.exit(main())
