"""The HostBridge gRPC server: what an extension may ask of its host, gated by its manifest.

Every call is identified by its `x-hookwire-token` metadata (unknown -> UNAUTHENTICATED), checked against
the calling extension's manifest permissions (not granted -> PERMISSION_DENIED naming the extension, the
method and the manifest field that would grant it), routed to the session named by `session_id` (unknown ->
NOT_FOUND) and audited: one line on logger "hookwire.audit" per call, allowed or not. Refused calls (bad token,
denied, invalid) cost the caller nothing, so their lines are rate-limited per caller (host.extensions._rate_limit, the
limiter of the extension log flood): AUDIT_RATE lines/s, bursts of AUDIT_BURST; what is held back is counted and
reported as one "N similar audit lines suppressed" line at most every AUDIT_REPORT_S seconds (and at stop()).
Allowed calls are always logged: each does real work under a granted permission.

Workspace paths are relative to the session's `workspace_root` and opened with host.extensions._workspace_fs.open_beneath
(openat2 RESOLVE_BENEATH, or an fd-relative O_NOFOLLOW walk): a path that leaves the root (`..`, an absolute
path, a symlink pointing out) is refused, and nothing is checked first and used later, so a symlink swapped in
meanwhile by another process cannot lead a call out. Symlinks that stay inside the root are followed. Only
regular files are read or written (a FIFO or device is refused without blocking). Writes are capped at 16 MB,
reads too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from extension_sdk.proto import TOKEN_METADATA_KEY, host_bridge_pb2, host_bridge_pb2_grpc

from ._manifest import Manifest, sanitize_name
from ._rate_limit import LineRateLimiter
from ._snapshots import SessionServices
from ._trace_metadata import BridgeSpan
from ._workspace_fs import PathEscapes, open_beneath

audit_logger = logging.getLogger("hookwire.audit")
logger = logging.getLogger("hookwire.bridge")

MAX_FILE_BYTES = 16 * 1024 * 1024
AUDIT_RATE = 20.0  # refused-call audit lines per second and caller
AUDIT_BURST = 100.0
AUDIT_REPORT_S = 1.0  # at most one "suppressed" line per caller this often
_AUDIT_FIELD_CHARS = 300  # of an untrusted path/label in an audit line
_MAX_MESSAGE_BYTES = MAX_FILE_BYTES + 1024 * 1024

_Resp = TypeVar("_Resp", bound=Message)


class _Abort(Exception):
    """Ends a call with a gRPC status; `outcome` is what the audit line says."""

    def __init__(self, code: grpc.StatusCode, message: str, outcome: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.outcome = outcome


def _denied(message: str) -> _Abort:
    return _Abort(grpc.StatusCode.PERMISSION_DENIED, message, "denied")


class _Call:
    """One bridge call in progress: who, what, on which session and target (for the audit line)."""

    def __init__(self, method: str, session_id: str, target: str) -> None:
        self.method = method
        self.session_id = session_id
        self.target = target
        self.extension = "?"


OWN_LABEL_SEPARATOR = "."  # never occurs in a sanitized name ([A-Za-z0-9_]), so no two extensions share an "own"


def own_label(extension: str, suffix: str = "") -> str:
    """The context label `suffix` in the namespace of `extension`: `my-tools`, `usage` -> `my_tools.usage`."""
    prefix = sanitize_name(extension)
    return f"{prefix}{OWN_LABEL_SEPARATOR}{suffix}" if suffix else prefix


def _label_allowed(rule: list[str] | str, label: str, own_prefix: str) -> bool:
    """`own` is exactly the extension's namespace: its sanitized name, or that name, ".", anything.

    A `_` after the name is not enough: `my` + `_tools_usage` is also `my-tools` + `_usage` (the names
    sanitize to `my` and `my_tools`, and `_` may occur inside a sanitized name; `.` may not).
    """
    if rule == "all":
        return True
    if rule == "own":
        return label == own_prefix or label.startswith(own_prefix + OWN_LABEL_SEPARATOR)
    return label in rule


class HostBridgeServer:
    """Serves hookwire.v1.HostBridge on a Unix socket (mode 0600) for the registered extensions and sessions."""

    def __init__(self, socket_path: Path) -> None:
        self._socket_path = Path(socket_path).absolute()
        self._extensions: dict[str, Manifest] = {}
        self._sessions: dict[str, SessionServices] = {}
        self._server: grpc.aio.Server | None = None
        # caller (extension name, "?" before authentication) -> (limiter, when its last summary was logged)
        self._audit_limits: dict[str, tuple[LineRateLimiter, float]] = {}

    @property
    def target(self) -> str:
        return f"unix:{self._socket_path}"

    @property
    def socket_path(self) -> Path:
        return self._socket_path

    async def start(self) -> None:
        if self._server is not None:
            return
        self._socket_path.parent.mkdir(parents=True, exist_ok=True)
        if self._socket_path.exists() or self._socket_path.is_symlink():
            self._socket_path.unlink()
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ]
        )
        host_bridge_pb2_grpc.add_HostBridgeServicer_to_server(_Servicer(self), server)
        # Create the socket 0600 from the start (no window where others could connect). add_insecure_port binds
        # synchronously, so the process-wide umask is tight only for that call, never across an await (a subprocess
        # spawned meanwhile would inherit it).
        old_umask = os.umask(0o177)
        try:
            server.add_insecure_port(self.target)
        finally:
            os.umask(old_umask)
        await server.start()
        os.chmod(self._socket_path, 0o600)
        self._server = server

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace=0.5)
        for caller in list(self._audit_limits):
            self._report_suppressed(caller)
        try:
            self._socket_path.unlink()
        except FileNotFoundError:
            pass

    def register_extension(self, token: str, manifest: Manifest) -> None:
        if not token:
            raise ValueError(f"extension {manifest.name!r}: empty bridge token")
        self._extensions[token] = manifest

    def unregister_extension(self, token: str) -> None:
        self._extensions.pop(token, None)

    def register_session(self, session_id: str, services: SessionServices) -> None:
        self._sessions[session_id] = services

    def unregister_session(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    # ------------------------------------------------------------------ dispatch

    def _manifest_for(self, context: grpc.aio.ServicerContext) -> Manifest:
        token = next((v for k, v in context.invocation_metadata() or () if k == TOKEN_METADATA_KEY), None)
        if not token:
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, f"missing {TOKEN_METADATA_KEY} metadata", "unauthenticated")
        manifest = self._extensions.get(str(token))
        if manifest is None:
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, "unknown extension token", "unauthenticated")
        return manifest

    def _session(self, call: _Call) -> SessionServices:
        services = self._sessions.get(call.session_id)
        if services is None:
            raise _Abort(
                grpc.StatusCode.NOT_FOUND,
                f"{call.method}: no session {call.session_id!r} is registered with this host",
                "not_found",
            )
        return services

    async def _run(
        self,
        call: _Call,
        context: grpc.aio.ServicerContext,
        check: Callable[[Manifest], str | None],
        body: Callable[[Manifest, SessionServices], Awaitable[_Resp]],
    ) -> _Resp:
        """Authenticate, gate (`check` returns the granting field when denied), resolve the session, run, audit."""
        outcome = "ok"
        audited = False
        span = BridgeSpan(call.method, context.invocation_metadata())  # the caller's trace continues here
        try:
            manifest = self._manifest_for(context)
            call.extension = manifest.name
            missing_grant = check(manifest)
            if missing_grant is not None:
                raise _denied(
                    f"extension {manifest.name!r} may not call {call.method}"
                    + (f" on {call.target!r}" if call.target else "")
                    + f": its manifest does not grant it (needs {missing_grant})"
                )
            services = self._session(call)
            return await body(manifest, services)
        except _Abort as exc:
            outcome = f"{exc.outcome}: {exc.message}"
            # Audit before aborting: abort() sends the status at once, so a line written after it could reach the
            # log after the caller already saw the refusal.
            self._audit(call, outcome)
            audited = True
            await context.abort(exc.code, exc.message)
            raise AssertionError("unreachable")  # context.abort raises
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception as exc:
            if isinstance(exc, grpc.aio.AbortError):
                raise
            outcome = f"error: {type(exc).__name__}: {exc}"
            logger.exception("HostBridge %s for extension %r failed", call.method, call.extension)
            self._audit(call, outcome)
            audited = True
            await context.abort(grpc.StatusCode.INTERNAL, f"{call.method} failed: {type(exc).__name__}: {exc}")
            raise AssertionError("unreachable")
        finally:
            if not audited:
                self._audit(call, outcome)
            span.end(call.extension, call.session_id, outcome)

    def _audit(self, call: _Call, outcome: str) -> None:
        """One audit line for the call; refused calls' lines are rate-limited per caller (see module doc)."""
        if outcome != "ok":
            entry = self._audit_limits.get(call.extension)
            if entry is None:
                entry = (LineRateLimiter(AUDIT_RATE, AUDIT_BURST), time.monotonic())
                self._audit_limits[call.extension] = entry
            limiter, reported = entry
            allowed = limiter.allow()
            if limiter.suppressed and time.monotonic() - reported >= AUDIT_REPORT_S:
                self._report_suppressed(call.extension)
            if not allowed:
                return
        target = _clip(call.target)
        session = _clip(call.session_id)
        outcome = _clip(outcome, 1000)
        audit_logger.log(
            logging.INFO if outcome == "ok" else logging.WARNING,
            "bridge extension=%s method=%s session=%s target=%s outcome=%s",
            call.extension, call.method, session or "-", target or "-", outcome,
            extra={"extension": call.extension, "method": call.method, "session_id": session, "target": target,
                   "outcome": outcome},
        )

    def _report_suppressed(self, caller: str) -> None:
        entry = self._audit_limits.get(caller)
        if entry is None:
            return
        limiter, _ = entry
        self._audit_limits[caller] = (limiter, time.monotonic())
        count = limiter.take_suppressed()
        if count:
            audit_logger.warning(
                "bridge extension=%s: %d similar audit lines suppressed (refused calls beyond %.0f lines/s)",
                caller, count, AUDIT_RATE, extra={"extension": caller, "suppressed": count},
            )


