"""Egress through the per-extension proxy, end to end: real sandboxed extensions in real host.Agent turns.

The extension runs in its own network namespace; its only way out is the relay on 127.0.0.1:3128 to the host's
egress proxy. A resolver override maps test names to local servers (loopback only: nothing reaches the internet).
Each scenario checks the persisted messages and that the next turn works.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fault_helpers import SESSION, FaultHost, manifest, persisted_and_next_turn_works, tool_output, wait_until
from fixtures.sandbox_dirs import require

from host import ExtensionManager, ExtensionStartError

Record = Callable[[str, str, str], None]
REPO = Path(__file__).resolve().parents[2]
RESOLVER = {"api.test": "127.0.0.1", "evil.test": "127.0.0.1", "inner.test": "127.0.0.1"}


@contextlib.asynccontextmanager
async def origin(tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[int, list[bytes]]]:
    """A local HTTP/1.1 server (HTTPS with `tls`): answers `origin saw: <request line>`; records request heads."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            head = await reader.readuntil(b"\r\n\r\n")
            heads.append(head)
            body = b"origin saw: " + head.split(b"\r\n")[0]
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=tls)
    try:
        yield server.sockets[0].getsockname()[1], heads
    finally:
        server.close()


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, str]:
    """A self-signed certificate for api.test: (server context, the PEM the extension trusts)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("cert")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "k.pem"),
                    "-out", str(d / "c.pem"), "-days", "1", "-subj", "/CN=api.test",
                    "-addext", "subjectAltName=DNS:api.test"], check=True, capture_output=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(d / "c.pem", d / "k.pem")
    return ctx, (d / "c.pem").read_text()


def egress_manifest(tmp_path: Path, network: list[str], name: str = "egress", **fields: Any) -> Path:
    return manifest(tmp_path, "egress_ext.py", name=name, permissions={"network": network},
                    timeouts={"toolMs": 30000}, **fields)


@contextlib.asynccontextmanager
async def egress_host(tmp_path: Path, *paths: Path, sandbox: str = "auto") -> AsyncIterator[FaultHost]:
    """A host agent on a SQLite store whose manager resolves names through RESOLVER (never DNS)."""
    require("egress_proxy")
    async with ExtensionManager(sandbox=sandbox, egress_resolver=RESOLVER) as mgr:  # type: ignore[arg-type]
        await mgr.load_all(list(paths))
        async with FaultHost(session_id=SESSION, store=tmp_path / "store.db", manager=mgr) as agent:
            yield agent


def call(tool: str, **args: Any) -> str:
    return f"/tool egress_{tool} {json.dumps(args)}"


async def one_tool(tmp_path: Path, network: list[str], tool: str, **args: Any) -> tuple[Any, Any]:
    """Run one turn calling one tool of the egress fixture; (its output, the turn result)."""
    async with egress_host(tmp_path, egress_manifest(tmp_path, network)) as agent:
        result = await agent.chat(call(tool, **args))
    assert result.status == "completed", result.error
    return tool_output(result, f"egress_{tool}"), result


async def test_listed_name_gets_through_over_plain_http(tmp_path: Path, record: Record) -> None:
    """urllib inside the sandbox fetches http://api.test:PORT through the proxy; the origin sees origin form."""
    async with origin() as (port, heads):
        sent = call("fetch", url=f"http://api.test:{port}/hello?x=1")
        async with egress_host(tmp_path, egress_manifest(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"])) as agent:
            result = await agent.chat(sent)
    output = tool_output(result, "egress_fetch")
    assert output == "200 origin saw: GET /hello?x=1 HTTP/1.1"
    assert heads[0] == (f"GET /hello?x=1 HTTP/1.1\r\nAccept-Encoding: identity\r\nHost: api.test:{port}\r\n"
                        f"User-Agent: Python-urllib/{sys.version_info[0]}.{sys.version_info[1]}\r\n"
                        "Connection: close\r\n\r\n").encode()  # proxy headers dropped, one request per connection
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("egress: listed name, plain HTTP", "200 from the local origin via the proxy", output)


async def test_listed_name_gets_through_over_https_connect(tmp_path: Path, record: Record,
                                                           cert: tuple[ssl.SSLContext, str]) -> None:
    """urllib's HTTPS through a CONNECT tunnel reaches a local TLS origin, certificate checked for api.test."""
    tls, pem = cert
    async with origin(tls) as (port, _):
        output, result = await one_tool(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], "fetch",
                                        url=f"https://api.test:{port}/secure", cadata=pem)
    assert output == "200 origin saw: GET /secure HTTP/1.1"
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: listed name, HTTPS (CONNECT + TLS)", "200 through the tunnel, TLS end to end", output)


async def test_httpx_uses_the_proxy_from_the_environment(tmp_path: Path, record: Record) -> None:
    """httpx (trust_env) inside the sandbox goes through the proxy too."""
    pytest.importorskip("httpx")
    async with origin() as (port, _):
        output, result = await one_tool(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], "fetch_httpx",
                                        url=f"http://api.test:{port}/x")
    assert output == "200 origin saw: GET /x HTTP/1.1"
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: httpx from the environment", "200 via the proxy", output)


