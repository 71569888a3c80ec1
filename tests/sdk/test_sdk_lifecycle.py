"""Process lifecycle: auth, lifeline, Shutdown, signals, the magic cookie, health."""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path

import grpc
import pytest
from sdk_processes import Running, make_env, read_line, spawn, start, wait_exit
from grpc_health.v1 import health_pb2, health_pb2_grpc

from extension_sdk.proto import TOKEN_METADATA_KEY, extension_pb2 as pb


def describe(ext: Running, metadata: tuple[tuple[str, str], ...]) -> pb.DescribeResponse:
    return ext.stub.Describe(pb.DescribeRequest(protocol_version="1"), metadata=metadata, timeout=10)


def test_missing_token_is_unauthenticated(greeter: Running) -> None:
    with pytest.raises(grpc.RpcError) as info:
        describe(greeter, ())
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_wrong_token_is_unauthenticated(greeter: Running) -> None:
    with pytest.raises(grpc.RpcError) as info:
        describe(greeter, ((TOKEN_METADATA_KEY, "not-the-token"),))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_wrong_token_on_streaming_call_is_unauthenticated(greeter: Running) -> None:
    request = pb.ExecuteToolRequest(name="greet", input_json='{"name": "x"}')
    with pytest.raises(grpc.RpcError) as info:
        list(greeter.stub.ExecuteTool(request, metadata=((TOKEN_METADATA_KEY, "nope"),), timeout=10))
    assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_health_service_serving_without_token(greeter: Running) -> None:
    stub = health_pb2_grpc.HealthStub(greeter.channel)
    resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_stdin_eof_makes_the_process_exit(fresh_greeter: Running) -> None:
    assert fresh_greeter.proc.stdin is not None
    fresh_greeter.proc.stdin.close()
    assert wait_exit(fresh_greeter.proc) == 0


def test_shutdown_rpc_answers_then_exits_zero(fresh_greeter: Running) -> None:
    fresh_greeter.stub.Shutdown(pb.ShutdownRequest(grace_ms=500), metadata=fresh_greeter.md, timeout=10)
    assert wait_exit(fresh_greeter.proc) == 0


def test_sigterm_stops_gracefully(fresh_greeter: Running) -> None:
    fresh_greeter.proc.send_signal(signal.SIGTERM)
    assert wait_exit(fresh_greeter.proc) == 0
    assert not (fresh_greeter.dir / "ext.sock").exists()


def test_no_cookie_prints_friendly_message_and_exits_1() -> None:
    with tempfile.TemporaryDirectory(prefix="hw-sdk-") as d:
        env = make_env(Path(d), "greeter", "t")
        del env["HOOKWIRE_MAGIC_COOKIE"]
        proc = start("greeter", env)
        out, err = proc.communicate(timeout=15)
    assert proc.returncode == 1
    assert out == b""
    assert b"this is a hookwire extension; load its manifest from a hookwire host" in err


def test_socket_flag_serves_without_cookie() -> None:
    with tempfile.TemporaryDirectory(prefix="hw-sdk-") as d:
        sock = os.path.join(d, "manual.sock")
        env = {"PATH": os.environ.get("PATH", "")}
        proc = start("greeter", env, args=("--socket", sock))
        try:
            assert read_line(proc, 15) == f"hookwire|1|unix:{sock}\n"
        finally:
            proc.stdin.close()  # type: ignore[union-attr]
            assert wait_exit(proc) == 0
            proc.stdout.close()  # type: ignore[union-attr]
            proc.stderr.close()  # type: ignore[union-attr]


def test_log_lines_name_the_extension() -> None:
    ext = spawn("greeter")
    try:
        ext.stub.Shutdown(pb.ShutdownRequest(grace_ms=100), metadata=ext.md, timeout=10)
        assert wait_exit(ext.proc) == 0
        assert "[greeter]" in ext.stderr_text()
    finally:
        ext.stop()


def test_shutdown_exits_even_with_a_sync_tool_still_running() -> None:
    ext = spawn("mathx")
    try:
        stream = ext.stub.ExecuteTool(pb.ExecuteToolRequest(name="nap", input_json='{"seconds": 60}'), metadata=ext.md, timeout=30)
        ext.stub.Shutdown(pb.ShutdownRequest(grace_ms=200), metadata=ext.md, timeout=10)
        assert wait_exit(ext.proc, 15) == 0
        with pytest.raises(grpc.RpcError):
            list(stream)
    finally:
        ext.stop()


def test_raising_hook_handler_is_logged_to_stderr_naming_the_hook() -> None:
    ext = spawn("mathx")
    try:
        req = pb.OnChunkRequest(snapshot=pb.ChunkSnapshot(type="text-delta", text="boom"))
        ext.stub.OnChunk(req, metadata=ext.md, timeout=10)
        ext.stub.Shutdown(pb.ShutdownRequest(grace_ms=100), metadata=ext.md, timeout=10)
        assert wait_exit(ext.proc) == 0
        assert "onChunk handler raised ValueError: chunk handler exploded" in ext.stderr_text()
    finally:
        ext.stop()


def test_sdk_import_does_not_import_pydantic() -> None:
    import subprocess
    import sys

    code = "import extension_sdk, sys; print('pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True)
    assert out.stdout.strip() == "False"