def _clip(text: str, limit: int = _AUDIT_FIELD_CHARS) -> str:
    """An untrusted text bounded for an audit line (a path or session id may be megabytes long)."""
    return text if len(text) <= limit else f"{text[:limit]}…[{len(text) - limit} more characters]"


def _workspace_read(manifest: Manifest) -> str | None:
    return None if manifest.permissions.workspace in ("read", "read-write") else "permissions.workspace: read"


def _workspace_write(manifest: Manifest) -> str | None:
    return None if manifest.permissions.workspace == "read-write" else "permissions.workspace: read-write"


def _context_check(kind: str, label: str) -> Callable[[Manifest], str | None]:
    def check(manifest: Manifest) -> str | None:
        rule = getattr(manifest.permissions.context, kind)
        if _label_allowed(rule, label, sanitize_name(manifest.name)):
            return None
        return f"permissions.context.{kind} listing {label!r}, or \"all\""
    return check


def _workspace_root(services: SessionServices, method: str) -> Path:
    root = services.workspace_root
    if root is None:
        raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, f"{method}: this session has no workspace", "no_workspace")
    return Path(root).resolve()


def _check_relative(relative: str, method: str, *, allow_root: bool) -> None:
    """Refuse what is wrong whatever the file system holds: NUL, absolute paths, an empty file path."""
    if "\x00" in relative:
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: path contains a NUL byte", "invalid")
    if relative.startswith("/") or Path(relative).is_absolute():
        raise _denied(f"{method}: absolute path {relative!r} refused; paths are relative to the workspace root")
    if not allow_root and (not relative.strip() or relative.strip() == "."):
        raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: a file path is required", "invalid")


