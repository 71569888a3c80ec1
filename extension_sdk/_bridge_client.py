"""HostBridge client: what a handler's `host` argument is.

One `HostConnection` per extension process holds the channels (an asyncio channel for async
handlers, created lazily on the serving loop, and a separate blocking channel for sync handlers,
created lazily on first use). `Host` / `SyncHost` are cheap views bound to the session of the call
in progress; every call carries the extension's token and that session id, and the trace context of the handler
(W3C `traceparent` metadata: the host's `hookwire.bridge {method}` span is its child).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import grpc
import grpc.aio

from ._call_context import trace_metadata
from .proto import TOKEN_METADATA_KEY
from .proto import host_bridge_pb2 as hb
from .proto import host_bridge_pb2_grpc as hb_grpc

_MAX_MESSAGE = 64 * 1024 * 1024
_OPTIONS = [
    ("grpc.max_receive_message_length", _MAX_MESSAGE),
    ("grpc.max_send_message_length", _MAX_MESSAGE),
]


class HostError(RuntimeError):
    """A HostBridge call failed; `code` is the gRPC status code name (e.g. "PERMISSION_DENIED")."""

    def __init__(self, method: str, code: str, details: str) -> None:
        super().__init__(f"host bridge {method} failed: {code}: {details}")
        self.method = method
        self.code = code
        self.details = details


def _host_error(method: str, err: grpc.RpcError) -> HostError:
    code = err.code() if hasattr(err, "code") else None
    details = err.details() if hasattr(err, "details") else str(err)
    return HostError(method, code.name if code is not None else "UNKNOWN", details or "")


def _as_bytes(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else bytes(content)


def _entries(resp: hb.ListFilesResponse) -> list[dict[str, Any]]:
    return [{"path": e.path, "isDir": e.is_dir, "size": e.size} for e in resp.entries]


def _session_info(resp: hb.GetSessionInfoResponse) -> dict[str, Any]:
    return {
        "sessionId": resp.session_id,
        "messageCount": resp.message_count,
        "modelId": resp.model_id,
        "metadata": json.loads(resp.metadata_json) if resp.metadata_json else {},
    }


class HostConnection:
    """The channels to the host's HostBridge (one per extension process)."""

    def __init__(self, target: str, token: str) -> None:
        self.target = target
        self._metadata = ((TOKEN_METADATA_KEY, token),)
        self._aio_channel: grpc.aio.Channel | None = None
        self._aio_stub: hb_grpc.HostBridgeStub | None = None
        self._sync_channel: grpc.Channel | None = None
        self._sync_stub: hb_grpc.HostBridgeStub | None = None
        self._lock = threading.Lock()

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def aio_stub(self) -> hb_grpc.HostBridgeStub:
        if self._aio_stub is None:
            self._aio_channel = grpc.aio.insecure_channel(self.target, options=_OPTIONS)
            self._aio_stub = hb_grpc.HostBridgeStub(self._aio_channel)
        return self._aio_stub

    def sync_stub(self) -> hb_grpc.HostBridgeStub:
        with self._lock:
            if self._sync_stub is None:
                self._sync_channel = grpc.insecure_channel(self.target, options=_OPTIONS)
                self._sync_stub = hb_grpc.HostBridgeStub(self._sync_channel)
            return self._sync_stub

    async def close(self) -> None:
        if self._aio_channel is not None:
            await self._aio_channel.close()
            self._aio_channel = self._aio_stub = None
        with self._lock:
            if self._sync_channel is not None:
                self._sync_channel.close()
                self._sync_channel = self._sync_stub = None


