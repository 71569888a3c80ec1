"""The clauses of docs/protocol.md the conformance kit checks: one id and title each, in the page's order."""

from __future__ import annotations

from typing import NamedTuple


class Clause(NamedTuple):
    """One numbered rule of docs/protocol.md (its id is the bold `[n.m]` marker on that page)."""

    id: str
    title: str


CLAUSES: tuple[Clause, ...] = (
    Clause("1.1", "handshake: one stdout line hookwire|1|unix:$HOOKWIRE_SOCKET"),
    Clause("1.2", "start: handshake within timeouts.startMs"),
    Clause("1.3", "stdout: nothing printed after the handshake line"),
    Clause("1.4", "lifeline: exits when stdin reaches EOF"),
    Clause("1.5", "Shutdown: answered, then the process exits within grace_ms"),
    Clause("1.6", "magic cookie: started without HOOKWIRE_MAGIC_COOKIE, no handshake and a non-zero exit"),
    Clause("2.1", "token: a call without x-hookwire-token is UNAUTHENTICATED"),
    Clause("2.2", "token: a call with a wrong x-hookwire-token is UNAUTHENTICATED"),
    Clause("2.3", "health: grpc.health.v1.Health/Check answers without a token"),
    Clause("3.1", "Describe: protocol_version 1, name, version, known and consistent features"),
    Clause("3.2", "Describe: hooks are known camelCase hook names, each once"),
    Clause("3.3", "Describe: tools have unique names and valid JSON Schema inputs"),
    Clause("4.1", "unary: each served awaited hook answers (handler failures as HookError, not a status)"),
    Clause("4.2", "unary: Observe acknowledges a batch with handled = its item count"),
    Clause("4.3", "Connect: every frame with an id is answered once, with its id and kind; id-0 frames never"),
    Clause("4.4", "Connect: frames handled in order; an ack's handled counts every observation since the last ack"),
    Clause("4.5", "Connect: a prelude is handled before its frame and counted in the next ack"),
    Clause("4.6", "multi-batch: an observations frame's more_observations are handled and counted in its ack"),
    Clause("5.1", "ExecuteTool: preliminaries, then exactly one output_json or error, then the end"),
    Clause("5.2", "ExecuteTool: an unknown tool is an error event (HookError hook \"tool\"), not a status"),
    Clause("5.3", "connect-tools: execute_tool answered by tool_event frames of its id ending in one final event"),
    Clause("5.4", "connect-tools: a running tool call does not hold up the frames after it"),
    Clause("5.5", "connect-tools: a cancel frame (id 0) gets no answer and the stream goes on"),
)

CLAUSE_IDS: tuple[str, ...] = tuple(c.id for c in CLAUSES)
TITLES: dict[str, str] = {c.id: c.title for c in CLAUSES}
