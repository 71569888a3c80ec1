"""The journal tap: sees every awaited hook call at the dispatcher's call seam, for the decision journal.

`JournalTap.install(dispatcher)` wraps the dispatcher's one awaited-call function (`Dispatcher._call`). For a call
whose session has a sink attached (an Agent with a store: host/turn/_journal_writer.py), the tap hands the sink a
`HookRecord` after the call — the exact snapshot message the extension received, and its answer (a reply frame, or
the failure) — without waiting for the store. Sessions without a sink cost one dict lookup.

Reuse (a resumed durable submission): before a beforeToolCall decider is asked, the sink may return a reply
journaled for the same call by an earlier attempt of the submission; the tap then answers with it instead of
asking the extension, and traces the call as reused. The dispatch rules run on it exactly as on a live answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from extension_sdk.proto import extension_pb2 as pb

from ._snapshots import CallContext

if TYPE_CHECKING:
    from ._dispatch import Dispatcher, Failure, HookCall, Reply
    from ._state import ExtensionRuntime

log = logging.getLogger("hookwire.extensions")


@dataclass(frozen=True, slots=True)
class HookRecord:
    """One awaited hook call as the journal needs it (converted to an entry off the hook path)."""

    extension: str
    extension_version: str
    hook: str
    mode: str
    phase: str
    context: CallContext
    snapshot: Any  # the snapshot message (protobuf) the extension received
    answer: Reply | Failure
    reused_from: int | None = None


@dataclass(frozen=True, slots=True)
class Reused:
    """A verdict journaled earlier for this call: the reply to answer with, and the entry it came from."""

    frame: pb.ExtensionFrame
    seq: int


class JournalSink(Protocol):
    def record(self, record: HookRecord) -> None: ...

    def wants_reuse(self, request_id: str) -> bool: ...

    async def reusable(self, ext: str, version: str, hook: str, request_id: str, snapshot: Any) -> Reused | None: ...


def hook_mode(ext: ExtensionRuntime, hook: str) -> str:
    """The extension's mode for `hook` ("enforce" | "shadow"): the hook's own, else the extension's."""
    return ext.manifest.hook_mode(hook)


def hook_phase(ext: ExtensionRuntime, hook: str) -> str:
    """beforeToolCall's phase ("mutate" | "validate", default validate); "" for other hooks."""
    if hook != "beforeToolCall":
        return ""
    return ext.manifest.tool_phase()


class JournalTap:
    """Routes awaited hook calls of sessions with a journal to their sink (see the module doc)."""

    def __init__(self, trace: Callable[..., None]) -> None:
        self._sinks: dict[str, JournalSink] = {}
        self._trace = trace

    def attach(self, session_id: str, sink: JournalSink) -> None:
        self._sinks[session_id] = sink

    def detach(self, session_id: str, sink: JournalSink) -> None:
        if self._sinks.get(session_id) is sink:
            del self._sinks[session_id]

    def install(self, dispatcher: Dispatcher) -> None:
        dispatcher._call = self.wrap(dispatcher._call)

    def wrap(self, call: HookCall) -> HookCall:
        sinks = self._sinks

        def tapped(ext: ExtensionRuntime, hook: str, frame: pb.HostFrame, context: CallContext | None,
                   deadline: float | None) -> Awaitable[Reply | Failure]:
            sink = sinks.get(context.session_id) if context is not None and sinks else None
            if sink is None:  # the call itself: no coroutine of the tap's around it (this is on every awaited hook)
                return call(ext, hook, frame, context, deadline)
            assert context is not None
            return journaled(sink, ext, hook, frame, context, deadline)

        async def journaled(sink: JournalSink, ext: ExtensionRuntime, hook: str, frame: pb.HostFrame,
                            context: CallContext, deadline: float | None) -> Reply | Failure:
            body = frame.WhichOneof("body")
            snapshot = getattr(getattr(frame, body), "snapshot", None) if body else None
            version = ext.manifest.version
            if hook == "beforeToolCall" and snapshot is not None and sink.wants_reuse(context.request_id):
                try:
                    found = await sink.reusable(ext.name, version, hook, context.request_id, snapshot)
                except Exception:  # noqa: BLE001 - the journal must not break a turn: ask the extension instead
                    log.exception("journal: looking up a reusable verdict failed; asking extension %r", ext.name)
                    found = None
                if found is not None:
                    from ._dispatch import Reply

                    self._trace(hook, ext.name, "ok", context=context,
                                detail=f"reused: the verdict journaled in entry {found.seq} (not asked again)")
                    answer: Reply | Failure = Reply(found.frame, 0.0)
                    sink.record(HookRecord(ext.name, version, hook, hook_mode(ext, hook), hook_phase(ext, hook),
                                           context, snapshot, answer, reused_from=found.seq))
                    return answer
            answer = await call(ext, hook, frame, context, deadline)
            if snapshot is not None:
                sink.record(HookRecord(ext.name, version, hook, hook_mode(ext, hook), hook_phase(ext, hook),
                                       context, snapshot, answer))
            return answer

        return tapped
