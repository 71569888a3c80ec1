"""The largest reply the host accepts (16 MiB, its gRPC receive limit): an oversized reply becomes that call's
error here, before it is sent, so the stream it would travel on (and every other call on it) stays usable."""

from __future__ import annotations

from typing import Any

from ._convert import UnconvertibleValue, encode_json
from .proto import extension_pb2 as pb

MAX_REPLY_BYTES = 16 * 1024 * 1024  # the host's gRPC max receive length for one message from an extension
# Room for the envelope around a payload (the ExtensionFrame's id and oneof tags, the ToolEvent's field tag).
_ENVELOPE_BYTES = 64
MAX_PAYLOAD_BYTES = MAX_REPLY_BYTES - _ENVELOPE_BYTES


class ReplyTooLarge(ValueError):
    """A handler's reply is larger than the host accepts in one message."""


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB"


def too_large(what: str, size: int) -> ReplyTooLarge:
    return ReplyTooLarge(
        f"{what} is {_mib(size)} ({size} bytes); the most one reply may carry is {_mib(MAX_PAYLOAD_BYTES)} "
        f"({MAX_PAYLOAD_BYTES} bytes): return less, or write it to the workspace and return its path"
    )


def tool_value_json(tool: str, value: Any, preliminary: bool) -> str:
    """A tool's output (or preliminary) as JSON text within the reply limit; otherwise the error says why."""
    what = f"tool {tool!r} {'preliminary result' if preliminary else 'output'}"
    try:
        text = encode_json(value)
    except UnconvertibleValue as exc:
        raise UnconvertibleValue(f"{what}: {exc}") from None
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_PAYLOAD_BYTES:
        raise too_large(what, size)
    return text


def bounded(reply: Any, hook: str) -> Any:
    """`reply` (a hook's response message) when it fits; otherwise the same kind of response carrying only a
    `ReplyTooLarge` error for `hook`."""
    size = reply.ByteSize()
    if size <= MAX_PAYLOAD_BYTES:
        return reply
    error = pb.HookError(hook=hook, name="ReplyTooLarge", message=str(too_large(f"the {hook} reply", size)))
    if isinstance(reply, pb.ObservationAck):
        return pb.ObservationAck(handled=reply.handled, errors=[error])
    return type(reply)(error=error)
