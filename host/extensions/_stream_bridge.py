"""The HostBridge on the Connect stream: answering `bridge_request` frames from an extension.

A remote extension cannot reach the host's Unix-socket HostBridge, so its bridge calls ride the Connect stream it
already has (proto: `ExtensionFrame.bridge_request` / `HostFrame.bridge_response`). Each call is answered by the
very servicer of host/extensions/_bridge_server.py: same permission gates, same session routing, same audit lines (rate limit
included). Only the caller's identity differs: on the stream it is the connection itself, so each stream bridge
registers its extension's manifest under a fresh random key that never leaves this process (a remote endpoint's
manifest token may be shared by several manifests, or known to someone else: it identifies nothing here).

At most MAX_INFLIGHT calls per extension run at once; more are refused at once with RESOURCE_EXHAUSTED (a flood
costs the flooder, never the turn).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

import grpc

from extension_sdk.proto import TOKEN_METADATA_KEY
from extension_sdk.proto import host_bridge_pb2 as hb

from ._bridge_server import HostBridgeServer, _Servicer
from ._manifest import Manifest
from ._trace_metadata import TRACEPARENT_KEY, TRACESTATE_KEY

log = logging.getLogger("hookwire.bridge")

MAX_INFLIGHT = 64

# BridgeRequest.call field -> the HostBridge method that serves it (the BridgeResponse.result field has its name)
_METHODS = {
    "read_file": "ReadFile",
    "list_files": "ListFiles",
    "write_file": "WriteFile",
    "delete_file": "DeleteFile",
    "get_messages": "GetMessages",
    "get_context": "GetContext",
    "set_context": "SetContext",
    "send_message": "SendMessage",
    "get_session_info": "GetSessionInfo",
}


class _StreamAbort(grpc.aio.AbortError):
    """What the servicer's `context.abort` raises for a call that came as a frame."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _FrameContext:
    """The slice of grpc.aio.ServicerContext the bridge servicer uses, for a call that came as a frame."""

    __slots__ = ("_metadata",)

    def __init__(self, key: str, traceparent: str = "", tracestate: str = "") -> None:
        self._metadata: tuple[tuple[str, str], ...] = ((TOKEN_METADATA_KEY, key),)
        if traceparent:  # the request's trace context, as the Unix-socket bridge gets it in metadata
            self._metadata += ((TRACEPARENT_KEY, traceparent), (TRACESTATE_KEY, tracestate))

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    async def abort(self, code: grpc.StatusCode, details: str = "") -> None:
        raise _StreamAbort(code, details)


class StreamBridge:
    """Answers one extension's bridge frames through `bridge` (created by the manager; it need not listen)."""

    def __init__(self, bridge: HostBridgeServer, manifest: Manifest) -> None:
        self._bridge = bridge
        self._key = secrets.token_urlsafe(32)
        self._context = _FrameContext(self._key)
        self._servicer = _Servicer(bridge)
        self._name = manifest.name
        self._inflight = 0
        bridge.register_extension(self._key, manifest)

    def close(self) -> None:
        self._bridge.unregister_extension(self._key)

    async def answer(self, request: hb.BridgeRequest) -> hb.BridgeResponse:
        """The response frame body for one request (never raises: a failure is a status code in the response)."""
        kind = request.WhichOneof("call")
        method = _METHODS.get(kind or "")
        if method is None:
            return hb.BridgeResponse(id=request.id, code=grpc.StatusCode.UNIMPLEMENTED.value[0],
                                     message=f"bridge_request {request.id}: no call (or one this host does not know)")
        if self._inflight >= MAX_INFLIGHT:
            log.warning("extension %r: more than %d HostBridge calls in flight on its stream: %s refused",
                        self._name, MAX_INFLIGHT, method)
            return hb.BridgeResponse(id=request.id, code=grpc.StatusCode.RESOURCE_EXHAUSTED.value[0],
                                     message=f"{method}: more than {MAX_INFLIGHT} HostBridge calls in flight")
        self._inflight += 1
        try:
            context = _FrameContext(self._key, request.traceparent, request.tracestate) if request.traceparent \
                else self._context
            result: Any = await getattr(self._servicer, method)(getattr(request, kind), context)
        except _StreamAbort as exc:
            return hb.BridgeResponse(id=request.id, code=exc.code.value[0], message=exc.details)
        except Exception as exc:  # noqa: BLE001 - a host bug must not break the extension's stream
            log.exception("HostBridge %s for extension %r (stream) failed", method, self._name)
            return hb.BridgeResponse(id=request.id, code=grpc.StatusCode.INTERNAL.value[0],
                                     message=f"{method} failed: {type(exc).__name__}: {exc}")
        finally:
            self._inflight -= 1
        response = hb.BridgeResponse(id=request.id)
        getattr(response, kind).CopyFrom(result)
        return response


class StreamBridges:
    """The manager's stream bridges, one per extension (replaced when it restarts, released when it stops)."""

    def __init__(self) -> None:
        self._by_extension: dict[str, StreamBridge] = {}

    def open(self, bridge: HostBridgeServer, name: str, manifest: Manifest) -> StreamBridge:
        self.release(name)
        handler = self._by_extension[name] = StreamBridge(bridge, manifest)
        return handler

    def release(self, name: str) -> None:
        handler = self._by_extension.pop(name, None)
        if handler is not None:
            handler.close()
