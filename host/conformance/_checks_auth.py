"""Clauses 2.1-2.3: the token check on every Extension method, and the health service."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from extension_sdk.proto import TOKEN_METADATA_KEY
from extension_sdk.proto import extension_pb2 as pb

from ._kit import Kit
from ._wire import call_context

_ACCEPTED = {grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED}
_PROBE_TIMEOUT_S = 5.0

Metadata = tuple[tuple[str, str], ...]


def _probes(kit: Kit) -> list[tuple[str, Callable[[Metadata], Awaitable[None]]]]:
    """Every Extension method but Shutdown (see shutdown_denied), called with the given metadata."""
    stub, t = kit.stub, _PROBE_TIMEOUT_S
    ctx = call_context()

    async def unary(method: str, request: object, md: Metadata) -> None:
        await getattr(stub, method)(request, metadata=md, timeout=t)

    async def execute(md: Metadata) -> None:
        call = stub.ExecuteTool(pb.ExecuteToolRequest(context=ctx, name="hookwire-kit-no-such-tool", input_json="{}"),
                                metadata=md, timeout=t)
        async for _ in call:
            pass

    async def connect(md: Metadata) -> None:
        rpc = kit.channel.stream_stream("/hookwire.v1.Extension/Connect",
                                        request_serializer=pb.HostFrame.SerializeToString,
                                        response_deserializer=lambda b: b)
        call = rpc(metadata=md, timeout=t)
        await call.done_writing()
        while await call.read() is not grpc.aio.EOF:
            pass

    return [
        ("Describe", lambda md: unary("Describe", pb.DescribeRequest(protocol_version="1"), md)),
        ("BeforeTurn", lambda md: unary("BeforeTurn", pb.BeforeTurnRequest(context=ctx), md)),
        ("BeforeToolCall", lambda md: unary("BeforeToolCall", pb.BeforeToolCallRequest(context=ctx), md)),
        ("AfterToolCall", lambda md: unary("AfterToolCall", pb.AfterToolCallRequest(context=ctx), md)),
        ("OnStepFinish", lambda md: unary("OnStepFinish", pb.OnStepFinishRequest(context=ctx), md)),
        ("OnChunk", lambda md: unary("OnChunk", pb.OnChunkRequest(context=ctx), md)),
        ("Observe", lambda md: unary("Observe", pb.ObservationBatch(context=ctx), md)),
        ("ExecuteTool", execute),
        ("Connect", connect),
    ]


async def _outcome(probe: Callable[[Metadata], Awaitable[None]], md: Metadata) -> grpc.StatusCode:
    try:
        await probe(md)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def _wrong() -> Metadata:
    return ((TOKEN_METADATA_KEY, "wrong-" + secrets.token_urlsafe(16)),)


async def check_tokens(kit: Kit) -> None:
    """2.1 (no token) and 2.2 (a wrong token) on every method but Shutdown (checked last, by the runner)."""
    for clause, md in (("2.1", ()), ("2.2", _wrong())):
        bad, unimplemented = [], []
        for method, probe in _probes(kit):
            code = await _outcome(probe, md)
            if code == grpc.StatusCode.UNIMPLEMENTED:
                unimplemented.append(method)
            elif code not in _ACCEPTED:
                bad.append(f"{method} answered {code.name}")
        kit.results.set(clause, "FAIL" if bad else "PASS",
                        "; ".join(bad) if bad else "UNAUTHENTICATED from every method"
                        + (f" (UNIMPLEMENTED: {', '.join(unimplemented)})" if unimplemented else ""))


async def shutdown_denied(kit: Kit, grace_ms: int) -> tuple[bool, str]:
    """Shutdown without a token, then with a wrong one: (all refused, what happened). An accepted call stops it."""
    for clause, md in (("2.1", ()), ("2.2", _wrong())):
        try:
            await kit.stub.Shutdown(pb.ShutdownRequest(grace_ms=grace_ms), metadata=md, timeout=_PROBE_TIMEOUT_S)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in _ACCEPTED:
                continue
            kit.results.failed(clause, f"Shutdown answered {exc.code().name}")
            return False, f"Shutdown ({'no' if not md else 'a wrong'} token) answered {exc.code().name}"
        kit.results.failed(clause, f"Shutdown {'without a' if not md else 'with a wrong'} token was accepted "
                                   "(the extension stopped)")
        return False, "an unauthenticated Shutdown was accepted"
    return True, ""


async def check_health(kit: Kit) -> None:
    """2.3: Health/Check without a token answers SERVING (UNIMPLEMENTED or NOT_FOUND: not served, allowed)."""
    timeout = kit.manifest.timeouts.health_timeout_ms / 1000
    stub = health_pb2_grpc.HealthStub(kit.channel)
    try:
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        code = exc.code()
        if code in (grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.NOT_FOUND):
            kit.results.passed("2.3", f"not served ({code.name}); the host counts that as alive")
        elif code == grpc.StatusCode.UNAUTHENTICATED:
            kit.results.failed("2.3", "UNAUTHENTICATED: the health service must answer without a token")
        else:
            kit.results.failed("2.3", f"no answer within {timeout * 1000:.0f} ms (timeouts.healthTimeoutMs): "
                                      f"{code.name}: {exc.details()}")
        return
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)
    if resp.status == health_pb2.HealthCheckResponse.SERVING:
        kit.results.passed("2.3", "SERVING")
    else:
        kit.results.failed("2.3", f"answered {status} while serving")
