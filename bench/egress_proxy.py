"""Egress proxy overhead: one HTTPS-shaped exchange (CONNECT, then 4 KB each way) through an extension's egress
proxy (host/sandbox/_egress_proxy.py, over its Unix socket, resolver override to a local server) beside the same exchange
on a direct TCP connection to that server. Same process, same server, alternating rounds (ABAB); medians.

Measured: the host-side proxy (accept, parse, policy, resolve, connect upstream, relay). The in-namespace relay
(host/sandbox/_egress_relay.py) adds one more local hop inside the sandbox, not measured here.

    .venv/bin/python -m bench --only egress_proxy      (or: .venv/bin/python bench/egress_proxy.py [--quick])
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

if not __package__:  # run as a script: import the package properly
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "bench"  # noqa: A001

from host.sandbox._egress_proxy import EgressProxy

from ._common import Config, Section, abab, median, pct, rnd, time_calls, workdir

NAME = "egress_proxy"
SIZE = 4096  # bytes each way: a small TLS handshake + request/response


async def run(cfg: Config) -> Section:
    calls = cfg.n(400, 40)
    warmup = cfg.n(50, 10)
    out = Section()
    reply = b"r" * SIZE
    request = b"q" * SIZE

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readexactly(SIZE)
            writer.write(reply)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with workdir("hwbe-") as work:
        proxy = EgressProxy("bench", [f"api.bench.test:{port}", f"127.0.0.1:{port}"], work / "egress.sock",
                            resolver={"api.bench.test": "127.0.0.1"}, max_connections=64)
        await proxy.start()
        connect = f"CONNECT api.bench.test:{port} HTTP/1.1\r\nHost: api.bench.test:{port}\r\n\r\n".encode()

        async def direct() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request)
            await reader.readexactly(SIZE)
            writer.close()

        async def proxied() -> None:
            reader, writer = await asyncio.open_unix_connection(str(proxy.socket_path))
            writer.write(connect)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"the proxy refused the benchmark's CONNECT: {head!r}")
            writer.write(request)
            await reader.readexactly(SIZE)
            writer.close()

        try:
            await time_calls(warmup, direct)
            await time_calls(warmup, proxied)

            async def a() -> list[float]:
                return await time_calls(calls, direct)

            async def b() -> list[float]:
                return await time_calls(calls, proxied)

            direct_rounds, proxy_rounds = await abab(cfg.ab_rounds, a, b)
        finally:
            await proxy.close()
            server.close()
    direct_ms = median([pct(r, 0.5) for r in direct_rounds]) / 1000
    proxy_ms = median([pct(r, 0.5) for r in proxy_rounds]) / 1000
    out.values = {
        "egress_proxy_overhead_ms": rnd(proxy_ms - direct_ms, 3),
        "egress_proxy_ratio": rnd(proxy_ms / direct_ms, 2),
    }
    out.extra = {"egress_direct_p50_ms": rnd(direct_ms, 3), "egress_proxied_p50_ms": rnd(proxy_ms, 3),
                 "egress_exchanges": calls}
    return out


if __name__ == "__main__":
    import json

    quick = "--quick" in sys.argv
    section = asyncio.run(run(Config(quick=quick)))
    print(json.dumps({**section.values, **section.extra}))
