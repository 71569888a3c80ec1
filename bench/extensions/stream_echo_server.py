"""Baseline: a bare grpc.aio bidi-stream ping-pong server on a Unix socket (no SDK, no interceptor, no task hop).

It answers every frame on `/bench.Floor/Stream` (a HostFrame carrying a BeforeToolCallRequest) with an
ExtensionFrame of the same id carrying an empty BeforeToolCallResponse: the messages an awaited beforeToolCall
carries on hookwire's Connect stream, with nothing else done. Prints `ready|unix:<path>` once serving; exits when
stdin closes.

    python bench/extensions/stream_echo_server.py /tmp/x/floor.sock
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from extension_sdk.proto import extension_pb2 as pb

METHOD = "/bench.Floor/Stream"


async def _stream(requests: AsyncIterator[pb.HostFrame], context: Any) -> AsyncIterator[pb.ExtensionFrame]:
    async for frame in requests:
        yield pb.ExtensionFrame(id=frame.id, before_tool_call=pb.BeforeToolCallResponse())


async def serve(path: str) -> None:
    server = grpc.aio.server()
    handler = grpc.method_handlers_generic_handler(
        "bench.Floor",
        {"Stream": grpc.stream_stream_rpc_method_handler(
            _stream, request_deserializer=pb.HostFrame.FromString,
            response_serializer=pb.ExtensionFrame.SerializeToString)},
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
