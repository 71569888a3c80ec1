"""HostBridgeServer over a real Unix socket, called with the generated stubs."""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from extension_sdk.proto import TOKEN_METADATA_KEY, host_bridge_pb2 as pb, host_bridge_pb2_grpc
from host import HostBridgeServer, Manifest, parse_manifest
from host.extensions._bridge_server import MAX_FILE_BYTES

SESSION = "sess-1"
EVERYTHING = {
    "workspace": "read-write",
    "messages": "read",
    "context": {"read": "own", "write": "own"},
    "session": {"sendMessage": True, "metadata": True},
}


class FakeSession:
    """Host-side test scaffolding: a tmp workspace and in-memory messages/context."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self.messages: list[dict[str, Any]] = [
            {"id": "m1", "role": "user", "content": "hi"},
            {"id": "m2", "role": "assistant", "content": "hello"},
        ]
        self.context: dict[str, str] = {}
        self.context_writers: list[str] = []
        self.sent: list[tuple[str, str]] = []

    @property
    def workspace_root(self) -> Path | None:
        return self.root

    async def bridge_get_messages(self, limit: int) -> list[dict[str, Any]]:
        return self.messages[-limit:] if limit else list(self.messages)

    async def bridge_get_context(self, label: str) -> str | None:
        return self.context.get(label)

    async def bridge_set_context(self, label: str, content: str, *, extension: str) -> None:
        self.context[label] = content
        self.context_writers.append(extension)

    async def bridge_send_message(self, text: str, role: str) -> str:
        self.sent.append((text, role))
        return f"msg-{len(self.sent)}"

    async def bridge_session_info(self) -> dict[str, Any]:
        return {"sessionId": SESSION, "messageCount": len(self.messages), "modelId": "scripted",
                "metadata": {"agent": "Test"}}


class Env:
    def __init__(self, base: Path, bridge: HostBridgeServer, session: FakeSession, channel: grpc.aio.Channel) -> None:
        self.base = base
        self.bridge = bridge
        self.session = session
        self.stub = host_bridge_pb2_grpc.HostBridgeStub(channel)
        self.workspace = session.root
        self._tokens = 0

    def extension(self, name: str = "audit-log", **permissions: Any) -> list[tuple[str, str]]:
        """Register an extension with these permissions; returns the call metadata carrying its token."""
        self._tokens += 1
        token = f"token-{self._tokens}"
        manifest: Manifest = parse_manifest({"name": name, "command": ["x"], "permissions": permissions})
        self.bridge.register_extension(token, manifest)
        return [(TOKEN_METADATA_KEY, token)]


@pytest.fixture
def base() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="hwbr-") as tmp:  # short: AF_UNIX path limit
        yield Path(tmp)


@pytest.fixture
async def env(base: Path) -> AsyncIterator[Env]:
    workspace = base / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "a.txt").write_text("aa")
    bridge = HostBridgeServer(base / "bridge.sock")
    await bridge.start()
    session = FakeSession(workspace)
    bridge.register_session(SESSION, session)
    channel = grpc.aio.insecure_channel(bridge.target)
    try:
        yield Env(base, bridge, session, channel)
    finally:
        await channel.close()
        await bridge.stop()


async def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details() or ""


# ---------------------------------------------------------------- server basics


async def test_socket_is_private_to_the_owner(env: Env) -> None:
    mode = stat.S_IMODE(os.stat(env.bridge.socket_path).st_mode)
    assert mode == 0o600
    assert env.bridge.target == f"unix:{env.bridge.socket_path}"


async def test_unknown_token_is_unauthenticated(env: Env) -> None:
    env.extension(workspace="read")
    code, _ = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt"),
                                            metadata=[(TOKEN_METADATA_KEY, "forged")]))
    assert code == grpc.StatusCode.UNAUTHENTICATED


async def test_missing_token_is_unauthenticated(env: Env) -> None:
    code, _ = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt")))
    assert code == grpc.StatusCode.UNAUTHENTICATED


async def test_unregistered_extension_token_stops_working(env: Env) -> None:
    md = env.extension(workspace="read")
    env.bridge.unregister_extension(md[0][1])
    code, _ = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt"), metadata=md))
    assert code == grpc.StatusCode.UNAUTHENTICATED


async def test_unknown_session_is_not_found(env: Env) -> None:
    md = env.extension(workspace="read")
    code, details = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id="nope", path="notes.txt"),
                                                  metadata=md))
    assert code == grpc.StatusCode.NOT_FOUND
    assert "nope" in details


async def test_session_without_workspace_is_a_failed_precondition(env: Env) -> None:
    env.bridge.register_session("bare", FakeSession(None))
    md = env.extension(workspace="read")
    code, details = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id="bare", path="notes.txt"),
                                                  metadata=md))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "no workspace" in details


# ---------------------------------------------------------------- allowed


async def test_read_file_with_workspace_read(env: Env) -> None:
    md = env.extension(workspace="read")
    reply = await env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt"), metadata=md)
    assert reply.content == b"hello"


async def test_list_files_with_workspace_read(env: Env) -> None:
    md = env.extension(workspace="read")
    reply = await env.stub.ListFiles(pb.ListFilesRequest(session_id=SESSION, path=""), metadata=md)
    assert [(e.path, e.is_dir, e.size) for e in reply.entries] == [("notes.txt", False, 5), ("sub", True, 0)]
    sub = await env.stub.ListFiles(pb.ListFilesRequest(session_id=SESSION, path="sub"), metadata=md)
    assert [e.path for e in sub.entries] == ["sub/a.txt"]


async def test_write_file_with_workspace_read_write(env: Env) -> None:
    md = env.extension(workspace="read-write")
    reply = await env.stub.WriteFile(pb.WriteFileRequest(session_id=SESSION, path="new/out.txt", content=b"abc"),
                                     metadata=md)
    assert reply.size == 3
    assert (env.workspace / "new" / "out.txt").read_bytes() == b"abc"  # type: ignore[operator]


async def test_write_file_appends(env: Env) -> None:
    md = env.extension(workspace="read-write")
    reply = await env.stub.WriteFile(
        pb.WriteFileRequest(session_id=SESSION, path="notes.txt", content=b"!", append=True), metadata=md
    )
    assert reply.size == 6
    assert (env.workspace / "notes.txt").read_text() == "hello!"  # type: ignore[operator]


async def test_delete_file_with_workspace_read_write(env: Env) -> None:
    md = env.extension(workspace="read-write")
    reply = await env.stub.DeleteFile(pb.DeleteFileRequest(session_id=SESSION, path="notes.txt"), metadata=md)
    assert reply.deleted
    assert not (env.workspace / "notes.txt").exists()  # type: ignore[operator]
    again = await env.stub.DeleteFile(pb.DeleteFileRequest(session_id=SESSION, path="notes.txt"), metadata=md)
    assert not again.deleted


async def test_get_messages_with_messages_read(env: Env) -> None:
    md = env.extension(messages="read")
    reply = await env.stub.GetMessages(pb.GetMessagesRequest(session_id=SESSION, limit=1), metadata=md)
    assert json.loads(reply.messages_json) == [{"id": "m2", "role": "assistant", "content": "hello"}]


async def test_get_context_own_label(env: Env) -> None:
    env.session.context["audit_log.notes"] = "kept"
    md = env.extension(context={"read": "own"})
    reply = await env.stub.GetContext(pb.GetContextRequest(session_id=SESSION, label="audit_log.notes"), metadata=md)
    assert reply.HasField("content") and reply.content == "kept"
    missing = await env.stub.GetContext(pb.GetContextRequest(session_id=SESSION, label="audit_log"), metadata=md)
    assert not missing.HasField("content")


async def test_set_context_own_label_records_the_extension(env: Env) -> None:
    md = env.extension(context={"write": "own"})
    await env.stub.SetContext(pb.SetContextRequest(session_id=SESSION, label="audit_log.x", content="v"), metadata=md)
    assert env.session.context == {"audit_log.x": "v"}
    assert env.session.context_writers == ["audit-log"]


async def test_context_listed_label_and_all(env: Env) -> None:
    listed = env.extension(context={"read": ["memory"], "write": "all"})
    env.session.context["memory"] = "m"
    reply = await env.stub.GetContext(pb.GetContextRequest(session_id=SESSION, label="memory"), metadata=listed)
    assert reply.content == "m"
    await env.stub.SetContext(pb.SetContextRequest(session_id=SESSION, label="anything", content="v"),
                              metadata=listed)
    assert env.session.context["anything"] == "v"


async def test_send_message_with_session_send_message(env: Env) -> None:
    md = env.extension(session={"sendMessage": True})
    reply = await env.stub.SendMessage(pb.SendMessageRequest(session_id=SESSION, text="go on"), metadata=md)
    assert reply.message_id == "msg-1"
    assert env.session.sent == [("go on", "user")]


async def test_send_message_rejects_an_unknown_role(env: Env) -> None:
    md = env.extension(session={"sendMessage": True})
    code, _ = await _code(env.stub.SendMessage(pb.SendMessageRequest(session_id=SESSION, text="x", role="system"),
                                               metadata=md))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert env.session.sent == []


async def test_get_session_info_with_session_metadata(env: Env) -> None:
    md = env.extension(session={"metadata": True})
    reply = await env.stub.GetSessionInfo(pb.GetSessionInfoRequest(session_id=SESSION), metadata=md)
    assert (reply.session_id, reply.message_count, reply.model_id) == (SESSION, 2, "scripted")
    assert json.loads(reply.metadata_json) == {"agent": "Test"}


# ---------------------------------------------------------------- denied


def _calls(stub: host_bridge_pb2_grpc.HostBridgeStub) -> dict[str, Any]:
    return {
        "ReadFile": lambda md: stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt"), metadata=md),
        "ListFiles": lambda md: stub.ListFiles(pb.ListFilesRequest(session_id=SESSION), metadata=md),
        "WriteFile": lambda md: stub.WriteFile(
            pb.WriteFileRequest(session_id=SESSION, path="notes.txt", content=b"x"), metadata=md),
        "DeleteFile": lambda md: stub.DeleteFile(pb.DeleteFileRequest(session_id=SESSION, path="notes.txt"),
                                                 metadata=md),
        "GetMessages": lambda md: stub.GetMessages(pb.GetMessagesRequest(session_id=SESSION), metadata=md),
        "GetContext": lambda md: stub.GetContext(pb.GetContextRequest(session_id=SESSION, label="other_x"),
                                                 metadata=md),
        "SetContext": lambda md: stub.SetContext(
            pb.SetContextRequest(session_id=SESSION, label="other_x", content="v"), metadata=md),
        "SendMessage": lambda md: stub.SendMessage(pb.SendMessageRequest(session_id=SESSION, text="x"), metadata=md),
        "GetSessionInfo": lambda md: stub.GetSessionInfo(pb.GetSessionInfoRequest(session_id=SESSION), metadata=md),
    }


GRANTING_FIELD = {
    "ReadFile": "permissions.workspace",
    "ListFiles": "permissions.workspace",
    "WriteFile": "permissions.workspace: read-write",
    "DeleteFile": "permissions.workspace: read-write",
    "GetMessages": "permissions.messages: read",
    "GetContext": "permissions.context.read",
    "SetContext": "permissions.context.write",
    "SendMessage": "permissions.session.sendMessage",
    "GetSessionInfo": "permissions.session.metadata",
}


@pytest.mark.parametrize("method", list(GRANTING_FIELD))
async def test_method_is_denied_without_its_permission(env: Env, method: str) -> None:
    md = env.extension()
    code, details = await _code(_calls(env.stub)[method](md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "audit-log" in details and method in details and GRANTING_FIELD[method] in details


@pytest.mark.parametrize("method", ["WriteFile", "DeleteFile"])
async def test_workspace_read_does_not_grant_changes(env: Env, method: str) -> None:
    md = env.extension(workspace="read")
    code, _ = await _code(_calls(env.stub)[method](md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert (env.workspace / "notes.txt").read_text() == "hello"  # type: ignore[operator]


@pytest.mark.parametrize("method", ["GetContext", "SetContext"])
async def test_own_context_does_not_reach_other_labels(env: Env, method: str) -> None:
    md = env.extension(context={"read": "own", "write": "own"})
    code, _ = await _code(_calls(env.stub)[method](md))  # label "other_x"
    assert code == grpc.StatusCode.PERMISSION_DENIED


async def test_own_context_does_not_reach_a_sibling_whose_name_extends_it(env: Env) -> None:
    """`own` of extension `my` does not reach `my_tools.usage`, a label of extension `my-tools`."""
    md = env.extension(name="my", context={"read": "own"})
    env.session.context["my_tools.usage"] = "theirs"
    for label in ("my_tools.usage", "my_tools_usage"):
        code, _ = await _code(env.stub.GetContext(pb.GetContextRequest(session_id=SESSION, label=label), metadata=md))
        assert code == grpc.StatusCode.PERMISSION_DENIED, label


async def test_own_context_does_not_match_a_longer_name(env: Env) -> None:
    md = env.extension(context={"read": "own"})
    code, _ = await _code(env.stub.GetContext(pb.GetContextRequest(session_id=SESSION, label="audit_logger"),
                                              metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED


# ---------------------------------------------------------------- audit


async def test_every_call_is_audited_allowed_or_denied(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    md = env.extension(workspace="read")
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    await env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="notes.txt"), metadata=md)
    await _code(env.stub.WriteFile(pb.WriteFileRequest(session_id=SESSION, path="x", content=b""), metadata=md))
    lines = [r for r in caplog.records if r.name == "hookwire.audit"]
    assert len(lines) == 2
    allowed, denied = lines
    assert "extension=audit-log method=ReadFile session=sess-1 target=notes.txt outcome=ok" in allowed.getMessage()
    assert "method=WriteFile" in denied.getMessage() and "outcome=denied" in denied.getMessage()
    assert denied.levelno == logging.WARNING


async def test_unauthenticated_calls_are_audited(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    await _code(env.stub.GetMessages(pb.GetMessagesRequest(session_id=SESSION), metadata=[(TOKEN_METADATA_KEY, "x")]))
    [line] = [r for r in caplog.records if r.name == "hookwire.audit"]
    assert "method=GetMessages" in line.getMessage() and "outcome=unauthenticated" in line.getMessage()


# ---------------------------------------------------------------- workspace confinement


@pytest.mark.parametrize("path", ["../outside.txt", "sub/../../outside.txt", "..", "/etc/hostname"])
async def test_paths_escaping_the_workspace_are_denied(env: Env, path: str) -> None:
    (env.base / "outside.txt").write_text("secret")
    md = env.extension(workspace="read-write")
    code, details = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path=path), metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert path in details


async def test_write_through_dotdot_is_denied_and_writes_nothing(env: Env) -> None:
    md = env.extension(workspace="read-write")
    code, _ = await _code(env.stub.WriteFile(
        pb.WriteFileRequest(session_id=SESSION, path="../planted.txt", content=b"x"), metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert not (env.base / "planted.txt").exists()


async def test_symlink_pointing_out_of_the_workspace_is_denied(env: Env) -> None:
    (env.base / "outside.txt").write_text("secret")
    (env.workspace / "link").symlink_to(env.base / "outside.txt")  # type: ignore[operator]
    md = env.extension(workspace="read-write")
    code, details = await _code(env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="link"), metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "escapes the workspace root" in details
    code, _ = await _code(env.stub.WriteFile(pb.WriteFileRequest(session_id=SESSION, path="link", content=b"x"),
                                             metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert (env.base / "outside.txt").read_text() == "secret"


async def test_symlinked_directory_out_of_the_workspace_is_denied(env: Env) -> None:
    (env.workspace / "etc").symlink_to("/etc")  # type: ignore[operator]
    md = env.extension(workspace="read")
    code, _ = await _code(env.stub.ListFiles(pb.ListFilesRequest(session_id=SESSION, path="etc"), metadata=md))
    assert code == grpc.StatusCode.PERMISSION_DENIED


async def test_symlink_inside_the_workspace_is_followed(env: Env) -> None:
    (env.workspace / "alias").symlink_to("notes.txt")  # type: ignore[operator]
    md = env.extension(workspace="read")
    reply = await env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="alias"), metadata=md)
    assert reply.content == b"hello"


async def test_deleting_a_symlink_removes_the_link_not_its_target(env: Env) -> None:
    (env.base / "outside.txt").write_text("secret")
    (env.workspace / "link").symlink_to(env.base / "outside.txt")  # type: ignore[operator]
    md = env.extension(workspace="read-write")
    reply = await env.stub.DeleteFile(pb.DeleteFileRequest(session_id=SESSION, path="link"), metadata=md)
    assert reply.deleted
    assert (env.base / "outside.txt").read_text() == "secret"
    assert not (env.workspace / "link").is_symlink()  # type: ignore[operator]


async def test_read_of_a_missing_file_answers_missing_not_an_error(env: Env) -> None:
    md = env.extension(workspace="read")
    reply = await env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="nope.txt"), metadata=md)
    assert reply.missing is True and reply.content == b""


async def test_read_in_a_missing_directory_answers_missing(env: Env) -> None:
    md = env.extension(workspace="read")
    reply = await env.stub.ReadFile(pb.ReadFileRequest(session_id=SESSION, path="no/such/file"), metadata=md)
    assert reply.missing is True


async def test_get_messages_with_a_limit_of_zero_is_empty_and_without_a_limit_is_all(env: Env) -> None:
    md = env.extension(messages="read")
    none = await env.stub.GetMessages(pb.GetMessagesRequest(session_id=SESSION, limit=0, limited=True), metadata=md)
    every = await env.stub.GetMessages(pb.GetMessagesRequest(session_id=SESSION), metadata=md)
    assert json.loads(none.messages_json) == []
    assert [m["id"] for m in json.loads(every.messages_json)] == ["m1", "m2"]


async def test_write_over_the_size_cap_is_refused(env: Env) -> None:
    md = env.extension(workspace="read-write")
    code, details = await _code(env.stub.WriteFile(
        pb.WriteFileRequest(session_id=SESSION, path="big.bin", content=b"\0" * (MAX_FILE_BYTES + 1)), metadata=md))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not (env.workspace / "big.bin").exists()  # type: ignore[operator]
