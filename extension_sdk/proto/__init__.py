"""Generated protobuf and gRPC modules for hookwire.v1 (do not edit: `make proto` writes them).

    from extension_sdk.proto import extension_pb2, extension_pb2_grpc, host_bridge_pb2, host_bridge_pb2_grpc
"""

from . import extension_pb2, extension_pb2_grpc, host_bridge_pb2, host_bridge_pb2_grpc

# The one copy of every constant both sides of the wire share (host and SDK import them from here).
PROTOCOL_VERSION = "1"
HANDSHAKE_MAGIC = "hookwire"  # the first word of the handshake line an extension prints on stdout
TOKEN_METADATA_KEY = "x-hookwire-token"
MAGIC_COOKIE = "hookwire-extension-v1"  # HOOKWIRE_MAGIC_COOKIE: proves the process was started by a host
HOOK_NAMES: tuple[str, ...] = ("beforeTurn", "beforeToolCall", "afterToolCall", "onStepFinish", "onChunk")
# Connect-stream metadata from a host that answers HostBridge calls as frames on that stream.
BRIDGE_METADATA_KEY = "x-hookwire-bridge"
BRIDGE_ON_STREAM = "frames"

__all__ = [
    "BRIDGE_METADATA_KEY",
    "BRIDGE_ON_STREAM",
    "HANDSHAKE_MAGIC",
    "HOOK_NAMES",
    "MAGIC_COOKIE",
    "PROTOCOL_VERSION",
    "TOKEN_METADATA_KEY",
    "extension_pb2",
    "extension_pb2_grpc",
    "host_bridge_pb2",
    "host_bridge_pb2_grpc",
]
