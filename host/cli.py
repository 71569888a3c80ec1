"""The `hookwire` command: run turns with extensions, validate and inspect manifests, diagnose the machine.

    hookwire run "PROMPT" -e MANIFEST... [--model ID] [--session ID] [--store FILE|URL] [--workspace DIR] [--body JSON]
                                         (one-shot: a fresh session unless --session names one)
    hookwire chat -e MANIFEST... [--session ID] [--store FILE|URL]  (Ctrl-C aborts the running turn; at the prompt, quits)
    hookwire ext validate FILE...
    hookwire ext list -e MANIFEST...
    hookwire ext schema
    hookwire ext new NAME [--dir DIR]
    hookwire ext test MANIFEST [--json] [--endpoint TARGET] [--tool-input NAME=JSON]... [--sandbox MODE]
    hookwire doctor

Errors are one clear line on stderr (exit 1; 2 for usage), a traceback only with --debug.
What came from an extension, a manifest or a model is printed through host._terminal_text.terminal_safe (no
terminal escape sequences, no bidi overrides), log lines too.
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

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = "hookwire/scripted"


def _say(text: str, *, file: Any = None) -> None:
    """print() for text that holds untrusted parts (extension, manifest or model output)."""
    from ._terminal_text import terminal_safe

    print(terminal_safe(text), file=file if file is not None else sys.stdout)


class CliError(Exception):
    """An error to show as one line, without a traceback."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hookwire", description="Run LLM chat turns with out-of-process extensions.")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    p.add_argument("--log-format", choices=("text", "json"), default=None,
                   help="log lines on stderr: text, or one JSON object per line (default: $HOOKWIRE_LOG_FORMAT, else text)")
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
    chat = sub.add_parser("chat", help="an interactive chat; history is kept in the store")
    turn_options(chat)
    demo = sub.add_parser("demo", help="a tour: real turns with the sample extensions on the embedded model")
    demo.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")

    ext = sub.add_parser("ext", help="work with extension manifests").add_subparsers(
        dest="ext_command", required=True, metavar="SUBCOMMAND"
    )
    validate = ext.add_parser("validate", help="validate manifest files")
    validate.add_argument("files", nargs="+")
    lst = ext.add_parser("list", help="start extensions and show their state, hooks, tools and permissions")
    lst.add_argument("-e", "--extension", action="append", default=[], metavar="MANIFEST", required=True)
    lst.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")
    lst.add_argument("--json", action="store_true", help="machine-readable output")
    ext.add_parser("schema", help="print the manifest JSON Schema")
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

    sub.add_parser("doctor", help="versions and which sandbox layers this machine can enforce")
    _cli_journal.register(sub)  # journal show|verify, replay (host/_cli_journal.py)
    return p


# ----------------------------------------------------------------------------------------------- ext


def _cmd_validate(files: Sequence[str]) -> int:
    from ._errors import ManifestError
    from .extensions._manifest import load_manifest

    failed = 0
    for file in files:
        try:
            m = load_manifest(file)
        except ManifestError as exc:
            failed += 1
            _say(f"invalid  {exc}", file=sys.stderr)
        else:
            target = " ".join(m.command) if m.command else m.endpoint
            _say(f"ok       {file}: {m.name} {m.version} ({target})")
    return 1 if failed else 0


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
            print(json.dumps([i.model_dump(mode="json", by_alias=True) for i in infos], indent=2))
            return 0
        for info in infos:
            data = info.model_dump(mode="json", by_alias=True)
            _say(f"{data.get('name')} {data.get('version', '')}  [{data.get('state', '?')}]  pid {data.get('pid')}")
            for key in ("description", "hooks", "tools", "features", "permissions", "sandbox", "sandbox_missing"):
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
            raise CliError(f"--tool-input {pair!r}: expected NAME=JSON")
        try:
            out[name] = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CliError(f"--tool-input {name}: not valid JSON: {exc}") from None
    return out


async def _cmd_test(args: argparse.Namespace) -> int:
    from .conformance import run_conformance
    from .extensions._manifest import ManifestError

    inputs = _tool_inputs(args.tool_input)
    try:
        report = await run_conformance(args.manifest, sandbox=args.sandbox, endpoint=args.endpoint,
                                       tool_inputs=inputs)
    except ManifestError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _say(report.to_json())
    else:
        _say(report.to_text())
    return 0 if report.passed else 1


# ---------------------------------------------------------------------------------------------- turns