async def test_grpc_client_reaches_a_listed_host_through_the_proxy(tmp_path: Path, record: Record) -> None:
    """A gRPC channel to api.test:PORT inside the sandbox goes through the proxy (CONNECT) to a local server."""
    import grpc
    from grpc_health.v1 import health, health_pb2_grpc

    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        output, result = await one_tool(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], "grpc_health",
                                        target=f"api.test:{port}")
    finally:
        await server.stop(0)
    assert output == "SERVING"
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: gRPC client via the proxy", "health check SERVING through CONNECT", output)


async def test_unlisted_name_is_refused_with_the_clear_error_and_traced(tmp_path: Path, record: Record) -> None:
    """A name not in permissions.network gets the proxy's 403 line; the turn's trace shows the refusal."""
    async with origin() as (port, heads):
        output, result = await one_tool(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], "fetch",
                                        url=f"http://evil.test:{port}/steal")
    assert output == f"403 hookwire egress: 'evil.test:{port}' is not in extension 'egress' permissions.network"
    assert heads == []
    egress = [e for e in result.trace if e.hook == "egress"]
    assert [(e.extension, e.outcome) for e in egress] == [("egress", "denied")]
    assert egress[0].detail == (f"evil.test:{port} refused, up 0 B, down 0 B: 'evil.test:{port}' is not in "
                                "extension 'egress' permissions.network")
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: unlisted name", "403 naming target + extension; in the trace", output[:80])


async def test_ip_literal_is_refused(tmp_path: Path, record: Record) -> None:
    """http://127.0.0.1:PORT is refused when only the name is listed."""
    async with origin() as (port, heads):
        output, result = await one_tool(tmp_path, [f"api.test:{port}"], "fetch", url=f"http://127.0.0.1:{port}/")
    assert output == (f"403 hookwire egress: '127.0.0.1:{port}' is an IP address that is not listed in extension "
                      "'egress' permissions.network")
    assert heads == []
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: IP literal", "403, nothing reaches the server", output[:80])


async def test_listed_name_resolving_to_loopback_is_refused(tmp_path: Path, record: Record) -> None:
    """A listed name that resolves to 127.0.0.1 is refused unless 127.0.0.1 is listed too (no rebinding inward)."""
    async with origin() as (port, heads):
        output, result = await one_tool(tmp_path, [f"inner.test:{port}"], "fetch", url=f"http://inner.test:{port}/")
    assert output == (f"403 hookwire egress: 'inner.test:{port}' resolves to 127.0.0.1, a loopback/private/"
                      "link-local/metadata address that is not listed in extension 'egress' permissions.network")
    assert heads == []
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: name -> 127.0.0.1, not listed", "403, the host's own services stay out of reach", output[:80])