class Host:
    """The host, as seen from a handler: async HostBridge calls bound to the current session.

    `host.sync` offers the same methods as blocking calls (for sync handlers, which run in a worker
    thread for tools). Failures raise `HostError` naming the gRPC code.
    """

    __slots__ = ("_conn", "session_id")

    def __init__(self, conn: HostConnection, session_id: str) -> None:
        self._conn = conn
        self.session_id = session_id

    @property
    def sync(self) -> SyncHost:
        return SyncHost(self._conn, self.session_id)

    async def _call(self, method: str, request: Any) -> Any:
        rpc = getattr(self._conn.aio_stub(), method)
        try:
            return await rpc(request, metadata=self._conn.metadata + trace_metadata())  # back into the host's trace
        except grpc.RpcError as err:
            raise _host_error(method, err) from None

    async def read_file(self, path: str) -> bytes | None:
        """The file's bytes, or None when there is no such file (Think's readFile)."""
        resp = await self._call("ReadFile", hb.ReadFileRequest(session_id=self.session_id, path=path))
        return None if resp.missing else bytes(resp.content)

    async def write_file(self, path: str, content: str | bytes, append: bool = False) -> int:
        req = hb.WriteFileRequest(session_id=self.session_id, path=path, content=_as_bytes(content), append=append)
        return int((await self._call("WriteFile", req)).size)

    async def delete_file(self, path: str) -> bool:
        resp = await self._call("DeleteFile", hb.DeleteFileRequest(session_id=self.session_id, path=path))
        return bool(resp.deleted)

    async def list_files(self, path: str = "") -> list[dict[str, Any]]:
        return _entries(await self._call("ListFiles", hb.ListFilesRequest(session_id=self.session_id, path=path)))

    async def get_messages(self, limit: int | None = None) -> list[dict[str, Any]]:
        """All messages, or the last `limit` of them; `limit <= 0` gives [] (Think's getMessages)."""
        resp = await self._call("GetMessages", _messages_request(self.session_id, limit))
        return json.loads(resp.messages_json) if resp.messages_json else []

    async def get_context(self, label: str) -> str | None:
        resp = await self._call("GetContext", hb.GetContextRequest(session_id=self.session_id, label=label))
        return resp.content if resp.HasField("content") else None

    async def set_context(self, label: str, content: str) -> None:
        await self._call("SetContext", hb.SetContextRequest(session_id=self.session_id, label=label, content=content))

    async def send_message(self, text: str, role: str = "user") -> str:
        req = hb.SendMessageRequest(session_id=self.session_id, text=text, role=role)
        return (await self._call("SendMessage", req)).message_id

    async def get_session_info(self) -> dict[str, Any]:
        return _session_info(await self._call("GetSessionInfo", hb.GetSessionInfoRequest(session_id=self.session_id)))


def _messages_request(session_id: str, limit: int | None) -> hb.GetMessagesRequest:
    if limit is None:
        return hb.GetMessagesRequest(session_id=session_id)
    return hb.GetMessagesRequest(session_id=session_id, limit=max(0, int(limit)), limited=True)


class SyncHost:
    """Blocking HostBridge calls bound to a session (on a channel separate from the async one)."""

    __slots__ = ("_conn", "session_id")

    def __init__(self, conn: HostConnection, session_id: str) -> None:
        self._conn = conn
        self.session_id = session_id

    def _call(self, method: str, request: Any) -> Any:
        rpc = getattr(self._conn.sync_stub(), method)
        try:
            return rpc(request, metadata=self._conn.metadata + trace_metadata())
        except grpc.RpcError as err:
            raise _host_error(method, err) from None

    def read_file(self, path: str) -> bytes | None:
        resp = self._call("ReadFile", hb.ReadFileRequest(session_id=self.session_id, path=path))
        return None if resp.missing else bytes(resp.content)

    def write_file(self, path: str, content: str | bytes, append: bool = False) -> int:
        req = hb.WriteFileRequest(session_id=self.session_id, path=path, content=_as_bytes(content), append=append)
        return int(self._call("WriteFile", req).size)

    def delete_file(self, path: str) -> bool:
        return bool(self._call("DeleteFile", hb.DeleteFileRequest(session_id=self.session_id, path=path)).deleted)

    def list_files(self, path: str = "") -> list[dict[str, Any]]:
        return _entries(self._call("ListFiles", hb.ListFilesRequest(session_id=self.session_id, path=path)))

    def get_messages(self, limit: int | None = None) -> list[dict[str, Any]]:
        resp = self._call("GetMessages", _messages_request(self.session_id, limit))
        return json.loads(resp.messages_json) if resp.messages_json else []

    def get_context(self, label: str) -> str | None:
        resp = self._call("GetContext", hb.GetContextRequest(session_id=self.session_id, label=label))
        return resp.content if resp.HasField("content") else None

    def set_context(self, label: str, content: str) -> None:
        self._call("SetContext", hb.SetContextRequest(session_id=self.session_id, label=label, content=content))

    def send_message(self, text: str, role: str = "user") -> str:
        req = hb.SendMessageRequest(session_id=self.session_id, text=text, role=role)
        return self._call("SendMessage", req).message_id

    def get_session_info(self) -> dict[str, Any]:
        return _session_info(self._call("GetSessionInfo", hb.GetSessionInfoRequest(session_id=self.session_id)))