def _open_in(root: Path, relative: str, method: str, flags: int, *, allow_root: bool) -> int:
    """A descriptor of `relative` beneath `root`, opened race-free (blocking: call it in a thread).

    Maps what the file system says to the call's status: out of the root -> PERMISSION_DENIED, missing ->
    NOT_FOUND, a directory or non-directory where the other was needed -> FAILED_PRECONDITION.
    """
    _check_relative(relative, method, allow_root=allow_root)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = open_beneath(root_fd, relative or ".", flags)
        except PathEscapes:
            raise _denied(f"{method}: path {relative!r} escapes the workspace root") from None
        except FileNotFoundError:
            raise _Abort(grpc.StatusCode.NOT_FOUND, f"{method}: no {relative!r} in the workspace",
                         "not_found") from None
        except IsADirectoryError:
            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, f"{method}: {relative!r} is a directory",
                         "is_directory") from None
        except NotADirectoryError:
            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, f"{method}: {relative!r} is not a directory",
                         "not_a_directory") from None
        except OSError as exc:
            raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                         f"{method}: cannot open {relative!r}: {exc.strerror}", "os_error") from None
        if not allow_root and os.path.samestat(os.fstat(fd), os.fstat(root_fd)):
            os.close(fd)
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"{method}: {relative!r} is the workspace root", "invalid")
        return fd
    finally:
        os.close(root_fd)


