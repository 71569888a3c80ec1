"""`FakeHost`: a real `hookwire.v1.HostBridge` gRPC server, in-process, whose workspace files, messages, context
blocks and session metadata a test presets and then inspects. It answers like the host does: a missing file reads
as None (and ListFiles of a missing directory is NOT_FOUND), PERMISSION_DENIED for a path out of the workspace and for the methods the test denies,
UNAUTHENTICATED for a call without the extension's token."""

from __future__ import annotations

import hmac
import json
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from ..proto import TOKEN_METADATA_KEY
from ..proto import host_bridge_pb2 as hb
from ..proto import host_bridge_pb2_grpc as hb_grpc

_METHODS = ("ReadFile", "ListFiles", "WriteFile", "DeleteFile", "GetMessages", "GetContext", "SetContext",
            "SendMessage", "GetSessionInfo")
_SNAKE = {"read_file": "ReadFile", "list_files": "ListFiles", "write_file": "WriteFile",
          "delete_file": "DeleteFile", "get_messages": "GetMessages", "get_context": "GetContext",
          "set_context": "SetContext", "send_message": "SendMessage", "get_session_info": "GetSessionInfo"}


@dataclass(frozen=True)
class BridgeCall:
    """One HostBridge call the extension made: the method (e.g. "WriteFile"), its session and its target
    (a path, a label or a role; "" for the others)."""

    method: str
    session_id: str
    target: str


