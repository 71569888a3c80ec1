"""Which session and turn the hook or tool call being served belongs to: `extension_sdk.current_call()`."""

from __future__ import annotations

import contextvars
from typing import NamedTuple

from .proto import extension_pb2 as pb


class CallInfo(NamedTuple):
    session_id: str
    request_id: str


_current: contextvars.ContextVar[CallInfo] = contextvars.ContextVar("hookwire_current_call", default=CallInfo("", ""))


def current_call() -> CallInfo:
    """The session and request of the hook or tool call in progress (empty strings outside one).

    Works in sync and async handlers, including sync tools running in worker threads.
    """
    return _current.get()


def set_current_call(context: pb.CallContext) -> None:
    _current.set(CallInfo(context.session_id, context.request_id))
