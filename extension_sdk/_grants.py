"""`Grants`: what the host says this extension's manifest grants it (from `DescribeRequest.granted`).

    @ext.tool(description="Saves a note")
    def save(args, host):
        if ext.granted is None or ext.granted.workspace != "read-write":
            return "saving needs permissions.workspace: read-write"
        ...
"""

from __future__ import annotations

from dataclasses import dataclass

from .proto import extension_pb2 as pb


@dataclass(frozen=True)
class Grants:
    """The extension's permissions as the host enforces them (manifest `permissions`)."""

    workspace: str = "none"  # "none" | "read" | "read-write"
    messages: str = "none"  # "none" | "read"
    context_read: tuple[str, ...] = ()  # labels; ("all",) or ("own",) for those keywords
    context_write: tuple[str, ...] = ()
    send_message: bool = False
    session_metadata: bool = False
    network: tuple[str, ...] = ()  # hosts reachable through the egress proxy; empty: no network
    turn_config: tuple[str, ...] = ()  # camelCase TurnConfig fields beforeTurn may set
    decisions: bool = False  # beforeToolCall decisions are honoured
    host_bridge: bool = False  # a HostBridge client is available (HOOKWIRE_HOST_ADDRESS)
    tool_phase: str = ""  # a decider's beforeToolCall phase: "mutate" | "validate" ("" when not a decider)
    shadow_hooks: tuple[str, ...] = ()  # hooks in shadow mode: called live, nothing they return is applied

    @classmethod
    def from_proto(cls, granted: pb.Grants) -> Grants:
        return cls(
            workspace=granted.workspace or "none",
            messages=granted.messages or "none",
            context_read=tuple(granted.context_read),
            context_write=tuple(granted.context_write),
            send_message=granted.send_message,
            session_metadata=granted.session_metadata,
            network=tuple(granted.network),
            turn_config=tuple(granted.turn_config),
            decisions=granted.decisions,
            host_bridge=granted.host_bridge,
            tool_phase=granted.tool_phase,
            shadow_hooks=tuple(granted.shadow_hooks),
        )