class _Refused(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _method_name(name: str) -> str:
    if name in _METHODS:
        return name
    if name in _SNAKE:
        return _SNAKE[name]
    raise ValueError(f"FakeHost deny: unknown HostBridge method {name!r}; methods are {', '.join(_METHODS)}")


def _normalize(path: str, method: str, *, allow_root: bool) -> str:
    if "\x00" in path:
        raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: path contains a NUL byte")
    if path.startswith("/"):
        raise _Refused(grpc.StatusCode.PERMISSION_DENIED,
                       f"{method}: absolute path {path!r} refused; paths are relative to the workspace root")
    norm = posixpath.normpath(path or ".")
    if norm == ".." or norm.startswith("../"):
        raise _Refused(grpc.StatusCode.PERMISSION_DENIED, f"{method}: path {path!r} escapes the workspace root")
    if norm == ".":
        if not allow_root:
            raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: a file path is required")
        return ""
    return norm


class FakeHost(hb_grpc.HostBridgeServicer):
    """The host side of the HostBridge for tests. Preset and inspect these attributes:

    - `files`: the workspace, `{relative path: bytes}` (str values given to the constructor are UTF-8 encoded);
    - `messages`: the session's messages, what `host.get_messages()` returns (a list of dicts);
    - `context`: context blocks, `{label: content}`;
    - `sent`: what `host.send_message()` sent, `[{"id", "role", "text"}]`;
    - `metadata`: the session metadata `host.get_session_info()` reports;
    - `calls`: every HostBridge call made, in order (`BridgeCall(method, session_id, target)`).

    `deny` names methods answered PERMISSION_DENIED, as the host does when the manifest does not grant them
    (e.g. `deny=["WriteFile"]` for `workspace: read`).
    """

    def __init__(
        self,
        *,
        files: Mapping[str, str | bytes] | None = None,
        messages: Iterable[Mapping[str, Any]] | None = None,
        context: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        model_id: str = "hookwire/scripted",
        deny: Iterable[str] = (),
        token: str = "",
    ) -> None:
        self.files: dict[str, bytes] = {}
        for path, content in (files or {}).items():
            self.files[_normalize(path, "files", allow_root=False)] = (
                content.encode("utf-8") if isinstance(content, str) else bytes(content)
            )
        self.messages: list[dict[str, Any]] = [dict(m) for m in (messages or [])]
        self.context: dict[str, str] = dict(context or {})
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.model_id = model_id
        self.sent: list[dict[str, Any]] = []
        self.calls: list[BridgeCall] = []
        self.deny: set[str] = {_method_name(m) for m in deny}
        self._token = token.encode()

    def text(self, path: str) -> str:
        """A workspace file as UTF-8 text (KeyError naming the files there when it is missing)."""
        key = posixpath.normpath(path)
        if key not in self.files:
            raise KeyError(f"no {path!r} in the fake workspace (files: {', '.join(sorted(self.files)) or 'none'})")
        return self.files[key].decode("utf-8")

    # -- plumbing ---------------------------------------------------------------------------------

    async def _run(self, method: str, session_id: str, target: str, context: grpc.aio.ServicerContext,
                   body: Any) -> Any:
        self.calls.append(BridgeCall(method, session_id, target))
        token = dict(context.invocation_metadata() or ()).get(TOKEN_METADATA_KEY)
        if token is None or not hmac.compare_digest(
            token.encode() if isinstance(token, str) else token, self._token
        ):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, f"missing or wrong {TOKEN_METADATA_KEY} metadata")
        if method in self.deny:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                                f"{method}: not granted (the test's FakeHost denies it)")
        try:
            return body()
        except _Refused as exc:
            await context.abort(exc.code, exc.message)

    def _file(self, path: str, method: str) -> str:
        key = _normalize(path, method, allow_root=False)
        if key not in self.files:
            if any(name.startswith(key + "/") for name in self.files):
                raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, f"{method}: {path!r} is a directory")
            raise _Refused(grpc.StatusCode.NOT_FOUND, f"{method}: no {path!r} in the workspace")
        return key

    # -- the HostBridge service -------------------------------------------------------------------

    async def ReadFile(self, request: hb.ReadFileRequest, context: Any) -> hb.ReadFileResponse:
        def body() -> hb.ReadFileResponse:
            key = _normalize(request.path, "ReadFile", allow_root=False)
            if key not in self.files and not any(name.startswith(key + "/") for name in self.files):
                return hb.ReadFileResponse(missing=True)  # as the host: a missing file reads as None (Think's null)
            return hb.ReadFileResponse(content=self.files[self._file(request.path, "ReadFile")])

        return await self._run("ReadFile", request.session_id, request.path, context, body)

    async def ListFiles(self, request: hb.ListFilesRequest, context: Any) -> hb.ListFilesResponse:
        def body() -> hb.ListFilesResponse:
            where = _normalize(request.path, "ListFiles", allow_root=True)
            if where in self.files:
                raise _Refused(grpc.StatusCode.FAILED_PRECONDITION, f"ListFiles: {request.path!r} is not a directory")
            prefix = where + "/" if where else ""
            entries: dict[str, hb.FileEntry] = {}
            for name, content in self.files.items():
                if not name.startswith(prefix):
                    continue
                head, _, rest = name[len(prefix):].partition("/")
                path = prefix + head
                entries[path] = hb.FileEntry(path=path, is_dir=bool(rest), size=0 if rest else len(content))
            if where and not entries:
                raise _Refused(grpc.StatusCode.NOT_FOUND, f"ListFiles: no {request.path!r} in the workspace")
            return hb.ListFilesResponse(entries=[entries[k] for k in sorted(entries)])

        return await self._run("ListFiles", request.session_id, request.path or ".", context, body)

    async def WriteFile(self, request: hb.WriteFileRequest, context: Any) -> hb.WriteFileResponse:
        def body() -> hb.WriteFileResponse:
            key = _normalize(request.path, "WriteFile", allow_root=False)
            old = self.files.get(key, b"") if request.append else b""
            self.files[key] = old + bytes(request.content)
            return hb.WriteFileResponse(size=len(self.files[key]))

        return await self._run("WriteFile", request.session_id, request.path, context, body)

    async def DeleteFile(self, request: hb.DeleteFileRequest, context: Any) -> hb.DeleteFileResponse:
        def body() -> hb.DeleteFileResponse:
            key = _normalize(request.path, "DeleteFile", allow_root=False)
            return hb.DeleteFileResponse(deleted=self.files.pop(key, None) is not None)

        return await self._run("DeleteFile", request.session_id, request.path, context, body)

    async def GetMessages(self, request: hb.GetMessagesRequest, context: Any) -> hb.GetMessagesResponse:
        def body() -> hb.GetMessagesResponse:
            if request.limited and request.limit == 0:  # as the host: getMessages(limit <= 0) -> []
                messages = []
            else:
                messages = self.messages[-request.limit:] if request.limit else self.messages
            return hb.GetMessagesResponse(messages_json=json.dumps(messages, default=str))

        return await self._run("GetMessages", request.session_id, "", context, body)

    async def GetContext(self, request: hb.GetContextRequest, context: Any) -> hb.GetContextResponse:
        def body() -> hb.GetContextResponse:
            content = self.context.get(request.label)
            return hb.GetContextResponse() if content is None else hb.GetContextResponse(content=content)

        return await self._run("GetContext", request.session_id, request.label, context, body)

    async def SetContext(self, request: hb.SetContextRequest, context: Any) -> hb.SetContextResponse:
        def body() -> hb.SetContextResponse:
            if not request.label:
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT, "SetContext: a label is required")
            self.context[request.label] = request.content
            return hb.SetContextResponse()

        return await self._run("SetContext", request.session_id, request.label, context, body)

    async def SendMessage(self, request: hb.SendMessageRequest, context: Any) -> hb.SendMessageResponse:
        def body() -> hb.SendMessageResponse:
            role = request.role or "user"
            if role not in ("user", "assistant"):
                raise _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                               f"SendMessage: role must be 'user' or 'assistant', not {role!r}")
            message_id = f"sent-{len(self.sent) + 1}"
            self.sent.append({"id": message_id, "role": role, "text": request.text})
            return hb.SendMessageResponse(message_id=message_id)

        return await self._run("SendMessage", request.session_id, request.role or "user", context, body)

    async def GetSessionInfo(self, request: hb.GetSessionInfoRequest, context: Any) -> hb.GetSessionInfoResponse:
        def body() -> hb.GetSessionInfoResponse:
            return hb.GetSessionInfoResponse(
                session_id=request.session_id, message_count=len(self.messages), model_id=self.model_id,
                metadata_json=json.dumps(self.metadata, default=str),
            )

        return await self._run("GetSessionInfo", request.session_id, "", context, body)
