"""What a manifest grants its extension, as the `Grants` the host sends in `DescribeRequest.granted`.

So an extension learns its permissions from the host (docs/protocol.md §3) instead of probing the HostBridge by trial.
"""

from __future__ import annotations

from extension_sdk.proto import HOOK_NAMES
from extension_sdk.proto import extension_pb2 as pb

from ._manifest import Manifest


def _labels(rule: list[str] | str) -> list[str]:
    return [rule] if isinstance(rule, str) else list(rule)


def grants_to_proto(manifest: Manifest) -> pb.Grants:
    """The manifest's permissions (and hooks.beforeToolCall decisions and phase, hooks in shadow mode) as the wire
    message."""
    p = manifest.permissions
    return pb.Grants(
        workspace=p.workspace,
        messages=p.messages,
        context_read=_labels(p.context.read),
        context_write=_labels(p.context.write),
        send_message=p.session.send_message,
        session_metadata=p.session.metadata,
        network=list(p.network),
        turn_config=list(p.turn_config),
        decisions=manifest.hook_policy("beforeToolCall").decisions,
        host_bridge=p.grants_bridge(),
        tool_phase=manifest.tool_phase() if manifest.hook_policy("beforeToolCall").decisions else "",
        shadow_hooks=[h for h in HOOK_NAMES if manifest.hook_mode(h) == "shadow"],
    )