def _ensure_parents(root: Path, relative: str, method: str) -> None:
    """Create the missing parent directories of `relative`, each one beneath the root (race-free)."""
    parts = [p for p in relative.rstrip("/").split("/")[:-1] if p not in ("", ".")]
    for i in range(len(parts)):
        try:
            os.close(_open_in(root, "/".join(parts[: i + 1]), method, os.O_RDONLY | os.O_DIRECTORY,
                              allow_root=True))
            continue
        except _Abort as exc:
            if exc.outcome != "not_found":
                raise
        above = _open_in(root, "/".join(parts[:i]), method, os.O_RDONLY | os.O_DIRECTORY, allow_root=True)
        try:
            os.mkdir(parts[i], 0o755, dir_fd=above)
        except FileExistsError:
            pass  # made meanwhile, or a dangling symlink: the next open decides
        finally:
            os.close(above)


def _not_regular(relative: str, method: str) -> _Abort:
    return _Abort(grpc.StatusCode.FAILED_PRECONDITION, f"{method}: {relative!r} is not a file", "not_a_file")


def _fd_path(fd: int) -> Path:
    """Where an open descriptor is now (for reporting only; access never goes by this path)."""
    return Path(os.readlink(f"/proc/self/fd/{fd}"))


class _Servicer(host_bridge_pb2_grpc.HostBridgeServicer):
    def __init__(self, bridge: HostBridgeServer) -> None:
        self._bridge = bridge

    # ------------------------------------------------------------------ workspace

    async def ReadFile(self, request: host_bridge_pb2.ReadFileRequest, context: Any) -> host_bridge_pb2.ReadFileResponse:
        call = _Call("ReadFile", request.session_id, request.path)

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.ReadFileResponse:
            root = _workspace_root(services, call.method)

            def read() -> bytes:
                # O_NONBLOCK: opening a FIFO must not hang the call; it is refused below as not a file.
                fd = _open_in(root, request.path, call.method, os.O_RDONLY | os.O_NONBLOCK, allow_root=False)
                with os.fdopen(fd, "rb") as fh:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        raise _not_regular(request.path, call.method)
                    data = fh.read(MAX_FILE_BYTES + 1)
                if len(data) > MAX_FILE_BYTES:
                    raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                 f"ReadFile: {request.path!r} is larger than {MAX_FILE_BYTES} bytes", "too_large")
                return data

            try:
                return host_bridge_pb2.ReadFileResponse(content=await asyncio.to_thread(read))
            except _Abort as exc:
                if exc.outcome == "not_found":  # Think's readFile of a missing file is null, not an error
                    return host_bridge_pb2.ReadFileResponse(missing=True)
                raise

        return await self._bridge._run(call, context, _workspace_read, body)

    async def ListFiles(
        self, request: host_bridge_pb2.ListFilesRequest, context: Any
    ) -> host_bridge_pb2.ListFilesResponse:
        call = _Call("ListFiles", request.session_id, request.path or ".")

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.ListFilesResponse:
            root = _workspace_root(services, call.method)

            def scan() -> list[host_bridge_pb2.FileEntry]:
                fd = _open_in(root, request.path, call.method, os.O_RDONLY | os.O_DIRECTORY, allow_root=True)
                try:
                    where = _fd_path(fd).relative_to(root)  # beneath the root: the open guarantees it
                    entries = []
                    with os.scandir(fd) as it:
                        for entry in sorted(it, key=lambda e: e.name):
                            st = entry.stat(follow_symlinks=False)
                            is_dir = entry.is_dir(follow_symlinks=False)
                            entries.append(host_bridge_pb2.FileEntry(
                                path=(where / entry.name).as_posix(), is_dir=is_dir, size=0 if is_dir else st.st_size
                            ))
                    return entries
                finally:
                    os.close(fd)

            return host_bridge_pb2.ListFilesResponse(entries=await asyncio.to_thread(scan))

        return await self._bridge._run(call, context, _workspace_read, body)

    async def WriteFile(
        self, request: host_bridge_pb2.WriteFileRequest, context: Any
    ) -> host_bridge_pb2.WriteFileResponse:
        call = _Call("WriteFile", request.session_id, request.path)

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.WriteFileResponse:
            root = _workspace_root(services, call.method)
            _check_relative(request.path, call.method, allow_root=False)
            if len(request.content) > MAX_FILE_BYTES:
                raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             f"WriteFile: {len(request.content)} bytes exceed the {MAX_FILE_BYTES}-byte cap",
                             "too_large")

            def write() -> int:
                _ensure_parents(root, request.path, call.method)
                # No O_TRUNC at open: the file is checked (regular, size) on the descriptor first.
                flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | (os.O_APPEND if request.append else 0)
                fd = _open_in(root, request.path, call.method, flags, allow_root=False)
                with os.fdopen(fd, "wb") as fh:
                    st = os.fstat(fd)
                    if not stat.S_ISREG(st.st_mode):
                        raise _not_regular(request.path, call.method)
                    if request.append and st.st_size + len(request.content) > MAX_FILE_BYTES:
                        raise _Abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                     f"WriteFile: appending would grow {request.path!r} past {MAX_FILE_BYTES} bytes",
                                     "too_large")
                    if not request.append:
                        os.ftruncate(fd, 0)
                    fh.write(request.content)
                    fh.flush()
                    return os.fstat(fd).st_size

            return host_bridge_pb2.WriteFileResponse(size=await asyncio.to_thread(write))

        return await self._bridge._run(call, context, _workspace_write, body)

    async def DeleteFile(
        self, request: host_bridge_pb2.DeleteFileRequest, context: Any
    ) -> host_bridge_pb2.DeleteFileResponse:
        call = _Call("DeleteFile", request.session_id, request.path)

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.DeleteFileResponse:
            root = _workspace_root(services, call.method)
            _check_relative(request.path, call.method, allow_root=False)
            parent, _, name = request.path.rstrip("/").rpartition("/")
            if name in ("", ".", ".."):
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                             f"DeleteFile: {request.path!r} does not name a file", "invalid")

            def delete() -> bool:
                # The parent is opened beneath the root; the name is removed relative to it, so a symlink is
                # removed itself (never its target) and nothing can be swapped in between.
                try:
                    dir_fd = _open_in(root, parent, call.method, os.O_RDONLY | os.O_DIRECTORY, allow_root=True)
                except _Abort as exc:
                    if exc.outcome == "not_found":
                        return False
                    raise
                try:
                    try:
                        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        return False
                    if stat.S_ISDIR(st.st_mode):
                        raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"DeleteFile: {request.path!r} is a directory (only files can be deleted)",
                                     "is_directory")
                    try:
                        os.unlink(name, dir_fd=dir_fd)  # EISDIR if a directory was swapped in: never rmdir
                    except FileNotFoundError:
                        return False
                    except IsADirectoryError:
                        raise _Abort(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"DeleteFile: {request.path!r} is a directory (only files can be deleted)",
                                     "is_directory") from None
                    return True
                finally:
                    os.close(dir_fd)

            return host_bridge_pb2.DeleteFileResponse(deleted=await asyncio.to_thread(delete))

        return await self._bridge._run(call, context, _workspace_write, body)

    # ------------------------------------------------------------------ messages, context, session

    async def GetMessages(
        self, request: host_bridge_pb2.GetMessagesRequest, context: Any
    ) -> host_bridge_pb2.GetMessagesResponse:
        call = _Call("GetMessages", request.session_id, "")

        def check(manifest: Manifest) -> str | None:
            return None if manifest.permissions.messages == "read" else "permissions.messages: read"

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.GetMessagesResponse:
            if request.limited and request.limit == 0:
                return host_bridge_pb2.GetMessagesResponse(messages_json="[]")  # Think: limit <= 0 -> []
            messages = await services.bridge_get_messages(int(request.limit))
            return host_bridge_pb2.GetMessagesResponse(messages_json=json.dumps(messages, default=str))

        return await self._bridge._run(call, context, check, body)

    async def GetContext(
        self, request: host_bridge_pb2.GetContextRequest, context: Any
    ) -> host_bridge_pb2.GetContextResponse:
        call = _Call("GetContext", request.session_id, request.label)

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.GetContextResponse:
            content = await services.bridge_get_context(request.label)
            if content is None:
                return host_bridge_pb2.GetContextResponse()
            return host_bridge_pb2.GetContextResponse(content=content)

        return await self._bridge._run(call, context, _context_check("read", request.label), body)

    async def SetContext(
        self, request: host_bridge_pb2.SetContextRequest, context: Any
    ) -> host_bridge_pb2.SetContextResponse:
        call = _Call("SetContext", request.session_id, request.label)

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.SetContextResponse:
            if not request.label:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "SetContext: a label is required", "invalid")
            await services.bridge_set_context(request.label, request.content, extension=manifest.name)
            return host_bridge_pb2.SetContextResponse()

        return await self._bridge._run(call, context, _context_check("write", request.label), body)

    async def SendMessage(
        self, request: host_bridge_pb2.SendMessageRequest, context: Any
    ) -> host_bridge_pb2.SendMessageResponse:
        call = _Call("SendMessage", request.session_id, request.role or "user")

        def check(manifest: Manifest) -> str | None:
            return None if manifest.permissions.session.send_message else "permissions.session.sendMessage: true"

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.SendMessageResponse:
            role = request.role or "user"
            if role not in ("user", "assistant"):
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT,
                             f"SendMessage: role must be 'user' or 'assistant', not {role!r}", "invalid")
            message_id = await services.bridge_send_message(request.text, role)
            return host_bridge_pb2.SendMessageResponse(message_id=str(message_id))

        return await self._bridge._run(call, context, check, body)

    async def GetSessionInfo(
        self, request: host_bridge_pb2.GetSessionInfoRequest, context: Any
    ) -> host_bridge_pb2.GetSessionInfoResponse:
        call = _Call("GetSessionInfo", request.session_id, "")

        def check(manifest: Manifest) -> str | None:
            return None if manifest.permissions.session.metadata else "permissions.session.metadata: true"

        async def body(manifest: Manifest, services: SessionServices) -> host_bridge_pb2.GetSessionInfoResponse:
            info = dict(await services.bridge_session_info())
            session_id = info.pop("sessionId", info.pop("session_id", request.session_id))
            count = info.pop("messageCount", info.pop("message_count", 0))
            model_id = info.pop("modelId", info.pop("model_id", ""))
            metadata = info.pop("metadata", None)
            if metadata is None:
                metadata = info
            return host_bridge_pb2.GetSessionInfoResponse(
                session_id=str(session_id), message_count=int(count or 0), model_id=str(model_id or ""),
                metadata_json=json.dumps(metadata, default=str),
            )

        return await self._bridge._run(call, context, check, body)
