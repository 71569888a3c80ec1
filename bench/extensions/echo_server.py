"""Baseline: a bare grpc.aio unary echo server on a Unix socket (no SDK, no interceptor, no handler dispatch).

It answers `/bench.Echo/Echo` (a BeforeToolCallRequest) with an empty BeforeToolCallResponse, i.e. the same
messages the hook path carries. Prints `ready|unix:<path>` once serving; exits when stdin closes.

    python bench/extensions/echo_server.py /tmp/x/echo.sock
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

import grpc
import grpc.aio
from extension_sdk.proto import extension_pb2 as pb

METHOD = "/bench.Echo/Echo"


async def _echo(request: pb.BeforeToolCallRequest, context: Any) -> pb.BeforeToolCallResponse:
    return pb.BeforeToolCallResponse()


async def serve(path: str) -> None:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {"Echo": grpc.unary_unary_rpc_method_handler(
            _echo, request_deserializer=pb.BeforeToolCallRequest.FromString,
            response_serializer=pb.BeforeToolCallResponse.SerializeToString)},
    )
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix:{path}")
    await server.start()
    sys.stdout.write(f"ready|unix:{path}\n")
    sys.stdout.flush()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def lifeline() -> None:
        while os.read(0, 65536):
            pass
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=lifeline, daemon=True).start()
    await stop.wait()
    await server.stop(0.1)


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
