"""The CLI's decision-journal commands: `hookwire journal show|verify` and `hookwire replay`.

    hookwire journal show --session S [--json] [--snapshots] [--store URL]
    hookwire journal verify [--session S] [--json] [--store URL]
    hookwire replay --session S --against MANIFEST [--as NAME] [--json] [--sandbox MODE] [--store URL]

Exit codes: 0 — shown / every chain intact / every replayed answer the same; 1 — a chain is broken (verify) or an
answer differs (replay); 2 — the command could not do its job (no such store, session or entries, the extension
did not start, a store error). host/cli.py registers these with `register(subparsers)` and runs them with `run`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from ._terminal_text import terminal_safe

COMMANDS = ("journal", "replay")
EXIT_OK, EXIT_DIFFERS, EXIT_ERROR = 0, 1, 2


def _store_option(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--store", default=os.environ.get("HOOKWIRE_STORE") or ".hookwire/sessions.db",
                    help="the store to read: a SQLite file or a postgresql:// URL "
                    "(default: $HOOKWIRE_STORE, else .hookwire/sessions.db)")


def register(sub: Any) -> None:
    """Add `journal` and `replay` to the CLI's subcommands."""
    journal = sub.add_parser("journal", help="the decision journal: every awaited hook outcome, hash-chained")
    jsub = journal.add_subparsers(dest="journal_command", required=True, metavar="COMMAND")
    show = jsub.add_parser("show", help="print a session's journal entries")
    show.add_argument("--session", required=True)
    show.add_argument("--json", action="store_true", help="the entries as JSON")
    show.add_argument("--snapshots", action="store_true", help="with --json: include each kept snapshot")
    _store_option(show)
    verify = jsub.add_parser("verify", help="check the hash chain; names the first broken entry (exit 1)")
    verify.add_argument("--session", default=None, help="one session (default: every session in the store)")
    verify.add_argument("--json", action="store_true")
    _store_option(verify)
    replay = sub.add_parser("replay", help="re-send a session's journaled snapshots to an extension and compare "
                            "its answers (exit 1 when any differs)")
    replay.add_argument("--session", required=True)
    replay.add_argument("--against", required=True, metavar="MANIFEST", help="the extension to ask (e.g. a new "
                        "version)")
    replay.add_argument("--as", dest="as_name", default=None, metavar="NAME",
                        help="compare with the journaled answers of extension NAME (default: the manifest's name)")
    replay.add_argument("--json", action="store_true")
    replay.add_argument("--sandbox", choices=["auto", "off", "required"], default="auto")
    _store_option(replay)


def run(args: argparse.Namespace) -> int:
    """Run a journal/replay command; its exit code (see the module doc)."""
    try:
        return asyncio.run(_run(args))
    except _Fail as exc:
        _say(f"hookwire: error: {exc}", sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - a store or start failure: one line, exit 2
        if getattr(args, "debug", False):
            raise
        _say(f"hookwire: error: {exc}", sys.stderr)
        return EXIT_ERROR


class _Fail(Exception):
    pass


def _say(text: str, file: Any = None) -> None:
    print(terminal_safe(text), file=file if file is not None else sys.stdout)


def _open(spec: str) -> Any:
    from .turn._pg_store import is_postgres_url
    from .turn._store_backends import open_store

    if not is_postgres_url(spec) and not Path(spec).exists():
        raise _Fail(f"no store at {spec} (pass --store, or set HOOKWIRE_STORE)")
    return open_store(spec)


async def _run(args: argparse.Namespace) -> int:
    store = _open(args.store)
    try:
        if args.command == "replay":
            return await _replay(store, args)
        if args.journal_command == "show":
            return await _show(store, args)
        return await _verify(store, args)
    finally:
        await store.close()


async def _show(store: Any, args: argparse.Namespace) -> int:
    rows = await store.journal(args.session)
    if args.json:
        out = []
        for row in rows:
            item = row.parsed().model_dump()
            if args.snapshots:
                item["snapshot"] = json.loads(row.snapshot) if row.snapshot is not None else None
            out.append(item)
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        raise _Fail(f"session {args.session!r} has no journal entries in this store")
    request = None
    for row in rows:
        e = row.parsed()
        if e.request_id != request:
            request = e.request_id
            sub = f"  (submission {e.submission_id})" if e.submission_id else ""
            _say(f"turn {request}{sub}")
        verdict = e.outcome
        if e.hook == "beforeTurn" and e.outcome == "ok":
            fields = sorted(e.decision.get("set") or {})
            verdict = "set " + ", ".join(fields) if fields else "set nothing"
        elif e.hook == "beforeToolCall" and e.outcome == "allow" and "input" in e.decision:
            verdict = "allow with a new input"
        if e.mode == "shadow" and e.outcome not in ("error", "timeout"):
            verdict = f"would {verdict} (shadow)"
        call = f" {e.call_id}" if e.call_id else ""
        reused = f" reused from entry {e.reused_from}" if e.reused_from is not None else ""
        reason = f"  \"{e.reason}\"" if e.reason else ""
        _say(f"  #{e.seq:<4} {e.hook}{call}  {e.extension}@{e.extension_version}  {verdict}{reason}  "
             f"{e.latency_ms:.1f} ms{reused}  snapshot {e.snapshot_sha256[:12]}")
    return EXIT_OK


async def _verify(store: Any, args: argparse.Namespace) -> int:
    from .turn._journal import verify_chain

    rows = await store.journal(args.session)
    sessions: dict[str, list[Any]] = {}
    for row in rows:
        sessions.setdefault(row.session_id, []).append(row)
    if args.session is not None and not rows:
        raise _Fail(f"session {args.session!r} has no journal entries in this store")
    results = []
    for sid, session_rows in sessions.items():
        broken, head = verify_chain(session_rows)
        results.append({"session": sid, "entries": len(session_rows), "intact": broken is None, "head": head,
                        "broken_entry": broken.seq if broken else None, "problem": broken.problem if broken else ""})
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            if r["intact"]:
                _say(f"session {r['session']}: {r['entries']} entries, chain intact, head {r['head']}")
            else:
                _say(f"session {r['session']}: entry {r['broken_entry']} is broken: {r['problem']}")
    return EXIT_OK if all(r["intact"] for r in results) else EXIT_DIFFERS


async def _replay(store: Any, args: argparse.Namespace) -> int:
    from ._replay import ReplayError, replay

    try:
        report = await replay(store, args.session, args.against, as_name=args.as_name, sandbox=args.sandbox)
    except ReplayError as exc:
        raise _Fail(str(exc)) from None
    if args.json:
        print(json.dumps(report.model_dump(), indent=2, ensure_ascii=False))
    else:
        _say(f"replay of session {report.session_id}: {report.extension}'s journaled answers against "
             f"{report.against}")
        if report.chain_broken:
            _say(f"warning: the session's journal chain is broken ({report.chain_broken}); `hookwire journal "
                 "verify` says more", sys.stderr)
        for turn in report.turns:
            _say(f"turn {turn.request_id}: {'same' if turn.same else 'differs'}")
            for item in turn.items:
                call = f" {item.call_id}" if item.call_id else ""
                reason = f"  \"{item.reason}\"" if item.reason and not item.same else ""
                _say(f"  #{item.seq:<4} {item.hook}{call}: {item.verdict}  (was {item.was}, now {item.now}){reason}")
        for note in report.skipped:
            _say(f"not replayed: {note}")
        _say(f"{report.differs} answer(s) differ" if report.differs else "every answer is the same")
    return EXIT_DIFFERS if report.differs else EXIT_OK