async def test_raw_socket_ignoring_the_proxy_gets_no_connection(tmp_path: Path, record: Record) -> None:
    """A raw TCP connect to the host's server (ignoring the proxy variables) fails; the server sees nothing."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.setblocking(False)
    port = srv.getsockname()[1]
    try:
        output, result = await one_tool(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], "raw",
                                        host="127.0.0.1", port=port)
        with pytest.raises(BlockingIOError):
            srv.accept()  # nothing ever connected
    finally:
        srv.close()
    assert output == "ConnectionRefusedError: Connection refused"  # the namespace's own loopback: nobody there
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: raw socket ignoring the proxy", "no route: refused inside the namespace", output)


async def test_connections_beyond_the_cap_are_refused(tmp_path: Path, record: Record) -> None:
    """With limits.egressConnections 1, a fetch while a tunnel is held open is refused with the cap's reason."""
    async with origin() as (port, heads):
        path = egress_manifest(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"], limits={"egressConnections": 1})
        sent = call("hold_then_fetch", hold=f"api.test:{port}", url=f"http://api.test:{port}/second")
        async with egress_host(tmp_path, path) as agent:
            result = await agent.chat(sent)
    output = tool_output(result, "egress_hold_then_fetch")
    assert output == {"held": "HTTP/1.1 200 Connection established",
                      "fetch": "403 hookwire egress: extension 'egress' has 1 egress connections open "
                               "(limits.egressConnections)"}
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("egress: connection cap (1)", "second connection refused with the cap's reason", output["fetch"][4:80])


async def test_audit_lines_name_each_attempt(tmp_path: Path, record: Record,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """One hookwire.audit line per attempt, naming the extension, target, verdict and bytes."""
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    async with origin() as (port, _):
        path = egress_manifest(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"])
        async with egress_host(tmp_path, path) as agent:
            first = await agent.chat(call("fetch", url=f"http://api.test:{port}/a"))
            second = await agent.chat(call("fetch", url=f"http://evil.test:{port}/b"))

            def lines() -> list[str]:
                return [r.getMessage() for r in caplog.records
                        if r.name == "hookwire.audit" and r.getMessage().startswith("egress ")]

            assert await wait_until(lambda: len(lines()) == 2, 10), lines()
    assert tool_output(first, "egress_fetch").startswith("200 ")
    assert tool_output(second, "egress_fetch").startswith("403 ")
    allowed, refused = sorted(lines())
    assert allowed.startswith(f"egress extension=egress host=api.test port={port} allowed method=GET "
                              "address=127.0.0.1 up=")
    up = int(allowed.split(" up=")[1].split()[0])
    down = int(allowed.split(" down=")[1].split()[0])
    assert up > 0 and down == len(b"HTTP/1.1 200 OK\r\nContent-Length: 29\r\nConnection: close\r\n\r\n"
                                  b"origin saw: GET /a HTTP/1.1")
    assert refused.startswith(f"egress extension=egress host=evil.test port={port} refused method=GET address=- "
                              "up=0 down=0 ms=")
    await persisted_and_next_turn_works(tmp_path, second)
    record("egress: audit", "one hookwire.audit line per attempt", f"{len(lines())} lines: allowed + refused")


async def test_proxy_variables_point_at_the_in_namespace_relay(tmp_path: Path, record: Record) -> None:
    """The extension gets HTTP(S)_PROXY/ALL_PROXY (both cases) at the relay and an empty NO_PROXY."""
    output, result = await one_tool(tmp_path, ["api.test"], "proxy_env")
    url = "http://127.0.0.1:3128"
    assert output == {"HTTPS_PROXY": url, "HTTP_PROXY": url, "ALL_PROXY": url, "https_proxy": url,
                      "http_proxy": url, "all_proxy": url, "NO_PROXY": "", "no_proxy": ""}
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: proxy variables", "all at 127.0.0.1:3128, NO_PROXY empty", url)


async def test_required_mode_accepts_a_host_list(tmp_path: Path, record: Record) -> None:
    """sandbox="required" starts an extension with a host list now that the proxy is enforced."""
    async with egress_host(tmp_path, egress_manifest(tmp_path, ["api.test"]), sandbox="required") as agent:
        info = agent.manager.extensions()[0]
        result = await agent.chat(call("proxy_env"))
    assert {"net_namespace", "egress_proxy"} <= set(info.sandbox)
    await persisted_and_next_turn_works(tmp_path, result)
    record("egress: sandbox required + host list", "starts, egress_proxy enforced", ", ".join(info.sandbox)[:80])


async def test_sibling_cannot_use_another_extensions_proxy(tmp_path: Path, record: Record,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """A sibling extension that connects to another extension's proxy socket gets no tunnel through it."""
    caplog.set_level(logging.INFO, logger="hookwire.audit")
    async with origin() as (port, heads):
        victim = egress_manifest(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"])
        sibling = egress_manifest(tmp_path, ["other.test"], name="sibling")
        async with egress_host(tmp_path, victim, sibling) as agent:
            path = str(agent.manager._egress.get("egress").socket_path)  # noqa: SLF001 - the socket under attack
            sent = f'/tool sibling_unix_connect {json.dumps({"path": path, "target": f"api.test:{port}"})}'
            result = await agent.chat(sent)
    output = tool_output(result, "sibling_unix_connect")
    audit = [r.getMessage() for r in caplog.records if r.name == "hookwire.audit" and "extension=egress " in r.getMessage()]
    assert heads == []
    if output == "FileNotFoundError: No such file or directory":  # the socket is not in the sibling's root
        assert audit == []
    else:  # visible (a shared runtime dir), but the proxy serves only its own extension's network namespace
        assert output == "HTTP/1.1 403 Forbidden"
        assert len(audit) == 1 and " refused " in audit[0]
        assert audit[0].split(" reason=")[1].startswith(
            "connection from outside the sandbox of extension 'egress' (pid ")
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("egress: sibling uses another's proxy socket", "no tunnel (socket hidden, or 403 by namespace)", output)


# ---------------------------------------------------------------- the Node.js sample through the proxy


def _node_manifest(tmp_path: Path, network: list[str]) -> Path:
    data = yaml.safe_load((REPO / "sample_extensions/node_echo/manifest.yaml").read_text())
    data["cwd"] = str(REPO)
    data["permissions"]["network"] = network
    path = tmp_path / "node_echo.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def node_ready() -> None:
    if shutil.which("node") is None:
        pytest.skip("`node` is not on PATH")
    if not (REPO / "sample_extensions/node_echo/node_modules/@grpc/grpc-js").is_dir():
        pytest.skip("sample_extensions/node_echo/node_modules is missing: run `make node-deps`")


async def test_node_sample_fetches_through_the_proxy(tmp_path: Path, record: Record, node_ready: None) -> None:
    """node_echo's fetch tool (Node's http module via HTTP_PROXY) gets an allowed URL and the 403 for another."""
    async with origin() as (port, _):
        path = _node_manifest(tmp_path, [f"api.test:{port}", f"127.0.0.1:{port}"])
        sent = (f'/tool node_echo_fetch {{"url": "http://api.test:{port}/from-node"}}\n'
                f'/tool node_echo_fetch {{"url": "http://evil.test:{port}/from-node"}}')
        async with egress_host(tmp_path, path) as agent:
            result = await agent.chat(sent)
    outputs = [p.get("output") for p in result.message["parts"] if p.get("toolName") == "node_echo_fetch"]
    assert outputs == ["200 origin saw: GET /from-node HTTP/1.1",
                       f"403 hookwire egress: 'evil.test:{port}' is not in extension 'node_echo' "
                       "permissions.network"]
    await persisted_and_next_turn_works(tmp_path, result, sent)
    record("egress: Node sample (http via HTTP_PROXY)", "allowed 200, other 403", outputs[0])


async def test_unenforceable_host_list_is_refused_in_auto_mode(tmp_path: Path, record: Record,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the egress layer, auto refuses a host list instead of giving it the whole network."""
    from host.sandbox import _plan as _sandbox

    real = _sandbox.sandbox_capabilities()
    fake = {**real, "layers": {**real["layers"], "egress_proxy": {"available": False, "detail": "no relay here"}}}
    monkeypatch.setattr(_sandbox, "sandbox_capabilities", lambda: fake)
    with pytest.raises(ExtensionStartError) as info:
        async with ExtensionManager(sandbox="auto", egress_resolver=RESOLVER) as mgr:
            await mgr.load(egress_manifest(tmp_path, ["api.test"]))
    assert str(info.value).endswith("extension 'egress': sandbox mode is 'auto' but layer 'egress_proxy' cannot be "
                                    "enforced: no relay here")
    await persisted_and_next_turn_works_without_a_turn(tmp_path)
    record("egress: host list, no egress layer (auto)", "refused to start, never the whole network",
           "ExtensionStartError naming egress_proxy")


async def persisted_and_next_turn_works_without_a_turn(tmp_path: Path) -> None:
    """No turn ran: a fresh host on the same store path still completes a turn."""
    async with FaultHost(session_id=SESSION, store=tmp_path / "store.db") as agent:
        nxt = await agent.chat("next turn")
    assert nxt.message is not None and nxt.message["content"] == "echo: next turn"
