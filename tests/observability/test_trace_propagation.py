"""The trace context on the HostBridge paths (the stream's frames, the Unix socket's metadata), in this process (no OpenTelemetry SDK configured: the
span tree with an SDK is tests/observability/test_otel_traces.py, in a subprocess).

A bridge call made while a handler serves a traced call carries that trace context in its BridgeRequest (the
stream's metadata is fixed when it opens), and the host answers it inside that trace: its log lines carry the
caller's trace id."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import grpc

from extension_sdk._bridge_client import Host, HostConnection
from extension_sdk._call_context import set_current_call
from extension_sdk._stream_bridge import StreamBridgeClient
from extension_sdk.proto import extension_pb2 as pb
from extension_sdk.proto import host_bridge_pb2 as hb
from extension_sdk.proto import host_bridge_pb2_grpc as hb_grpc
from host import JsonFormatter, parse_manifest
from host.extensions._bridge_server import HostBridgeServer
from host.extensions._stream_bridge import StreamBridge

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


async def test_a_bridge_call_on_the_stream_carries_the_handlers_trace_context() -> None:
    out: asyncio.Queue[pb.ExtensionFrame | None] = asyncio.Queue()
    client = StreamBridgeClient(out)

    async def handler() -> str | None:  # what the SDK does around a handler: the call's context is current
        set_current_call(pb.CallContext(session_id="s1", request_id="r1", traceparent=TRACEPARENT,
                                        tracestate="vendor=x"))
        return await Host(client, "s1").get_context("notes")

    task = asyncio.create_task(handler())
    frame = await asyncio.wait_for(out.get(), 5)
    assert frame is not None
    request = frame.bridge_request
    assert (request.traceparent, request.tracestate) == (TRACEPARENT, "vendor=x")
    client.resolve(hb.BridgeResponse(id=request.id, get_context=hb.GetContextResponse(content="n")))
    assert await task == "n"


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # formatted at once: the span current at the call is read


async def test_the_host_answers_a_stream_bridge_call_inside_the_callers_trace(tmp_path: Path) -> None:
    bridge = HostBridgeServer(tmp_path / "bridge.sock")  # answers frames without listening
    manifest = parse_manifest({"name": "caller", "version": "1.0.0", "command": ["true"]})
    stream = StreamBridge(bridge, manifest)
    lines = _Lines()
    audit = logging.getLogger("hookwire.audit")
    audit.addHandler(lines)
    try:
        response = await stream.answer(hb.BridgeRequest(
            id=7, traceparent=TRACEPARENT, get_session_info=hb.GetSessionInfoRequest(session_id="s1")))
    finally:
        audit.removeHandler(lines)
        stream.close()
    assert response.code == grpc.StatusCode.PERMISSION_DENIED.value[0]  # the manifest grants no session metadata
    (line,) = [json.loads(text) for text in lines.lines]
    assert (line["logger"], line["extension"], line["trace_id"]) == ("hookwire.audit", "caller", TRACE_ID)


class _Recorder(hb_grpc.HostBridgeServicer):
    def __init__(self) -> None:
        self.metadata: dict[str, str] = {}

    async def GetContext(self, request: hb.GetContextRequest, context: grpc.aio.ServicerContext) -> hb.GetContextResponse:
        self.metadata = {k: str(v) for k, v in context.invocation_metadata() or ()}
        return hb.GetContextResponse(content="n")


async def test_a_bridge_call_on_the_unix_socket_carries_the_handlers_trace_context_in_metadata(tmp_path: Path) -> None:
    server = grpc.aio.server()
    recorder = _Recorder()
    hb_grpc.add_HostBridgeServicer_to_server(recorder, server)
    target = f"unix:{tmp_path / 'bridge.sock'}"
    server.add_insecure_port(target)
    await server.start()
    conn = HostConnection(target, "tok")
    try:
        async def handler() -> str | None:
            set_current_call(pb.CallContext(session_id="s1", request_id="r1", traceparent=TRACEPARENT))
            return await Host(conn, "s1").get_context("notes")

        assert await asyncio.create_task(handler()) == "n"
    finally:
        await conn.close()
        await server.stop(None)
    assert (recorder.metadata["x-hookwire-token"], recorder.metadata["traceparent"]) == ("tok", TRACEPARENT)
    assert "tracestate" not in recorder.metadata  # none was given