def _make_agent(args: argparse.Namespace, manager: Any, *, stream: bool = True) -> Any:
    from ._trace_format import render_chunk
    from .turn._agent import Agent

    class CliAgent(Agent):
        def on_chunk(self, ctx: Any) -> None:
            if stream:
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
        raise CliError(f"--body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise CliError("--body must be a JSON object")
    return body


def _print_result(result: Any, show_trace: bool) -> None:
    from ._trace_format import format_trace

    print()
    status = getattr(result, "status", "?")
    if status != "completed":
        _say(f"[turn {status}{': ' + result.error if getattr(result, 'error', None) else ''}]")
    failed_open = getattr(result, "failed_open", None)
    if failed_open:
        _say(f"[went on although these extensions failed open: {', '.join(failed_open)}]")
    denied = getattr(result, "denied", None)
    if denied:  # the beforeTurn trust boundary (permissions.turnConfig, request-option policy): see the trace
        _say(f"[refused from extensions' beforeTurn: {', '.join(f'{d.extension}: {d.field}' for d in denied)}]")
    if show_trace:
        print(format_trace(result.trace, result.provenance))


async def _cmd_run(args: argparse.Namespace) -> int:
    from .extensions._manager import ExtensionManager
    from .turn._ui_messages import new_id

    body = _parse_body(args.body)
    if args.session is None:  # one-shot: no earlier turns reach the model unless a session is named
        args.session = new_id("run")
    async with ExtensionManager(sandbox=args.sandbox) as mgr:
        await mgr.load_all(args.extension)
        async with _make_agent(args, mgr) as agent:
            result = await agent.chat(args.prompt, body=body)
            _print_result(result, not args.no_trace)
            return 0 if result.status == "completed" else 1


async def _cmd_chat(args: argparse.Namespace) -> int:
    from ._cli_interrupt import ChatInterrupts, ChatQuit, StdinLines
    from .extensions._manager import ExtensionManager

    body = _parse_body(args.body)
    args.session = args.session or "cli"
    async with ExtensionManager(sandbox=args.sandbox) as mgr:
        await mgr.load_all(args.extension)
        async with _make_agent(args, mgr) as agent:
            print(f"hookwire chat — session {args.session!r}, model {args.model}; /quit, Ctrl-D or Ctrl-C to leave")
            stdin = StdinLines()
            with ChatInterrupts() as interrupts, contextlib.suppress(ChatQuit):
                while True:
                    sys.stdout.write("you> ")
                    sys.stdout.flush()
                    line = await interrupts.until_quit(stdin.readline())  # Ctrl-C here: ChatQuit
                    if line is None:
                        print()
                        return 0
                    if line.strip() in ("/quit", "/exit"):
                        return 0
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


def _cmd_doctor() -> int:
    import platform
    from importlib import metadata

    from extension_sdk.proto import PROTOCOL_VERSION

    print(f"hookwire protocol   v{PROTOCOL_VERSION}")
    print(f"python              {platform.python_version()} ({sys.executable})")
    for dist in ("hookwire", "grpcio", "protobuf", "pydantic", "litellm", "PyYAML"):
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "not installed"
        print(f"{dist:<19} {version}")
    print(f"platform            {platform.system()} {platform.release()} {platform.machine()}, euid {os.geteuid()}")
    try:
        from .sandbox._plan import sandbox_capabilities
    except ImportError:
        print("sandbox             (sandbox module not available)")
        return 0
    caps = sandbox_capabilities()
    print("sandbox layers this machine can enforce:")
    for layer, state in caps.get("layers", {}).items():
        mark = "yes" if state.get("available") else "NO "
        print(f"  {mark}  {layer:<18} {state.get('detail', '')}")
    print("(`sandbox: auto` applies every available layer; `sandbox: required` refuses an extension whose")
    print(" isolation can't be enforced. A `permissions.network` host list needs egress_proxy in both modes:")
    print(" without it the extension is refused, never given the whole network.)")
    return 0


# ---------------------------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from ._logging import apply_cli_format
    from ._terminal_text import TerminalSafeFormatter

    handler = logging.StreamHandler(sys.stderr)  # extension stderr lines and error texts reach the log
    handler.setFormatter(TerminalSafeFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, handlers=[handler])
    apply_cli_format(handler, args.log_format)  # host/_logging.py
    try:
        if args.command == "ext":
            if args.ext_command == "validate":
                return _cmd_validate(args.files)
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
            return _cmd_doctor()
        if args.command == "run":
            return asyncio.run(_cmd_run(args))
        if args.command == "chat":
            return asyncio.run(_cmd_chat(args))
        if args.command == "demo":
            return asyncio.run(_cmd_demo(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line unless --debug
        if args.debug:
            raise
        _say(f"hookwire: error: {exc}", file=sys.stderr)
        return 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
