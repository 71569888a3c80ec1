"""The `host` argument against a tiny in-test HostBridge servicer (real gRPC, real extension process)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from sdk_processes import Running, spawn

from extension_sdk.proto import TOKEN_METADATA_KEY, extension_pb2 as pb, host_bridge_pb2 as hb, host_bridge_pb2_grpc as hb_grpc


class RecordingBridge(hb_grpc.HostBridgeServicer):
    """Serves ReadFile from a dict; everything else is PERMISSION_DENIED. Records each call."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.files = {"notes.txt": b"system from notes"}

    def ReadFile(self, request: hb.ReadFileRequest, context: grpc.ServicerContext) -> hb.ReadFileResponse:
        token = dict(context.invocation_metadata()).get(TOKEN_METADATA_KEY)
        self.calls.append({"method": "ReadFile", "token": token, "session": request.session_id, "path": request.path})
        if request.path not in self.files:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"no access to {request.path}")
        return hb.ReadFileResponse(content=self.files[request.path])


@pytest.fixture(scope="module")
def bridge() -> Iterator[tuple[RecordingBridge, str]]:
    d = Path(tempfile.mkdtemp(prefix="hw-bridge-"))
    servicer = RecordingBridge()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    hb_grpc.add_HostBridgeServicer_to_server(servicer, server)
    target = f"unix:{d / 'bridge.sock'}"
    server.add_insecure_port(target)
    server.start()
    yield servicer, target
    server.stop(0)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def user(bridge: tuple[RecordingBridge, str]) -> Iterator[Running]:
    running = spawn("bridge_user", HOOKWIRE_HOST_ADDRESS=bridge[1])
    yield running
    running.stop()


def test_async_host_read_file_from_hook_sends_token_and_session(
    bridge: tuple[RecordingBridge, str], user: Running
) -> None:
    req = pb.BeforeTurnRequest(context=pb.CallContext(session_id="sess-hook"), snapshot=pb.TurnSnapshot())
    resp = user.stub.BeforeTurn(req, metadata=user.md, timeout=10)
    assert not resp.HasField("error"), resp.error.message
    assert resp.config.system == "system from notes"
    assert bridge[0].calls[-1] == {"method": "ReadFile", "token": user.token, "session": "sess-hook", "path": "notes.txt"}


def test_sync_host_read_file_from_sync_tool_sends_token_and_session(
    bridge: tuple[RecordingBridge, str], user: Running
) -> None:
    req = pb.ExecuteToolRequest(context=pb.CallContext(session_id="sess-tool"), name="read", input_json='{"path": "notes.txt"}')
    [event] = user.stub.ExecuteTool(req, metadata=user.md, timeout=10)
    assert json.loads(event.output_json) == "system from notes"
    assert bridge[0].calls[-1] == {"method": "ReadFile", "token": user.token, "session": "sess-tool", "path": "notes.txt"}


def test_bridge_error_raises_host_error_with_grpc_code(user: Running) -> None:
    req = pb.ExecuteToolRequest(context=pb.CallContext(session_id="s"), name="read", input_json='{"path": "secret"}')
    [event] = user.stub.ExecuteTool(req, metadata=user.md, timeout=10)
    assert json.loads(event.output_json) == "error: PERMISSION_DENIED"


def test_host_is_none_without_host_address() -> None:
    ext = spawn("bridge_user")
    try:
        [event] = ext.stub.ExecuteTool(pb.ExecuteToolRequest(name="has_host", input_json="{}"), metadata=ext.md, timeout=10)
        assert json.loads(event.output_json) is False
    finally:
        ext.stop()
